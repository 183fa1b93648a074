"""Runtime corrections: the action gate's paths (fail-open included), anti-convergence, repetition."""

import json
import time

import pytest
from django.utils import timezone

from evaluation.drift.corrections import convergence_nudge, gate_llm, gated_message, repetition_phrases
from evaluation.models import Agent, AgentEvaluationConfig, AgentMessage, CorrectionLog
from evaluation.providers.loopback import Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(db):
    agent = Agent.objects.create(
        id="rexy", display_name="Rexy", kind="character", persona_spec="Rexy is blunt.", extra={"nudge": "Be blunt."}
    )
    AgentEvaluationConfig.objects.create(
        agent=agent,
        action_gate_enabled=True,
        action_gate_threshold=5.0,
        max_correction_attempts=2,
        anti_convergence_enabled=True,
        repetition_suppression_enabled=True,
    )
    return agent


def gate_scores(loopback, *scores):
    loopback.script(
        *[
            Reply(fault="hang")
            if s == "hang"
            else Reply(json={"score": s, "reasoning": f"scored {s}", "feedback": "Be blunter."})
            for s in scores
        ]
    )
    return gate_llm(f"openai/gate@{loopback.openai_url}")


def drafts():
    texts = iter(["Certainly! I'd be happy to help.", "Fine.", "No.", "Done."])
    feedback_seen = []

    def generate(feedback):
        feedback_seen.append(feedback)
        return next(texts)

    return generate, feedback_seen


def test_gate_passes_an_in_character_message_without_a_log(agent, loopback):
    generate, seen = drafts()
    text, log = gated_message(agent, "general", generate, llm=gate_scores(loopback, 7))
    assert text == "Certainly! I'd be happy to help." and log is None and seen == [None]
    assert CorrectionLog.objects.count() == 0


def test_first_retry_passing_is_corrected(agent, loopback):
    generate, seen = drafts()
    text, log = gated_message(agent, "general", generate, llm=gate_scores(loopback, 2, 8))
    assert text == "Fine." and log.outcome == "corrected" and log.attempt_number == 1
    assert (
        log.original_text.startswith("Certainly")
        and log.corrected_text == "Fine."
        and log.score == 8
        and log.threshold == 5
    )
    assert "scored 2" in seen[1] and "Be blunter." in seen[1]


def test_a_later_retry_passing_is_passed_after_retry(agent, loopback):
    generate, _ = drafts()
    text, log = gated_message(agent, "general", generate, llm=gate_scores(loopback, 2, 3, 6))
    assert text == "No." and log.outcome == "passed_after_retry" and log.attempt_number == 2


def test_retries_exhausted_force_the_message_through(agent, loopback):
    generate, _ = drafts()
    text, log = gated_message(agent, "general", generate, llm=gate_scores(loopback, 1, 2, 3, 9))
    assert text == "No." and log.outcome == "forced_through" and log.attempt_number == 2 and log.score == 3
    assert loopback.count() == 3  # first draft + max_correction_attempts retries


def test_gate_fails_open_when_the_judge_hangs(agent, loopback, settings):
    settings.EVALUATION = {**settings.EVALUATION, "GATE_TIMEOUT_SECONDS": 0.5}
    generate, _ = drafts()
    started = time.perf_counter()
    text, log = gated_message(agent, "general", generate, llm=gate_scores(loopback, "hang"))
    assert text == "Certainly! I'd be happy to help."
    assert time.perf_counter() - started < 3  # one try at 0.5 s, no retries: the message is not held up
    assert loopback.count() == 1
    # Logged as a fail-open, with no score the judge never gave.
    assert log.outcome == "failed_open" and log.score is None and log.attempt_number == 0
    assert "no verdict within 0.5 s" in log.reasoning or "failed open" in log.reasoning


def test_a_fail_open_on_a_retry_is_logged_as_such_not_with_the_first_score(agent, loopback, settings):
    settings.EVALUATION = {**settings.EVALUATION, "GATE_TIMEOUT_SECONDS": 0.5}
    generate, _ = drafts()
    text, log = gated_message(agent, "general", generate, llm=gate_scores(loopback, 2, "hang"))
    assert text == "Fine." and log.outcome == "failed_open" and log.score is None and log.attempt_number == 1


def test_the_gate_deadline_is_overall_not_per_request(agent, loopback, settings):
    """A reply that needs a JSON repair makes two requests; 0.6 s each must not add up past a 1 s deadline."""
    settings.EVALUATION = {**settings.EVALUATION, "GATE_TIMEOUT_SECONDS": 1.0}
    loopback.script(
        Reply(text="not json at all", delay=0.6),
        Reply(json={"score": 8, "reasoning": "fine", "feedback": ""}, delay=0.6),
    )
    started = time.perf_counter()
    text, log = gated_message(
        agent, "general", lambda feedback: "Done.", llm=gate_llm(f"openai/gate@{loopback.openai_url}")
    )
    elapsed = time.perf_counter() - started
    assert text == "Done." and log.outcome == "failed_open" and "within 1 s" in log.reasoning
    assert elapsed < 1.15, elapsed


