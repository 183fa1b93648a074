"""Role resolution (CLI > database > environment > offline), keys, offline determinism, record/replay."""

import pytest

from evaluation.models import LLMConfig
from evaluation.providers import Message, MissingKeyError, ProviderSpec, ReplayMiss, get_llm, require_keys, resolve

pytestmark = pytest.mark.django_db


def test_default_is_offline(monkeypatch):
    monkeypatch.delenv("EVAL_LLM_PROVIDER", raising=False)
    monkeypatch.delenv("EVAL_JUDGE_PROVIDER", raising=False)
    assert resolve("judge").provider == "offline"


def test_environment_then_database_then_override(monkeypatch):
    monkeypatch.setenv("EVAL_LLM_PROVIDER", "anthropic")
    monkeypatch.setenv("EVAL_JUDGE_PROVIDER", "openai")
    monkeypatch.setenv("EVAL_JUDGE_MODEL", "gpt-5-mini")
    assert resolve("simulator").provider == "anthropic"
    assert (resolve("judge").provider, resolve("judge").model, resolve("judge").source) == (
        "openai",
        "gpt-5-mini",
        "environment",
    )
    LLMConfig.objects.create(role="judge", provider="anthropic-haiku", model="claude-haiku-4-5")
    assert resolve("judge").label == "anthropic-haiku/claude-haiku-4-5"
    assert resolve("judge", "openai/gpt-5.2").label == "openai/gpt-5.2"


def test_unknown_provider_and_role_are_named():
    with pytest.raises(ValueError, match="unknown provider 'gemini'"):
        resolve("judge", "gemini/pro")
    with pytest.raises(ValueError, match="unknown LLM role 'critic'"):
        resolve("critic")


def test_missing_key_is_named_before_starting(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert require_keys(["judge", "simulator"], "openai") == [
        "role 'judge' uses openai (override) but OPENAI_API_KEY is not set",
        "role 'simulator' uses openai (override) but OPENAI_API_KEY is not set",
    ]
    with pytest.raises(MissingKeyError, match="set OPENAI_API_KEY"):
        get_llm("judge", override="openai")
    # A local OpenAI-compatible server needs no key.
    assert require_keys(["judge"], "openai/llama3@http://127.0.0.1:11434/v1") == []


def test_offline_is_deterministic():
    llm = get_llm("gate", override="offline")
    messages = [Message("user", "hello")]
    first, second = llm.call(messages), llm.call(messages)
    assert first.text == second.text and first.provider == "offline"
    assert first.usage.input_tokens > 0 and first.cost_usd == 0


def test_record_then_replay_makes_no_http_calls(loopback, tmp_path):
    spec = ProviderSpec("openai", "gpt-5.2", loopback.openai_url, {"api": "responses"})
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    loopback.script("first answer", {"score": 4})
    recorder = get_llm("judge", override=spec, record_dir=tmp_path / "rec")
    recorded = [recorder.call([Message("user", "one")]), recorder.call([Message("user", "two")], schema=schema)]
    assert loopback.count() == 2

    loopback.reset()
    replayer = get_llm("judge", override=ProviderSpec("replay", "gpt-5.2", options={"dir": str(tmp_path / "rec")}))
    replayed = [replayer.call([Message("user", "one")]), replayer.call([Message("user", "two")], schema=schema)]
    assert loopback.count() == 0
    assert [r.text for r in replayed] == [r.text for r in recorded]
    assert replayed[1].data == {"score": 4}
    assert [r.usage for r in replayed] == [r.usage for r in recorded]

    with pytest.raises(ReplayMiss) as miss:
        replayer.call([Message("user", "one, changed")])
    changed = get_llm("judge", override="offline").call([Message("user", "x")])  # any fingerprint differs
    assert "role 'judge', fingerprint " in str(miss.value)
    fingerprint = str(miss.value).split("fingerprint ")[1].split(" ")[0]
    assert len(fingerprint) == 64 and fingerprint != recorded[0].fingerprint != changed.fingerprint


def test_every_offline_role_answers_a_plain_call():
    """Roles whose rule-based handlers expect context still answer a bare call (benchmarks, smoke tests)."""
    for role in ("simulator", "tutor", "gate", "suite_agent"):
        result = get_llm(role, override="offline").call([Message("user", "hello")])
        assert result.text, role


def test_retries_wait_with_full_jitter_unless_the_server_says_when():
    from evaluation.providers.client import retry_delay

    waits = [retry_delay(1, None, [5.0, 10.0]) for _ in range(200)]
    assert all(0.0 <= w <= 5.0 for w in waits) and len({round(w, 6) for w in waits}) > 150  # not in lockstep
    assert max(retry_delay(2, None, [5.0, 10.0]) for _ in range(200)) > 5.0  # the second attempt's range
    assert retry_delay(1, 0.7, [5.0]) == 0.7 and retry_delay(3, 999, [5.0]) == 120.0
