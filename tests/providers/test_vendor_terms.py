"""Requests as the installed SDKs type them, and a loopback as strict as the vendors: every role's request
bodies (direct and batch, both vendors) captured through the real SDKs carry no key the SDK's own params
type does not declare, and the loopback refuses what the vendors refuse with their error shapes."""

import collections.abc
import json
import time
import typing

import anthropic
import openai
import pytest
import typing_extensions
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from evaluation.errors import InvalidInput
from evaluation.models import LLMConfig
from evaluation.providers import Message, ProviderSpec, get_llm, keys_check
from evaluation.providers.batch import BatchCall, request_for, vendor_for, wire_ids
from evaluation.providers.registry import ROLE_SETTINGS

pytestmark = pytest.mark.django_db

ROLES = ("rubric_judge", "simulator", "tutor", "proposition_judge", "gate", "suite_judge", "suite_agent", "judge")
SCHEMA = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
TOOLS = [{"name": "lookup", "description": "Look a word up.", "parameters": {"type": "object", "properties": {}}}]
TYPES = {"messages": MessageCreateParamsNonStreaming, "responses": ResponseCreateParamsNonStreaming}
TYPES["chat"] = CompletionCreateParamsNonStreaming


# --- an independent reading of the SDKs' TypedDicts: the keys each object may carry -------------------
def _strip(tp):
    while typing_extensions.get_origin(tp) in (
        typing_extensions.Required,
        typing_extensions.NotRequired,
        typing_extensions.Annotated,
    ):
        tp = typing_extensions.get_args(tp)[0]
    return tp


def undeclared(value, tp, path="") -> list[str]:
    """Paths of the keys in value that its TypedDict (found through unions and lists) does not declare."""
    tp = _strip(tp)
    origin = typing_extensions.get_origin(tp)
    if typing_extensions.is_typeddict(tp):
        if not isinstance(value, dict):
            return []
        hints = typing.get_type_hints(tp, include_extras=True)
        out = [f"{path}.{k}".lstrip(".") for k in value if k not in hints]
        for key, item in value.items():
            if key in hints:
                out += undeclared(item, hints[key], f"{path}.{key}")
        return out
    if origin is typing.Union:
        members = [m for m in typing_extensions.get_args(tp) if typing_extensions.is_typeddict(_strip(m))]
        if isinstance(value, dict) and members:
            tagged = [m for m in members if value.get("type") in _tags(_strip(m))] or members
            found = [undeclared(value, m, path) for m in tagged]
            return min(found, key=len)
        for member in typing_extensions.get_args(tp):
            inner = typing_extensions.get_origin(_strip(member))
            if isinstance(value, list) and inner in (list, collections.abc.Iterable, collections.abc.Sequence):
                return undeclared(value, member, path)
        return []
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence) and isinstance(value, list):
        (item_type,) = typing_extensions.get_args(tp)[:1] or (typing.Any,)
        return [p for i, item in enumerate(value) for p in undeclared(item, item_type, f"{path}[{i}]")]
    return []


def _tags(record) -> tuple:
    hint = typing.get_type_hints(record).get("type")
    return typing_extensions.get_args(_strip(hint)) if hint is not None else ()


def test_the_reading_of_the_types_finds_an_undeclared_key():
    """The check below can fail: a body with temperature (what anthropic 2.12.0's type lacks) is caught, and so
    is a key deep inside a system block, while OpenAI's Responses type does declare temperature."""
    body = {
        "model": "claude-opus-4-6",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "colour": "red"}]}],
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h", "size": 1}}],
        "temperature": 0.2,
    }
    assert sorted(undeclared(body, MessageCreateParamsNonStreaming)) == [
        "messages[0].content[0].colour",
        "system[0].cache_control.size",
        "temperature",
    ]
    assert undeclared({"model": "m", "input": "x", "temperature": 0.1}, ResponseCreateParamsNonStreaming) == []


# --- every role, both vendors, direct and batch ------------------------------------------------------
def _conversation(turns: int) -> list[Message]:
    history = [Message("system", "You play your part. " * 30)]
    for n in range(turns):
        history.append(Message("user" if n % 2 == 0 else "assistant", f"Turn {n}: a line of the conversation."))
    return history


