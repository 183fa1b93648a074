"""Runtime corrections (spec 002), each off by default and configured per agent:

- action gate: a judge scores a message against the persona before it is committed; below the
  threshold the agent gets feedback and retries (at most max_correction_attempts), then the
  message is forced through. Fail-open: a judge that does not answer in time lets it pass.
- anti-convergence: when the channel's last 10 messages agree too much, a character-aware nudge
  goes into the next system prompt, once (not stored in memory).
- repetition suppression: when the agent's last 5 messages reuse too many 3-grams, the repeated
  phrases are listed for it to avoid. No LLM call.

Outcomes logged: "corrected" (the first retry passed, or a nudge / phrase list was applied),
"passed_after_retry" (a later retry passed), "forced_through" (every retry stayed below the
threshold), "failed_open" (the gate's judge gave no score in time: the message went out unscored,
and the log has no score). Logs name the run the message belongs to, when there is one.

The gate defaults to a small fast model of its vendor (GATE_MODELS) and one overall deadline
(GATE_TIMEOUT_SECONDS, 5 s) per check, JSON repair included.
"""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as DeadlineExceeded
from dataclasses import dataclass, field, replace
from typing import Any

from evaluation.conf import setting
from evaluation.drift.offline import GateRule
from evaluation.models import Agent, AgentEvaluationConfig, AgentMessage, CorrectionLog, EvaluationRun
from evaluation.providers import LLM, Message, ProviderError, ProviderSpec, get_llm, resolve
from evaluation.text import agreement_ratio, novelty_overlap, repeated_ngrams

GATE_SCHEMA = {
    "type": "object",
    "required": ["score", "reasoning"],
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 9},
        "reasoning": {"type": "string"},
        "feedback": {"type": "string"},
    },
}
GATE_SYSTEM = """Is the message in character? Score 0-9 (9 = perfectly). JSON only:
{"score": <0-9>, "reasoning": "<one sentence>", "feedback": "<one sentence the agent can act on>"}"""
GATE_MODELS = {"openai": "gpt-5-mini", "anthropic": "claude-haiku-4-5"}
"""The gate's model when none is named: a small fast one per vendor (anthropic-haiku has its own default)."""
_GATE_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="gate")


def config_for(agent: Agent) -> AgentEvaluationConfig:
    """The agent's settings, or the defaults (everything off) when none are saved."""
    return AgentEvaluationConfig.objects.filter(agent=agent).first() or AgentEvaluationConfig(agent=agent)


@dataclass
class GateScore:
    score: float | None
    """None when the judge failed or timed out (the gate then fails open)."""
    reasoning: str
    feedback: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


def gate_llm(judge: str | ProviderSpec | None = None) -> LLM:
    spec = resolve("gate", judge)
    if not spec.model and spec.provider in GATE_MODELS:
        spec = replace(spec, model=GATE_MODELS[spec.provider])
    llm = get_llm("gate", override=spec)
    llm.timeout = setting("GATE_TIMEOUT_SECONDS")
    llm.max_attempts = 1  # a gate must not hold a message up: one try, then fail open
    return llm


def gate_score(agent: Agent, text: str, channel: str, llm: LLM) -> GateScore:
    """The gate's verdict, or a fail-open (score None) when the judge errs or the overall deadline passes."""
    user = f"Persona of {agent.display_name}: {agent.persona_spec}\n\nMessage for #{channel}:\n{text}"
    deadline = float(setting("GATE_TIMEOUT_SECONDS"))
    future = _GATE_POOL.submit(
        llm.call,
        [Message("system", GATE_SYSTEM), Message("user", user)],
        schema=GATE_SCHEMA,
        offline=GateRule(persona_spec=agent.persona_spec, text=text),
    )
    try:
        result = future.result(timeout=deadline)
    except DeadlineExceeded:
        future.cancel()
        return GateScore(None, f"gate failed open: no verdict within {deadline:g} s")
    except ProviderError as exc:
        return GateScore(None, f"gate failed open: {exc}")
    data = result.data
    return GateScore(float(data["score"]), data["reasoning"], data.get("feedback", ""), result.usage.as_dict())


