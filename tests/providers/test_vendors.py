"""Each vendor through the real SDK against the loopback server: calls, JSON, usage, retries, errors."""

import datetime as dt
import time
from decimal import Decimal

import pytest
import urllib3

from evaluation.models import ModelPrice
from evaluation.providers import (
    AuthError,
    CostLimitReached,
    InvalidJSONError,
    Message,
    Meter,
    ProviderError,
    ProviderSpec,
    get_llm,
)
from evaluation.providers.loopback import Reply
from evaluation.providers.openai_api import CompatChat, _proxy_for
from evaluation.tutoring.server import free_port

SCORE_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}
VENDORS = {
    "openai-responses": ("openai", "gpt-5.2", {"api": "responses"}, "responses"),
    # An OpenAI-compatible server at a typed base URL: chat completions over urllib3, and through the SDK.
    "openai-chat": ("openai", "llama3", {"api": "chat"}, "chat"),
    "openai-chat-sdk": ("openai", "llama3", {"api": "chat", "client": "sdk"}, "chat"),
    "anthropic": ("anthropic", "claude-opus-4-6", {}, "messages"),
}


@pytest.fixture(params=list(VENDORS))
def vendor(request, loopback):
    provider, model, options, endpoint = VENDORS[request.param]
    base_url = loopback.anthropic_url if provider == "anthropic" else loopback.openai_url
    spec = ProviderSpec(provider, model, base_url, options)
    return spec, endpoint


def ask(spec, role="judge", **kwargs):
    meter = kwargs.pop("meter", None)
    return get_llm(role, override=spec, meter=meter).call(
        [Message("system", "You grade answers."), Message("user", "2+2=4?")], **kwargs
    )


def test_plain_call_returns_text_usage_and_model(vendor, loopback):
    spec, endpoint = vendor
    loopback.script("Yes, that is right.")
    meter = Meter()
    result = ask(spec, meter=meter)
    assert result.text == "Yes, that is right."
    assert result.model == spec.model and result.provider == spec.provider
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert meter.usage == result.usage and meter.by_role["judge"].calls == 1
    assert loopback.count(endpoint) == 1
    assert result.latency_ms > 0


def test_json_schema_call_parses_the_reply(vendor, loopback):
    spec, endpoint = vendor
    loopback.script({"score": 9, "reason": "correct"})
    result = ask(spec, schema=SCORE_SCHEMA)
    assert result.data == {"score": 9, "reason": "correct"}
    body = loopback.requests[-1].body
    if endpoint == "responses":
        assert body["text"]["format"]["schema"] == SCORE_SCHEMA
        assert body["reasoning"] == {"effort": "high"}
    elif endpoint == "chat":
        assert body["response_format"]["json_schema"]["schema"] == SCORE_SCHEMA
    else:
        assert '"score"' in body["system"][-1]["text"] and body["thinking"] == {
            "type": "enabled",
            "budget_tokens": 20000,
        }
        assert body["stream"] is True


def test_anthropic_streaming_thinking_is_counted(loopback):
    spec = ProviderSpec("anthropic", "claude-opus-4-6", loopback.anthropic_url)
    loopback.script(Reply(text="Fine.", thinking="The student said four; two plus two is four." * 4))
    result = ask(spec)
    assert result.text == "Fine."
    assert result.usage.thinking_tokens > 10


def test_retry_after_429_honours_retry_after(vendor, loopback):
    spec, endpoint = vendor
    loopback.script(Reply(status=429, headers={"retry-after": "0.6"}), "ok after waiting")
    started = time.perf_counter()
    result = ask(spec)
    assert time.perf_counter() - started >= 0.6  # the backoff setting is 0.01 s: only Retry-After explains this
    assert result.text == "ok after waiting" and result.attempts == 2
    assert loopback.count(endpoint) == 2


@pytest.mark.parametrize("fault", [Reply(status=500), Reply(status=503), Reply(fault="drop"), Reply(fault="truncated")])
def test_transient_faults_are_retried(vendor, loopback, fault):
    spec, endpoint = vendor
    loopback.script(fault, "recovered")
    assert ask(spec).text == "recovered"
    assert loopback.count(endpoint) == 2


def test_gives_up_after_the_configured_attempts(vendor, loopback, settings):
    spec, endpoint = vendor
    settings.EVALUATION = {**settings.EVALUATION, "LLM_MAX_ATTEMPTS": 3}
    loopback.script(*[Reply(status=500, error_message="overloaded")] * 3, "never reached")
    with pytest.raises(ProviderError, match=r"gave up after 3 attempts; last error: .*HTTP 500: overloaded"):
        ask(spec)
    assert loopback.count(endpoint) == 3