SPECS = {
    "anthropic": lambda url, openai_url: ProviderSpec("anthropic", "claude-sonnet-4-6", url),
    "openai-responses": lambda url, openai_url: ProviderSpec("openai", "gpt-5.2", openai_url, {"api": "responses"}),
    "openai-chat": lambda url, openai_url: ProviderSpec("openai", "llama3", openai_url, {"api": "chat"}),
}


@pytest.mark.parametrize("vendor", sorted(SPECS))
def test_every_roles_requests_carry_only_what_the_sdk_declares(loopback, vendor):
    spec = SPECS[vendor](loopback.anthropic_url, loopback.openai_url)
    for role in ROLES:
        llm = get_llm(role, override=spec)
        llm.call(_conversation(2), schema=SCHEMA)  # a judge's shape
        llm.call(_conversation(6))  # a long conversation: a breakpoint on the history too
        llm.call(_conversation(1), tools=TOOLS)  # an agent's shape
    direct = [r for r in loopback.requests if r.endpoint in TYPES]
    assert len(direct) == 3 * len(ROLES)
    if vendor != "openai-chat":  # an OpenAI-compatible server has no batch API here
        for role in ROLES:
            llm = get_llm(role, override=spec)
            calls = {f"{role}-line-{i}": BatchCall(tuple(_conversation(2 + 3 * i)), SCHEMA) for i in range(2)}
            vendor_for(llm).submit({cid: request_for(llm, call) for cid, call in calls.items()})
    bodies = [(r.endpoint, r.body) for r in loopback.requests if r.endpoint in TYPES]
    assert len(bodies) == (3 if vendor == "openai-chat" else 5) * len(ROLES)
    assert loopback.refused == []  # the strict loopback took every one
    problems = {f"{endpoint} {i}": undeclared(body, TYPES[endpoint]) for i, (endpoint, body) in enumerate(bodies)}
    assert {where: keys for where, keys in problems.items() if keys} == {}
    if vendor == "anthropic":
        # No temperature for any role (the roles that default to one included), thinking for the judge.
        assert not any("temperature" in body for _, body in bodies)
        assert {r for r in ROLES if ROLE_SETTINGS[r].temperature is not None} >= {"simulator", "tutor", "gate"}
        assert any(body.get("thinking", {}).get("type") == "enabled" for _, body in bodies)
        batch_lines = bodies[-2 * len(ROLES) :]
        ttls = {json.dumps(b["system"][-1]["cache_control"]) for _, b in batch_lines}
        assert ttls == {'{"type": "ephemeral", "ttl": "1h"}'}
    if vendor == "openai-responses":
        assert all("reasoning" not in b or "temperature" not in b for _, b in bodies)
        assert all(tool.get("strict") is False for _, b in bodies for tool in b.get("tools", []))


# --- told at start, not by a 400 mid-run --------------------------------------------------------------
def test_a_role_configured_with_a_setting_its_model_does_not_take_is_refused_at_start(loopback):
    LLMConfig.objects.create(
        role="simulator", provider="anthropic", model="claude-opus-4-6", options={"temperature": 0.4}
    )
    LLMConfig.objects.create(
        role="judge", provider="openai", model="gpt-5.2", options={"reasoning_effort": "low", "temperature": 0.3}
    )
    with pytest.raises(InvalidInput) as caught:
        keys_check(["simulator", "judge"], None, field="provider")
    text = str(caught.value)
    assert "role 'simulator': anthropic/claude-opus-4-6 takes no temperature" in text
    assert "role 'judge': openai/gpt-5.2 takes no temperature (not together with reasoning_effort)" in text
    assert loopback.count() == 0
    LLMConfig.objects.filter(role="simulator").update(options={"thinking_budget": 2000})
    LLMConfig.objects.filter(role="judge").update(options={"reasoning_effort": "low"})
    keys_check(["simulator", "judge"], None, field="provider")  # what they take passes


# --- the strict loopback refuses what the vendors refuse ----------------------------------------------
def _anthropic(loopback) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=loopback.anthropic_url, max_retries=0)


def _openai(loopback) -> openai.OpenAI:
    return openai.OpenAI(api_key="k", base_url=loopback.openai_url, max_retries=0)


