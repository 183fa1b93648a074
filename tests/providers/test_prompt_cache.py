"""Prompt caching through the real SDKs against the loopback server: the stable prefix is marked (Anthropic)
or keyed (OpenAI), the second call over the same prefix records cached tokens, and the meter's per-role
totals carry them."""

import json

import pytest

from evaluation.providers import Message, Meter, ProviderSpec, get_llm
from evaluation.providers.base import Request
from evaluation.providers.openai_api import prompt_cache_key

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
pytestmark = pytest.mark.django_db  # prices are read from the price table

RUBRIC = "You judge tutoring conversations. " + "Score each dimension from 1 to 5 with reasons. " * 120
"""A judge's stable system prompt of some 1,400 tokens (the loopback counts 4 characters a token)."""


def judge_call(spec: ProviderSpec, meter: Meter, conversation: str, role: str = "judge"):
    return get_llm(role, override=spec, meter=meter).call(
        [Message("system", RUBRIC), Message("user", conversation)], schema=SCHEMA
    )


def test_anthropic_marks_the_stable_prefix_and_the_second_call_reads_it(loopback):
    spec = ProviderSpec("anthropic", "claude-cache-1", loopback.anthropic_url)
    meter = Meter()
    first = judge_call(spec, meter, "TUTOR: Hi. STUDENT: 2+2=5?")
    body = loopback.requests[-1].body
    # System as text blocks, the rubric first; the breakpoint on the last block (the schema's instruction).
    assert body["system"][0] == {"type": "text", "text": RUBRIC.strip()}
    assert [b.get("cache_control") for b in body["system"]] == [None, {"type": "ephemeral"}]
    assert "cache_control" not in str(body["messages"])  # one short turn: nothing of it to cache
    second = judge_call(spec, meter, "TUTOR: Hello. STUDENT: is 3 prime?")

    # The prefix: the rubric and the schema's instruction, as the loopback counts it (JSON of each block
    # without its breakpoint, 4 characters a token).
    blocks = [{"type": "text", "text": block["text"]} for block in body["system"]]
    prefix_tokens = sum(len(json.dumps(block)) for block in blocks) // 4
    assert prefix_tokens > 1000
    assert (first.usage.cached_input_tokens, first.usage.cache_write_tokens) == (0, prefix_tokens)
    assert (second.usage.cached_input_tokens, second.usage.cache_write_tokens) == (prefix_tokens, 0)
    # input_tokens counts every prompt token: the cached parts are in it, not beside it.
    assert second.usage.input_tokens > prefix_tokens
    totals = meter.as_dict()["by_role"]["judge"]
    assert totals["cached_input_tokens"] == prefix_tokens and totals["cache_write_tokens"] == prefix_tokens
    assert totals["calls"] == 2


def test_anthropic_long_conversation_reuses_its_history_turn_after_turn(loopback):
    spec = ProviderSpec("anthropic", "claude-cache-2", loopback.anthropic_url)
    llm = get_llm("simulator", override=spec, meter=Meter())
    # A persona prompt past the vendor's minimum cacheable length (1,024 tokens for a model it does not name).
    history = [Message("system", "You play a student. Stay in character. " * 120)]
    cached = []
    for turn in range(5):
        history.append(Message("user", f"Tutor says thing number {turn}. " * 20))
        result = llm.call(history)
        cached.append(result.usage.cached_input_tokens)
        history.append(Message("assistant", result.text))
        turns = loopback.requests[-1].body["messages"]
        marked = [i for i, t in enumerate(turns) if isinstance(t["content"], list) and "cache_control" in str(t)]
        # From 4 turns on, the turn before the newest carries the breakpoint; before that, none does.
        assert marked == ([len(turns) - 2] if len(turns) >= 4 else []), turn
    # Each call reads what the one before wrote: the system prompt, then the history up to the breakpoint
    # of the call before (found by looking back from its own), longer each turn.
    assert cached[0] == 0 and cached[1] == cached[2] > 0 and cached[4] > cached[3] > cached[2]