def test_hang_times_out_and_is_retried(vendor, loopback, settings):
    spec, endpoint = vendor
    # The hang lasts 30 s; 3 s is the bound on one answer, so a retry that is slow on a busy machine (0.3 s was
    # exceeded at load 10, and the retry timed out too) is not mistaken for a second hang.
    settings.EVALUATION = {**settings.EVALUATION, "LLM_TIMEOUT_SECONDS": 3.0}
    loopback.script(Reply(fault="hang"), "awake")
    assert ask(spec).text == "awake"
    assert loopback.count(endpoint) == 2


def test_401_fails_at_once_naming_the_key(vendor, loopback):
    spec, endpoint = vendor
    loopback.script(Reply(status=401, error_message="invalid x-api-key"), "never reached")
    # A typed base URL never gets the vendor's key, so the message names where its key would come from.
    with pytest.raises(AuthError, match=r"HTTP 401, the API key was refused: check an endpoint credential for http"):
        ask(spec)
    assert loopback.count(endpoint) == 1


def test_400_is_not_retried(vendor, loopback):
    spec, endpoint = vendor
    loopback.script(Reply(status=400, error_message="max_tokens too large"))
    with pytest.raises(ProviderError, match="max_tokens too large"):
        ask(spec)
    assert loopback.count(endpoint) == 1


def test_one_malformed_json_reply_is_repaired(vendor, loopback):
    spec, endpoint = vendor
    loopback.script('{"score": 7, "reason": "ok"', {"score": 7, "reason": "ok"})
    result = ask(spec, schema=SCORE_SCHEMA)
    assert result.data == {"score": 7, "reason": "ok"}
    assert loopback.count(endpoint) == 2
    repair = loopback.requests[-1].body
    turns = repair.get("messages") or repair.get("input")
    assert "not valid JSON" in turns[-1]["content"] and turns[-2]["content"] == '{"score": 7, "reason": "ok"'


def test_two_malformed_replies_fail_with_raw_output_kept(vendor, loopback):
    spec, endpoint = vendor
    loopback.script('{"score": 7', {"score": 70, "reason": "too high"})
    with pytest.raises(InvalidJSONError, match="still does not match the schema at score") as info:
        ask(spec, schema=SCORE_SCHEMA)
    assert info.value.raw == ['{"score": 7', '{"score": 70, "reason": "too high"}']
    assert loopback.count(endpoint) == 2


def test_directive_placement_differs_by_vendor(loopback):
    directive = "[TURN DIRECTIVE: This turn you MUST ANSWER INCORRECTLY]"
    messages = [Message("system", "You are Riya."), Message("user", "What is 3/8 + 1/8?")]
    get_llm("simulator", override=ProviderSpec("openai", "m", loopback.openai_url, {"api": "chat"})).call(
        messages, directive=directive
    )
    sent = loopback.requests[-1].body["messages"]
    assert sent[-1] == {"role": "system", "content": directive}
    get_llm("simulator", override=ProviderSpec("anthropic", "m", loopback.anthropic_url)).call(
        messages, directive=directive
    )
    sent = loopback.requests[-1].body["messages"]
    assert sent[-1]["role"] == "user" and sent[-1]["content"].endswith("\n\n" + directive)
    assert "DIRECTIVE" not in loopback.requests[-1].body.get("system", "")


@pytest.mark.django_db
def test_cost_limit_stops_the_next_call(loopback):
    # A dear model in the price table: $100,000 per million tokens ($0.10 a token, in or out), so one call
    # (the loopback counts over 20 tokens) spends more than the $1 limit.
    ModelPrice.objects.create(
        vendor="openai",
        model="dear-1",
        effective_from=dt.date(2025, 1, 1),
        input_per_mtok=Decimal(100_000),
        output_per_mtok=Decimal(100_000),
        cached_input_per_mtok=Decimal(100_000),
        cache_write_per_mtok=Decimal(100_000),
    )
    spec = ProviderSpec("openai", "dear-1", loopback.openai_url, {"api": "responses"})
    meter = Meter(limit_usd=1.0)
    first = ask(spec, meter=meter)
    assert first.cost_usd == pytest.approx(0.10 * (first.usage.input_tokens + first.usage.output_tokens))
    assert first.cost_usd > 1.0 and meter.cost_usd == first.cost_usd
    with pytest.raises(CostLimitReached, match=r"cost limit reached: \$\d+\.\d+ spent of a \$1\.0000 limit"):
        ask(spec, meter=meter)
    assert loopback.count() == 1


def test_concurrency_limit_caps_calls_in_flight(loopback, settings):
    from concurrent.futures import ThreadPoolExecutor

    from evaluation.providers import client

    settings.EVALUATION = {**settings.EVALUATION, "LLM_CONCURRENCY": 2}
    client._SEMAPHORES.clear()
    loopback.latency = 0.2
    spec = ProviderSpec("openai", "m", loopback.openai_url, {"api": "chat"})
    started = time.perf_counter()
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda _: ask(spec, role="tutor"), range(6)))
    elapsed = time.perf_counter() - started
    client._SEMAPHORES.clear()
    assert elapsed >= 0.6  # 6 calls, 2 at a time, 0.2 s each: at least three rounds