ASK = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"temperature": 0.5}, "temperature: Extra inputs are not permitted"),
        ({"max_tokens": "5"}, "max_tokens: Input should be an integer"),
        ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "greater than or equal to 1024"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2000}}, "`max_tokens` must be greater than"),
        (
            {"system": [{"type": "text", "text": f"s{i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]},
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        ({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}, "ttl"),
    ],
)
def test_anthropic_refusals_come_with_anthropics_error(loopback, extra, message):
    with pytest.raises(anthropic.BadRequestError) as caught:
        _anthropic(loopback).messages.create(model="claude-opus-4-6", max_tokens=10, messages=ASK, extra_body=extra)  # type: ignore[call-overload]
    assert caught.value.status_code == 400
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "invalid_request_error"
    assert message in caught.value.body["error"]["message"]


@pytest.mark.parametrize(
    ("extra", "code", "param"),
    [
        ({"thinking_budget": 10}, "unknown_parameter", "thinking_budget"),
        ({"max_output_tokens": "many"}, "invalid_type", "max_output_tokens"),
        ({"reasoning": {"effort": "high"}, "temperature": 0.2}, "unsupported_parameter", "temperature"),
    ],
)
def test_openai_refusals_come_with_openais_error(loopback, extra, code, param):
    with pytest.raises(openai.BadRequestError) as caught:
        _openai(loopback).responses.create(model="gpt-5.2", input="hi", extra_body=extra)
    assert caught.value.status_code == 400
    assert caught.value.code == code and caught.value.param == param


def test_anthropic_batches_refuse_a_long_or_repeated_custom_id(loopback):
    params = {"model": "claude-haiku-4-5", "max_tokens": 5, "messages": ASK}
    batches = _anthropic(loopback).messages.batches
    for requests, message in (
        ([{"custom_id": "r" * 65, "params": params}], "requests.0.custom_id: String should match pattern"),
        ([{"custom_id": "run:1", "params": params}], "String should match pattern"),
        ([{"custom_id": "a", "params": params}, {"custom_id": "a", "params": params}], "used by another request"),
        ([{"custom_id": "a", "params": {**params, "temperature": 0.1}}], "params.temperature: Extra inputs"),
    ):
        with pytest.raises(anthropic.BadRequestError) as caught:
            batches.create(requests=requests)  # type: ignore[arg-type]
        assert message in caught.value.body["error"]["message"]
    assert loopback.batch_desk.creates == 0
    # The product's own ids are short whatever the caller's keys: a 100-character run id goes through.
    assert wire_ids(["x" * 100, "y" * 100]) == {"x" * 100: "l0", "y" * 100: "l1"}


def test_an_openai_batch_with_an_invalid_line_fails_as_a_whole_naming_the_line(loopback):
    client = _openai(loopback)
    good = {"custom_id": "a", "method": "POST", "url": "/v1/responses", "body": {"model": "gpt-5.2", "input": "x"}}
    bad = {**good, "custom_id": "b", "body": {"model": "gpt-5.2", "input": "x", "seed": 3}}
    data = (json.dumps(good) + "\n" + json.dumps(bad) + "\n").encode()
    uploaded = client.files.create(file=("b.jsonl", data), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/responses", completion_window="24h")
    batch = client.batches.retrieve(batch.id)
    assert batch.status == "failed" and batch.errors is not None
    (error,) = batch.errors.data
    assert (error.line, error.code, error.message) == (2, "invalid_request", "Unknown parameter: 'seed'.")
    assert loopback.count("responses") == 0  # nothing ran


def test_anthropic_counts_no_line_until_the_batch_ends_and_batches_cancel_on_request(loopback):
    loopback.batch_desk.polls_to_end = 2
    params = {"model": "claude-haiku-4-5", "max_tokens": 5, "messages": ASK}
    batches = _anthropic(loopback).messages.batches
    batch = batches.create(requests=[{"custom_id": f"l{i}", "params": params} for i in range(4)])
    seen = [batches.retrieve(batch.id).request_counts for _ in range(3)]
    assert [(c.processing, c.succeeded) for c in seen] == [(4, 0), (4, 0), (0, 4)]
    other = batches.create(requests=[{"custom_id": f"l{i}", "params": params} for i in range(4)])
    assert batches.cancel(other.id).processing_status == "canceling"
    for _ in range(3):
        ended = batches.retrieve(other.id)
    assert ended.processing_status == "ended"
    assert (ended.request_counts.succeeded, ended.request_counts.canceled) == (2, 2)
    kinds = sorted(line.result.type for line in batches.results(other.id))
    assert kinds == ["canceled", "canceled", "succeeded", "succeeded"]


@pytest.mark.parametrize(("model", "cached"), [("claude-opus-4-6", False), ("claude-sonnet-4-6", True)])
def test_anthropic_caches_only_a_prefix_as_long_as_the_models_minimum(loopback, model, cached):
    """About 2,500 tokens of system prompt: enough for Sonnet 4.6 (1,024), not for Opus 4.6 (4,096)."""
    system = [{"type": "text", "text": "A long rubric line. " * 500, "cache_control": {"type": "ephemeral"}}]
    client = _anthropic(loopback)
    first, second = (
        client.messages.create(model=model, max_tokens=5, system=system, messages=ASK).usage for _ in range(2)
    )
    if cached:
        assert first.cache_creation_input_tokens > 2000 and second.cache_read_input_tokens > 2000
    else:
        assert (first.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, 0)


def test_openai_reports_the_tokens_it_writes_to_the_cache(loopback):
    client = _openai(loopback)
    prompt = [{"role": "system", "content": "Stable instructions. " * 600}, {"role": "user", "content": "hi"}]
    first, second = (client.responses.create(model="gpt-5.2", input=prompt).usage for _ in range(2))  # type: ignore[arg-type]
    assert first.input_tokens_details.cache_write_tokens >= 2048 and first.input_tokens_details.cached_tokens == 0
    assert second.input_tokens_details.cached_tokens == first.input_tokens_details.cache_write_tokens
    assert second.input_tokens_details.cache_write_tokens == 0
    prompt_messages = [Message("system", "Other stable instructions. " * 600), Message("user", "hi")]
    for api in ("responses", "chat"):
        spec = ProviderSpec("openai", "gpt-5.2", loopback.openai_url, {"api": api})
        usage = get_llm("rubric_judge", override=spec).call(prompt_messages).usage
        assert usage.cache_write_tokens >= 2048, api  # priced at the cache-write price (the input price, here)
        prompt_messages = [Message("system", "Yet other instructions. " * 600), Message("user", "hi")]


def test_the_rate_limit_is_a_token_bucket_that_refills_as_it_goes(loopback):
    """4 requests a 2 s window: 4 go, the 5th waits about half a second (one request's refill), not until a
    window ends; after that wait one more goes."""
    loopback.rpm, loopback.rate_window = 4, 2.0
    client = _openai(loopback)
    for _ in range(4):
        client.responses.create(model="gpt-5.2", input="x")
    with pytest.raises(openai.RateLimitError) as caught:
        client.responses.create(model="gpt-5.2", input="x")
    headers = caught.value.response.headers
    assert headers["retry-after"] == "1" and headers["x-ratelimit-remaining-requests"] == "0"
    time.sleep(0.6)
    raw = client.responses.with_raw_response.create(model="gpt-5.2", input="x")
    assert raw.headers["x-ratelimit-remaining-requests"] == "0" and loopback.rate_limited == 1


# --- prices: the 1-hour cache write, OpenAI's cache writes ---------------------------------------------
def test_one_hour_cache_writes_are_priced_at_their_own_price_and_batch_halves_it(db):
    from io import StringIO

    from django.core.management import call_command

    from evaluation.providers import Usage, estimate_cost

    call_command("load_prices", stdout=StringIO())
    usage = Usage(input_tokens=1000, cache_write_tokens=600, cache_write_long_tokens=400, output_tokens=10, calls=1)
    # Opus 4.6 (prices/vendors.yaml): input 5, 5-minute write 6.25, 1-hour write 10, output 25 per million.
    expected = (400 * 5.0 + 200 * 6.25 + 400 * 10.0 + 10 * 25.0) / 1e6
    assert estimate_cost("claude-opus-4-6", usage) == pytest.approx(expected)
    assert estimate_cost("claude-opus-4-6", usage, batch=True) == pytest.approx(expected / 2)
    # OpenAI's writes are billed at its cache-write price (the input price for gpt-5.2).
    written = Usage(input_tokens=3000, cache_write_tokens=2048, output_tokens=0, calls=1)
    assert estimate_cost("gpt-5.2", written) == pytest.approx(3000 * 1.75 / 1e6)