def _log(
    agent: Agent,
    run: EvaluationRun | None,
    *,
    original: str,
    corrected: str | None,
    score: float | None,
    threshold: float,
    reasoning: str,
    attempt: int,
    outcome: str,
    usage: dict[str, Any] | None = None,
) -> CorrectionLog:
    return CorrectionLog.objects.create(
        agent=agent,
        run=run,
        original_text=original,
        corrected_text=corrected,
        score=score,
        threshold=threshold,
        reasoning=reasoning,
        attempt_number=attempt,
        outcome=outcome,
        token_usage=usage,
    )


def gated_message(
    agent: Agent,
    channel: str,
    generate: Callable[[str | None], str],
    *,
    llm: LLM | None = None,
    run: EvaluationRun | None = None,
) -> tuple[str, CorrectionLog | None]:
    """Generate a message, passing it through the action gate when the agent has it on."""
    config = config_for(agent)
    text = generate(None)
    if not config.action_gate_enabled:
        return text, None
    llm = llm or gate_llm()
    threshold = config.action_gate_threshold
    first = gate_score(agent, text, channel, llm)
    if first.score is None:
        return text, _log(
            agent,
            run,
            original=text,
            corrected=None,
            score=None,
            threshold=threshold,
            reasoning=first.reasoning,
            attempt=0,
            outcome="failed_open",
        )
    if first.score >= threshold:
        return text, None
    original, last = text, first
    for attempt in range(1, config.max_correction_attempts + 1):
        text = generate(f"Your draft was out of character ({last.reasoning}). {last.feedback} Rewrite it.")
        last = gate_score(agent, text, channel, llm)
        if last.score is None or last.score >= threshold:
            outcome = "failed_open" if last.score is None else "corrected" if attempt == 1 else "passed_after_retry"
            return text, _log(
                agent,
                run,
                original=original,
                corrected=text,
                score=last.score,
                threshold=threshold,
                reasoning=last.reasoning,
                attempt=attempt,
                outcome=outcome,
                usage=last.usage,
            )
    return text, _log(
        agent,
        run,
        original=original,
        corrected=text,
        score=last.score,
        threshold=threshold,
        reasoning=f"still below the threshold after {config.max_correction_attempts} retries: {last.reasoning}",
        attempt=config.max_correction_attempts,
        outcome="forced_through",
        usage=last.usage,
    )


@dataclass
class GateDecision:
    """The gate's answer to an external runtime for one attempt."""

    commit: bool
    score: float | None
    threshold: float
    attempt: int
    max_attempts: int
    reasoning: str
    feedback: str = ""
    outcome: str | None = None


def gate_check(
    agent: Agent, *, text: str, channel: str, attempt: int = 1, original_text: str = "", llm: LLM | None = None
) -> GateDecision:
    """One gate check for a runtime that drives its own retries (attempt 1 is the first draft)."""
    config = config_for(agent)
    limit, threshold = config.max_correction_attempts, config.action_gate_threshold
    if not config.action_gate_enabled:
        return GateDecision(True, None, threshold, attempt, limit, "the action gate is off for this agent")
    verdict = gate_score(agent, text, channel, llm or gate_llm())
    retry = attempt - 1
    if verdict.score is None or verdict.score >= threshold:
        outcome = None
        if verdict.score is None or retry >= 1:
            outcome = "failed_open" if verdict.score is None else "corrected" if retry == 1 else "passed_after_retry"
            _log(
                agent,
                None,
                original=original_text or text,
                corrected=text if retry >= 1 else None,
                score=verdict.score,
                threshold=threshold,
                reasoning=verdict.reasoning,
                attempt=retry,
                outcome=outcome,
                usage=verdict.usage,
            )
        return GateDecision(
            True, verdict.score, threshold, attempt, limit, verdict.reasoning, verdict.feedback, outcome
        )
    if retry >= limit:
        _log(
            agent,
            None,
            original=original_text or text,
            corrected=text,
            score=verdict.score,
            threshold=threshold,
            reasoning=f"still below the threshold after {limit} retries: {verdict.reasoning}",
            attempt=limit,
            outcome="forced_through",
            usage=verdict.usage,
        )
        return GateDecision(
            True, verdict.score, threshold, attempt, limit, verdict.reasoning, verdict.feedback, "forced_through"
        )
    return GateDecision(False, verdict.score, threshold, attempt, limit, verdict.reasoning, verdict.feedback)