def test_anthropic_caching_can_be_turned_off(loopback):
    spec = ProviderSpec("anthropic", "claude-cache-3", loopback.anthropic_url, {"prompt_cache": False})
    meter = Meter()
    judge_call(spec, meter, "one")
    judge_call(spec, meter, "two")
    assert "cache_control" not in str(loopback.requests[-1].body)
    assert meter.usage.cached_input_tokens == 0 and meter.usage.cache_write_tokens == 0


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_openai_records_cached_tokens_in_whole_blocks(loopback, api):
    spec = ProviderSpec("openai", f"gpt-cache-{api}", loopback.openai_url, {"api": api})
    meter = Meter()
    first = judge_call(spec, meter, "TUTOR: Hi.")
    second = judge_call(spec, meter, "TUTOR: Hello there.")
    assert first.usage.cached_input_tokens == 0
    # The shared prefix (the rubric, some 1,400 tokens) holds one whole block of 1024 tokens.
    assert second.usage.cached_input_tokens == 1024
    assert second.usage.cache_write_tokens == 0 and second.usage.input_tokens > 1024
    assert meter.by_role["judge"].cached_input_tokens == 1024


def test_openai_short_prompts_are_not_cached(loopback):
    spec = ProviderSpec("openai", "gpt-cache-short", loopback.openai_url, {"api": "responses"})
    meter = Meter()
    for _ in range(2):
        get_llm("judge", override=spec, meter=meter).call([Message("system", "Short."), Message("user", "Hi")])
    assert meter.usage.cached_input_tokens == 0


def test_prompt_cache_key_follows_the_role_and_its_stable_prefix(loopback):
    spec = ProviderSpec("openai", "gpt-cache-key", loopback.openai_url, {"api": "responses"})
    judge_call(spec, Meter(), "first conversation")
    judge_call(spec, Meter(), "another conversation")
    judge_call(spec, Meter(), "first conversation", role="gate")
    keys = [r.body.get("prompt_cache_key") for r in loopback.requests[-3:]]
    assert keys[0] == keys[1] and keys[2] != keys[0] and len(keys[0]) == 32
    # A directive placed after the conversation (OpenAI's last system message) is not part of the key.
    llm = get_llm("judge", override=spec, meter=Meter())
    llm.call([Message("system", RUBRIC), Message("user", "x")], schema=SCHEMA, directive="Turn 3 of 9.")
    assert loopback.requests[-1].body["prompt_cache_key"] == keys[0]
    off = ProviderSpec("openai", "gpt-cache-key", loopback.openai_url, {"api": "responses", "prompt_cache": False})
    judge_call(off, Meter(), "first conversation")
    assert "prompt_cache_key" not in loopback.requests[-1].body
    # The key is the role and the leading system text, whatever the model and the conversation.
    alike = Request(role="judge", model="other", messages=[Message("system", RUBRIC), Message("user", "anything")])
    assert prompt_cache_key(alike) == keys[0]


@pytest.mark.django_db(transaction=True)
def test_a_runs_token_usage_carries_cached_tokens_per_role(server, loopback):
    from io import StringIO

    from django.core.management import call_command

    # Every role through the loopback's Anthropic wire format: the simulator's persona prompt is the same
    # on every turn, so from its second call on it is read from the cache, once it is as long as the model's
    # minimum cacheable prompt (Sonnet 4.6: 1,024 tokens); this persona's description makes it so.
    from evaluation.models import EvaluationRun, Persona

    Persona.objects.filter(persona_id="average_student").update(description="Thinks aloud, step by step. " * 200)
    provider = f"anthropic/claude-sonnet-4-6@{loopback.anthropic_url}"
    call_command(
        "run_evaluation",
        persona="average_student",
        provider=provider,
        topic_id="two-digit-addition-regrouping",
        max_turns=3,
        seed=4,
        stdout=StringIO(),
    )
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    simulator = run.token_usage["by_role"]["simulator"]
    assert simulator["calls"] >= 3 and simulator["cached_input_tokens"] > 0 and simulator["cache_write_tokens"] > 0
    assert simulator["cached_input_tokens"] + simulator["cache_write_tokens"] <= simulator["input_tokens"]
    assert run.token_usage["cached_input_tokens"] == sum(
        usage["cached_input_tokens"] for usage in run.token_usage["by_role"].values()
    )
