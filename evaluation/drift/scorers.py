"""The four drift scorers (spec 002), each returning a 0-9 dimension score with per-proposition detail.

| scorer      | input                                   | LLM                     | computed here                 |
|-------------|-----------------------------------------|-------------------------|-------------------------------|
| adherence   | agent messages + persona spec           | claim vs each message   |                               |
| consistency | (later, earlier) message pairs, no spec | same character?         |                               |
| fluency     | the agent's recent messages             | structural variety      | 3-gram reuse across messages  |
| convergence | anonymised channel messages             | voice distinctiveness   | vocabulary overlap of speakers|

A proposition's score is the mean over its checks; inverted propositions count as 9 minus that;
a dimension is the weighted mean of its propositions (and, for fluency and convergence, the mean
of that and the computed measure).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from evaluation.drift.engine import Check, Judge, Scored, score_checks, snippet
from evaluation.text import novelty_overlap, vocabulary_stats

_TEMPLATE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def render_claim(claim: str, **values: str) -> str:
    """Fill {{agent_name}}, {{channel_name}}, {{recipient_name}}; unknown variables stay as written."""
    return _TEMPLATE.sub(lambda m: values.get(m.group(1)) or m.group(0), claim)


@dataclass
class Prop:
    id: str
    claim: str
    weight: float
    inverted: bool
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Msg:
    agent_id: str
    agent_name: str
    channel: str
    recipient: str
    text: str


@dataclass
class PropositionResult:
    proposition_id: str
    score: float | None
    """Effective 0-9 score (inverted already applied); None when the judge never scored it."""
    reasoning: str
    snippet: str = ""


@dataclass
class DimensionResult:
    dimension: str
    score: float | None
    items: list[PropositionResult]
    metrics: dict[str, float] = field(default_factory=dict)


def bounds(prop: Prop, set_extra: dict[str, Any]) -> tuple[int | None, int | None]:
    """first_n / last_n, on the proposition, else its file (TinyTroupe's meaning: context bounds)."""
    first_n = prop.extra.get("first_n", set_extra.get("first_n"))
    last_n = prop.extra.get("last_n", set_extra.get("last_n"))
    return (first_n if isinstance(first_n, int) and first_n > 0 else None), (
        last_n if isinstance(last_n, int) and last_n > 0 else None
    )


def trajectory(messages: list[Msg], prop: Prop, set_extra: dict[str, Any]) -> list[Msg]:
    """The part of the trajectory the judge is shown as context: its first n and its last n messages
    (all of it when neither is set). A bound on the context, not a filter on what is judged."""
    first_n, last_n = bounds(prop, set_extra)
    if first_n is None and last_n is None:
        return messages
    keep = set(range(min(first_n or 0, len(messages))))
    keep |= set(range(max(0, len(messages) - (last_n or 0)), len(messages)))
    return [m for i, m in enumerate(messages) if i in keep]


def _listing(messages: list[Msg], total: int) -> str:
    lines = [f"{m.agent_name}: {m.text}" for m in messages]
    if len(messages) < total:
        lines.append(f"({total - len(messages)} message(s) of the trajectory not shown)")
    return "\n".join(lines)


def combine(
    props: list[Prop], scored: dict[str, list[Scored]], snippets: dict[str, str]
) -> tuple[float | None, list[PropositionResult]]:
    items: list[PropositionResult] = []
    total = weights = 0.0
    for p in props:
        results = scored.get(p.id, [])
        valid = [r.score for r in results if r.score is not None]
        if not valid:
            reason = next((r.reasoning for r in results if r.score is None), "no messages to judge")
            items.append(PropositionResult(p.id, None, reason, snippets.get(p.id, "")))
            continue
        raw = sum(valid) / len(valid)
        effective = 9 - raw if p.inverted else raw
        reasons = [r.reasoning for r in results if r.score is not None][:2]
        note = f" (inverted: the judge's mean {raw:.2f} counts as {effective:.2f})" if p.inverted else ""
        unscored = len(results) - len(valid)
        if unscored:
            note += f"; {unscored} check(s) unscored"
        items.append(PropositionResult(p.id, round(effective, 3), " | ".join(reasons) + note, snippets.get(p.id, "")))
        total += p.weight * effective
        weights += p.weight
    return (round(total / weights, 3) if weights else None), items


def _run(
    llm: Judge, props: list[Prop], checks_for: dict[str, list[Check]], batch_size: int, dimension: str
) -> tuple[dict[str, list[Scored]], dict[str, str]]:
    all_checks = [c for p in props for c in checks_for.get(p.id, [])]
    results = score_checks(llm, all_checks, batch_size=batch_size)
    scored: dict[str, list[Scored]] = {}
    snippets: dict[str, str] = {}
    for p in props:
        for c in checks_for.get(p.id, []):
            scored.setdefault(p.id, []).append(results[c.id])
            snippets.setdefault(p.id, snippet(c.context))
    return scored, snippets


def score_adherence(
    llm: Judge, props: list[Prop], set_extra: dict[str, Any], messages: list[Msg], persona_spec: str, batch_size: int
) -> DimensionResult:
    checks: dict[str, list[Check]] = {}
    for p in props:
        bounded = bounds(p, set_extra) != (None, None)
        around = _listing(trajectory(messages, p, set_extra), len(messages)) if bounded else ""
        for i, m in enumerate(messages):
            claim = render_claim(p.claim, agent_name=m.agent_name, channel_name=m.channel, recipient_name=m.recipient)
            to = f" to {m.recipient}" if m.recipient else ""
            context = f"Persona spec of {m.agent_name}:\n{persona_spec}\n\n"
            if around:
                context += f"Trajectory (context):\n{around}\n\n"
            context += f"Message in #{m.channel}{to}:\n{m.text}"
            checks.setdefault(p.id, []).append(Check(f"{p.id}#{i}", claim, context))
    scored, snippets = _run(llm, props, checks, batch_size, "adherence")
    score, items = combine(props, scored, snippets)
    return DimensionResult("adherence", score, items)


def score_consistency(
    llm: Judge, props: list[Prop], set_extra: dict[str, Any], messages: list[Msg], batch_size: int, pairs: int = 10
) -> DimensionResult:
    """Pairs of a later message with an earlier one; the judge sees no persona spec."""
    half = len(messages) // 2
    history, current = messages[:half], messages[half:]
    pairings = [(current[i], history[i % len(history)]) for i in range(min(pairs, len(current)))] if history else []
    checks: dict[str, list[Check]] = {}
    for p in props:
        for i, (later, earlier) in enumerate(pairings):
            claim = render_claim(p.claim, **_variables(later))
            checks.setdefault(p.id, []).append(
                Check(f"{p.id}#{i}", claim, f"Earlier message:\n{earlier.text}\n\nLater message:\n{later.text}")
            )
    scored, snippets = _run(llm, props, checks, batch_size, "consistency")
    score, items = combine(props, scored, snippets)
    return DimensionResult("consistency", score, items, {"pairs": float(len(pairings))})


def _variables(m: Msg) -> dict[str, str]:
    return {"agent_name": m.agent_name, "channel_name": m.channel, "recipient_name": m.recipient}


def _unscored(dimension: str, props: list[Prop], reason: str) -> DimensionResult:
    return DimensionResult(dimension, None, [PropositionResult(p.id, None, reason) for p in props])


def _blend(llm_score: float | None, computed: float) -> float:
    return round(computed if llm_score is None else (llm_score + computed) / 2, 3)


def score_fluency(
    llm: Judge, props: list[Prop], set_extra: dict[str, Any], messages: list[Msg], batch_size: int
) -> DimensionResult:
    if not messages:
        return _unscored("fluency", props, "no messages to judge")
    overlap = novelty_overlap([m.text for m in messages], n=3)
    computed = 9 * (1 - overlap)
    checks: dict[str, list[Check]] = {}
    for p in props:
        recent = trajectory(messages, p, set_extra)
        listing = "\n".join(f"{i + 1}. {m.text}" for i, m in enumerate(recent))
        last = recent[-1]
        claim = render_claim(p.claim, **_variables(last))
        checks[p.id] = [Check(f"{p.id}#0", claim, f"Recent messages of {last.agent_name}:\n{listing}")]
    scored, snippets = _run(llm, props, checks, batch_size, "fluency")
    llm_score, items = combine(props, scored, snippets)
    items.insert(
        0,
        PropositionResult(
            "ngram-overlap",
            round(computed, 3),
            f"{overlap:.1%} of 3-grams reuse an earlier message's (computed, no LLM)",
        ),
    )
    return DimensionResult("fluency", _blend(llm_score, computed), items, {"ngram_overlap": overlap})


def anonymise(text: str, names: dict[str, str], labels: dict[str, str]) -> str:
    """Replace each cast member's full name, and first name, in text with their speaker label, or
    "another member" for someone who does not speak in this channel. Case-sensitive, as names are
    written: "Ivy said" is a name, "the ivy" a plant."""
    pairs: list[tuple[str, str]] = []
    for agent_id, name in names.items():
        label = labels.get(agent_id, "another member")
        for form in {name.strip(), name.split()[0] if name.split() else ""}:
            if len(form) >= 2:
                pairs.append((form, label))
    for form, label in sorted(pairs, key=lambda p: -len(p[0])):
        text = re.sub(rf"(?<!\w){re.escape(form)}(?!\w)", label, text)
    return text


def score_convergence(
    llm: Judge,
    props: list[Prop],
    set_extra: dict[str, Any],
    channels: dict[str, list[Msg]],
    agent_name: str,
    batch_size: int,
    names: dict[str, str] | None = None,
) -> DimensionResult:
    """names: agent id -> display name of every cast member, replaced in the text as well as in the
    speaker labels so the judge cannot tell who is who."""
    overlaps = []
    checks: dict[str, list[Check]] = {}
    for index, (channel, msgs) in enumerate(sorted(channels.items())):
        by_speaker: dict[str, list[str]] = {}
        labels: dict[str, str] = {}
        for m in msgs:
            by_speaker.setdefault(m.agent_id, []).append(m.text)
            labels.setdefault(m.agent_id, f"Speaker {chr(ord('A') + len(labels))}")
        if len(by_speaker) < 2:
            continue
        overlaps.append(vocabulary_stats(by_speaker)["mean_vocabulary_overlap"])
        speakers = {**(names or {}), **{m.agent_id: m.agent_name for m in msgs}}
        transcript = "\n".join(f"{labels[m.agent_id]}: {anonymise(m.text, speakers, labels)}" for m in msgs)
        for p in props:
            claim = render_claim(p.claim, agent_name=agent_name, channel_name=channel, recipient_name="")
            checks.setdefault(p.id, []).append(
                Check(f"{p.id}#{index}", claim, f"Anonymised conversation in #{channel}:\n{transcript}")
            )
    if not overlaps:
        return DimensionResult(
            "convergence", None, [PropositionResult(p.id, None, "no channel with two or more speakers") for p in props]
        )
    overlap = sum(overlaps) / len(overlaps)
    computed = 9 * (1 - overlap)
    scored, snippets = _run(llm, props, checks, batch_size, "convergence")
    llm_score, items = combine(props, scored, snippets)
    items.insert(
        0,
        PropositionResult(
            "vocabulary-overlap",
            round(computed, 3),
            f"speakers share {overlap:.1%} of their content vocabulary (computed, no LLM)",
        ),
    )
    return DimensionResult("convergence", _blend(llm_score, computed), items, {"vocabulary_overlap": overlap})


def score_propositions(
    llm: Judge, dimension: str, props: list[Prop], set_extra: dict[str, Any], messages: list[Msg], batch_size: int
) -> DimensionResult:
    """A dimension with no measure of its own: each claim judged once against the agent's trajectory
    (bounded by first_n / last_n), weighted mean, inverted claims as 9 minus the score."""
    if not messages:
        return _unscored(dimension, props, "no messages to judge")
    checks: dict[str, list[Check]] = {}
    for p in props:
        shown = trajectory(messages, p, set_extra)
        claim = render_claim(p.claim, **_variables(messages[-1]))
        context = f"Messages of {messages[-1].agent_name} (oldest first):\n{_listing(shown, len(messages))}"
        checks[p.id] = [Check(f"{p.id}#0", claim, context)]
    scored, snippets = _run(llm, props, checks, batch_size, dimension)
    score, items = combine(props, scored, snippets)
    return DimensionResult(dimension, score, items)


@dataclass(frozen=True)
class DriftInput:
    """What a drift scorer may read, built once per run."""

    llm: Judge
    agent_name: str
    persona_spec: str
    messages: list[Msg]
    """The agent's messages in the run's window, oldest first."""
    channels: Callable[[], dict[str, list[Msg]]]
    """The recent messages of every channel the agent spoke in (loaded only when a scorer asks)."""
    batch_size: int
    names: dict[str, str] = field(default_factory=dict)
    """agent id -> display name of every character agent (anonymisation)."""


class Scorer(Protocol):
    def __call__(self, given: DriftInput, props: list[Prop], set_extra: dict[str, Any]) -> DimensionResult: ...


SCORERS: dict[str, Scorer] = {
    "adherence": lambda g, props, extra: score_adherence(g.llm, props, extra, g.messages, g.persona_spec, g.batch_size),
    "consistency": lambda g, props, extra: score_consistency(g.llm, props, extra, g.messages, g.batch_size),
    "fluency": lambda g, props, extra: score_fluency(g.llm, props, extra, g.messages, g.batch_size),
    "convergence": lambda g, props, extra: score_convergence(
        g.llm, props, extra, g.channels(), g.agent_name, g.batch_size, g.names
    ),
}
"""One registration per dimension with a measure of its own; any other dimension folder with
propositions is scored by score_propositions."""

DIMENSIONS: tuple[str, ...] = tuple(SCORERS)
"""The built-in dimensions, in report order."""


def scorer_for(dimension: str) -> Scorer:
    if dimension in SCORERS:
        return SCORERS[dimension]
    return lambda g, props, extra: score_propositions(g.llm, dimension, props, extra, g.messages, g.batch_size)