GENERIC_NUDGE = (
    "Keep your own voice: add your own angle or disagree where you really would, rather than echoing the others."
)


def convergence_nudge(agent: Agent, channel: str, run: EvaluationRun | None = None) -> str | None:
    """A one-off nudge when the channel's last 10 messages agree more than the threshold allows."""
    config = config_for(agent)
    if not config.anti_convergence_enabled:
        return None
    recent = list(
        AgentMessage.objects.filter(channel=channel).order_by("-created_at").values_list("text", flat=True)[:10]
    )
    ratio = agreement_ratio(recent)
    if len(recent) < 3 or ratio <= config.convergence_threshold:
        return None
    nudge = f"{(agent.extra or {}).get('nudge') or ''} {GENERIC_NUDGE}".strip()
    _log(
        agent,
        run,
        original=f"(before speaking in #{channel}: {ratio:.0%} of the last {len(recent)} messages agree)",
        corrected=nudge,
        score=ratio,
        threshold=config.convergence_threshold,
        reasoning=f"agreement ratio {ratio:.2f} is above {config.convergence_threshold}",
        attempt=1,
        outcome="corrected",
    )
    return nudge


@dataclass(frozen=True)
class Repetition:
    """What repetition suppression injects: the agent's recent messages and the phrases it overuses."""

    recent_messages: list[str]
    avoid_phrases: list[str]


def repetition_check(agent: Agent, run: EvaluationRun | None = None) -> Repetition:
    """When the agent's last 5 messages reuse more 3-grams than the threshold allows: those messages
    and the repeated phrases; otherwise nothing."""
    config = config_for(agent)
    if not config.repetition_suppression_enabled:
        return Repetition([], [])
    recent = list(AgentMessage.objects.filter(agent=agent).order_by("-created_at").values_list("text", flat=True)[:5])[
        ::-1
    ]
    overlap = novelty_overlap(recent, n=3)
    if len(recent) < 2 or overlap <= config.repetition_threshold:
        return Repetition([], [])
    phrases = [p for p, _ in repeated_ngrams(recent, n=3, min_count=2)[:8]]
    if not phrases:
        return Repetition([], [])
    _log(
        agent,
        run,
        original=f"(before speaking: {overlap:.0%} of recent 3-grams repeated)",
        corrected="Avoid: " + "; ".join(phrases),
        score=overlap,
        threshold=config.repetition_threshold,
        reasoning=f"3-gram reuse {overlap:.2f} is above {config.repetition_threshold}",
        attempt=1,
        outcome="corrected",
    )
    return Repetition(recent, phrases)


def repetition_phrases(agent: Agent, run: EvaluationRun | None = None) -> list[str]:
    """Phrases to avoid when the agent's last 5 messages reuse more 3-grams than the threshold allows."""
    return repetition_check(agent, run).avoid_phrases


def pre_invocation(agent: Agent, channel: str, run: EvaluationRun | None = None) -> dict[str, Any]:
    """What to add to the agent's next system prompt (transient: never stored in its memory): a nudge,
    and, when it repeats itself, its recent messages with the phrases to avoid."""
    repetition = repetition_check(agent, run)
    return {
        "nudge": convergence_nudge(agent, channel, run),
        "avoid_phrases": repetition.avoid_phrases,
        "recent_messages": repetition.recent_messages,
    }