ADD_TOOL = {
    "name": "add",
    "description": "Add two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


def test_native_tool_calls_round_trip(vendor, loopback):
    """The model asks for a function; we answer it; the model's final text comes back."""
    from evaluation.providers.base import ToolCall

    spec, endpoint = vendor
    loopback.script(Reply(tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 3}}]), "The sum is 5.")
    llm = get_llm("suite_agent", override=spec)
    messages = [Message("system", "Use tools."), Message("user", "What is 2 + 3?")]
    first = llm.call(messages, tools=[ADD_TOOL])
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("add", {"a": 2, "b": 3})]
    call = first.tool_calls[0]
    follow = [
        *messages,
        Message("assistant", first.text, tool_calls=(ToolCall(call.id, call.name, call.arguments),)),
        Message("tool", "5", tool_call_id=call.id),
    ]
    final = llm.call(follow, tools=[ADD_TOOL])
    assert final.text == "The sum is 5." and final.tool_calls == []
    offered, answered = loopback.requests[0].body, loopback.requests[1].body
    if endpoint == "chat":
        assert offered["tools"][0]["function"]["name"] == "add"
        assert answered["messages"][-2]["tool_calls"][0]["id"] == call.id
        assert answered["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "5"}
    elif endpoint == "responses":
        # strict: FunctionToolParam requires it, and the API makes an omitted one true
        assert offered["tools"][0] == {"type": "function", **ADD_TOOL, "strict": False}
        assert answered["input"][-2]["type"] == "function_call" and answered["input"][-1] == {
            "type": "function_call_output",
            "call_id": call.id,
            "output": "5",
        }
    else:
        assert offered["tools"][0]["input_schema"] == ADD_TOOL["parameters"]
        assert answered["messages"][-2]["content"][-1]["type"] == "tool_use"
        assert answered["messages"][-1] == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "5"}],
        }


def test_unreachable_and_silent_compatible_servers_fail_naming_why(loopback, settings):
    """Over urllib3 (no SDK), a transport failure still reads as one: the connection, or the wait."""
    settings.EVALUATION = {**settings.EVALUATION, "LLM_MAX_ATTEMPTS": 1, "LLM_TIMEOUT_SECONDS": 0.3}
    closed = ProviderSpec("openai", "llama3", f"http://127.0.0.1:{free_port()}/v1", {"api": "chat"})
    with pytest.raises(ProviderError, match=r"openai: connection failed \(.*refused"):
        ask(closed)
    loopback.script(Reply(fault="hang"))
    silent = ProviderSpec("openai", "llama3", loopback.openai_url, {"api": "chat"})
    with pytest.raises(ProviderError, match=r"openai: no reply within 0.3s"):
        ask(silent)


@pytest.fixture
def proxy_env(monkeypatch):
    """No proxy variable from the shell running the tests (urllib prefers the lowercase ones)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_compatible_servers_are_reached_through_the_environments_proxy(proxy_env):
    proxy_env.setenv("HTTP_PROXY", "http://user:p%40ss@proxy.example:3128")
    proxy_env.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert _proxy_for("http://llm.example:8000/v1/chat/completions") == "http://user:p%40ss@proxy.example:3128"
    assert _proxy_for("http://127.0.0.1:11434/v1/chat/completions") is None
    assert _proxy_for("https://llm.example/v1/chat/completions") is None  # neither HTTPS_PROXY nor ALL_PROXY
    chat = CompatChat("http://llm.example:8000/v1", None)
    assert isinstance(chat.pool, urllib3.ProxyManager) and chat.pool.proxy.host == "proxy.example"
    assert chat.pool.proxy_headers == urllib3.make_headers(proxy_basic_auth="user:p@ss")
    assert not isinstance(CompatChat("http://127.0.0.1:11434/v1", None).pool, urllib3.ProxyManager)
    proxy_env.setenv("ALL_PROXY", "proxy.example:8080")  # no scheme: http://, as httpx takes it
    assert _proxy_for("https://llm.example/v1/chat/completions") == "http://proxy.example:8080"


def test_an_unsupported_proxy_is_refused_by_name_without_its_credentials(proxy_env):
    proxy_env.setenv("HTTP_PROXY", "socks5://user:secret@proxy.example:1080")
    with pytest.raises(ValueError, match=r"proxy socks5://proxy.example:1080 .*only http:// and https://") as refused:
        CompatChat("http://llm.example:8000/v1", None)
    assert "secret" not in str(refused.value)