@pytest.mark.parametrize(
    ("vendor", "model"), [("openai", "gpt-5-mini"), ("anthropic", "claude-haiku-4-5"), ("openai/gpt-4o", "gpt-4o")]
)
def test_the_gate_defaults_to_a_small_fast_model_of_its_vendor(vendor, model, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert gate_llm(vendor).provider.model == model


def test_synthetic_speech_links_its_corrections_to_the_run(agent):
    from evaluation.drift.characters import character_say
    from evaluation.models import EvaluationRun

    run = EvaluationRun.objects.create(run_id="drift_links", kind="drift", agent=agent)
    for text in ["Who is doing the work here?"] * 3:
        say(agent, "general", text)
    character_say(agent, "general", provider="offline", run=run)
    log = CorrectionLog.objects.get()
    assert log.run == run and log.corrected_text.startswith("Avoid: ")


def test_gate_off_by_default(loopback):
    agent = Agent.objects.create(id="plain", display_name="Plain", kind="character", persona_spec="x")
    text, log = gated_message(
        agent, "general", lambda feedback: "hello", llm=gate_llm(f"openai/gate@{loopback.openai_url}")
    )
    assert text == "hello" and log is None and loopback.count() == 0


def test_rest_gate_drives_retries_for_an_external_runtime(staff_client, agent, loopback, settings):
    from evaluation.models import LLMConfig

    LLMConfig.objects.create(role="gate", provider="openai", model="gate", base_url=loopback.openai_url)
    loopback.script(
        Reply(json={"score": 2, "reasoning": "too polite", "feedback": "Shorter."}),
        Reply(json={"score": 7, "reasoning": "blunt", "feedback": ""}),
    )
    first = staff_client.post(
        "/api/drift/agents/rexy/gate",
        json.dumps({"text": "I'd be delighted!", "channel": "general"}),
        content_type="application/json",
    ).json()
    assert (
        first["commit"] is False
        and first["score"] == 2
        and first["feedback"] == "Shorter."
        and first["max_attempts"] == 2
    )
    second = staff_client.post(
        "/api/drift/agents/rexy/gate",
        json.dumps({"text": "Fine.", "channel": "general", "attempt": 2, "original_text": "I'd be delighted!"}),
        content_type="application/json",
    ).json()
    assert second["commit"] is True and second["outcome"] == "corrected"
    log = CorrectionLog.objects.get()
    assert log.original_text == "I'd be delighted!" and log.corrected_text == "Fine."
    missing = staff_client.post(
        "/api/drift/agents/nobody/gate", json.dumps({"text": "x", "channel": "g"}), content_type="application/json"
    )
    assert missing.status_code == 404 and "no agent 'nobody'" in missing.json()["error"]
    bad = staff_client.post(
        "/api/drift/agents/rexy/gate", json.dumps({"channel": "g"}), content_type="application/json"
    )
    assert bad.status_code == 400 and "text" in bad.json()["error"]


def say(agent, channel, text):
    return AgentMessage.objects.create(agent=agent, channel=channel, text=text, created_at=timezone.now())


def test_anti_convergence_nudges_once_when_the_channel_agrees(agent, loopback):
    other = Agent.objects.create(id="yes", display_name="Yes", kind="character", persona_spec="agrees")
    for text in ["Totally agree!", "Exactly, you're right.", "Great point.", "Absolutely.", "We should buy seeds."]:
        say(other, "general", text)
    nudge = convergence_nudge(agent, "general")
    assert nudge.startswith("Be blunt.") and "rather than echoing" in nudge
    log = CorrectionLog.objects.get()
    assert log.score == pytest.approx(0.8) and log.threshold == 0.6 and log.outcome == "corrected"
    assert convergence_nudge(agent, "quiet-channel") is None
    assert not AgentMessage.objects.filter(text__contains="rather than echoing").exists()  # transient, never stored


def test_repetition_suppression_lists_phrases_without_an_llm(agent, loopback):
    for text in [
        "Who is doing the work here?",
        "Again, who is doing the work here?",
        "Who is doing the work, though?",
        "Fine.",
        "Who is doing the work here?",
    ]:
        say(agent, "general", text)
    phrases = repetition_phrases(agent)
    assert "who is doing" in phrases and "doing the work" in phrases
    assert loopback.count() == 0 and CorrectionLog.objects.get().corrected_text.startswith("Avoid: ")


def test_pre_invocation_endpoint(staff_client, agent):
    for text in ["Who is doing the work here?"] * 3:
        say(agent, "general", text)
    answer = staff_client.post(
        "/api/drift/agents/rexy/pre-invocation", json.dumps({"channel": "#general"}), content_type="application/json"
    ).json()
    assert answer["nudge"] is None and "who is doing" in answer["avoid_phrases"]
    assert answer["recent_messages"] == ["Who is doing the work here?"] * 3


def test_repetition_suppression_puts_recent_messages_in_the_prompt(agent):
    from evaluation.drift.characters import system_prompt
    from evaluation.drift.corrections import pre_invocation

    for text in ["Who is doing the work here?", "Honestly, who is doing the work here?"]:
        say(agent, "general", text)
    prompt = system_prompt(agent, pre_invocation(agent, "general"))
    assert "Your recent messages, which repeat themselves:\n- Who is doing the work here?\n- Honestly," in prompt
    assert "Avoid these phrases" in prompt and "who is doing" in prompt
