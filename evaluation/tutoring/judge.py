"""The persona-aware LLM judge (spec 001): five dimensions scored 1-10, and the top five problems."""

import functools
import hashlib
import json
import re
from typing import Any

from evaluation.models.runs import RootCause, Severity
from evaluation.providers import LLM, LLMResult, Message
from evaluation.providers.batch import BatchCall
from evaluation.tutoring.offline import JudgeRule
from evaluation.tutoring.rubric import ANCHORS, DIMENSIONS, GENERIC_CRITERIA, PERSONA_CRITERIA, SLUG, VERSION
from evaluation.tutoring.values import DimensionScore, Finding, Judgement, PersonaSpec, TopicSpec


def judge_schema() -> dict[str, Any]:
    dims = list(DIMENSIONS)
    return {
        "type": "object",
        "required": ["scores", "dimension_analysis", "problems", "summary"],
        "properties": {
            "scores": {
                "type": "object",
                "required": dims,
                "properties": {d: {"type": "integer", "minimum": 1, "maximum": 10} for d in dims},
            },
            "dimension_analysis": {
                "type": "object",
                "required": dims,
                "properties": {d: {"type": "string"} for d in dims},
            },
            "problems": {
                "type": "array",
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "required": ["title", "turns", "description", "quote", "severity", "root_cause"],
                    "properties": {
                        "title": {"type": "string", "minLength": 1},
                        "turns": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                        "description": {"type": "string"},
                        "quote": {"type": "string"},
                        "severity": {"enum": list(Severity.values)},
                        "root_cause": {"enum": list(RootCause.values)},
                    },
                },
            },
            "summary": {"type": "string"},
        },
    }


@functools.cache
def prompt_hash() -> str:
    """The judge's instructions and output schema, hashed: two judgements compare only under the same."""
    text = system_prompt() + json.dumps(judge_schema(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def judge_config(judge: str) -> dict[str, str]:
    """What makes two judgements comparable: the judge as configured (provider/model), the prompt's hash
    and the rubric's version. Every judged run records it; a baseline is checked against it."""
    return {"judge": judge, "prompt_hash": prompt_hash(), "rubric": f"{SLUG} v{VERSION}"}


def format_transcript(messages: list[dict[str, Any]]) -> str:
    return "\n".join(f"[Turn {m['turn']}] {m['role'].upper()}: {m['content']}" for m in messages)


def system_prompt() -> str:
    lines = [
        "You are an expert evaluator of tutoring conversations. A simulated student with a known persona talked to a "
        "tutor. Score the TUTOR on five dimensions from 1 to 10, judged for THIS student: the same tutor behaviour "
        "can be right for one persona and wrong for another.",
        "",
    ]
    for dimension in DIMENSIONS.values():
        lines.append(f"## {dimension.name}: {dimension.question}")
        lines += [f"- {anchor}: {text}" for anchor, text in zip(ANCHORS, dimension.levels, strict=True)]
    lines += [
        "",
        "Then name the top problems (at most 5), most important first. For each: a short title, the turn numbers, "
        "what went wrong for this persona, an exact quote copied from the transcript, a severity "
        f"({', '.join(Severity.values)}) and a root cause ({', '.join(RootCause.values)}).",
        "Write an analysis for each dimension and an overall summary. Reply with JSON only.",
    ]
    return "\n".join(lines)


def build_user_message(messages: list[dict[str, Any]], persona: PersonaSpec | None, topic: TopicSpec | None) -> str:
    """Spec 001's _build_user_message: transcript, persona context, topic context."""
    parts = ["# Transcript", format_transcript(messages), ""]
    if persona:
        parts += [
            "# Student persona",
            f"Name: {persona.name} (id: {persona.persona_id})",
            f"Description: {persona.description}",
            "Personality traits: " + ", ".join(persona.personality_traits),
            f"Correct answer probability: {persona.correct_answer_probability}",
            "Behavioural tendencies: "
            + (
                ", ".join(
                    f"{b.key}={b.probability:g}" + (f" ({b.trigger})" if b.trigger != "always" else "")
                    for b in persona.behaviors
                )
                or "none"
            ),
            f"Persona-specific criteria: {PERSONA_CRITERIA.get(persona.persona_id, GENERIC_CRITERIA)}",
            "",
        ]
    if topic:
        parts += [
            "# Topic",
            f"Name: {topic.name} (grade {topic.grade})",
            "Learning objectives: " + "; ".join(topic.learning_objectives),
            "Common misconceptions: " + "; ".join(topic.common_misconceptions),
        ]
    return "\n".join(parts)


_SPACE = re.compile(r"\s+")


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')).strip().lower()


def quote_in_transcript(quote: str, messages: list[dict[str, Any]]) -> bool:
    """Is the quote (ignoring case, spacing, surrounding quote marks and ellipses) in some message?"""
    needle = _normalise(quote).strip("\"' .…")
    if not needle:
        return False
    pieces = [p.strip() for p in re.split(r"\.\.\.|…", needle) if p.strip()]
    return any(all(piece in _normalise(m["content"]) for piece in pieces) for m in messages)


def judge_call(
    messages: list[dict[str, Any]], persona: PersonaSpec | None, topic: TopicSpec | None, *, seed: int | None
) -> BatchCall:
    """The judge's call for one conversation (made directly, or as one line of a provider batch)."""
    return BatchCall(
        messages=(Message("system", system_prompt()), Message("user", build_user_message(messages, persona, topic))),
        schema=judge_schema(),
        offline=JudgeRule(messages=tuple(messages), persona=persona),
        settings=(("seed", seed),),
    )


def judge_conversation(
    messages: list[dict[str, Any]],
    persona: PersonaSpec | None,
    topic: TopicSpec | None,
    llm: LLM,
    *,
    seed: int | None = None,
    answer: LLMResult | None = None,
) -> Judgement:
    """Ask the judge (seeded with the run's seed, where the vendor takes one); every finding gets
    quote_found. Raises InvalidJSONError if it never answers validly. `answer`: the judge's answer to
    judge_call's call, already given (a line of a provider batch); then nothing is sent."""
    if answer is None:
        call = judge_call(messages, persona, topic, seed=seed)
        answer = llm.call(list(call.messages), schema=call.schema, offline=call.offline, **dict(call.settings))
    result = answer
    data = result.data
    summary = data["summary"]
    if llm.is_offline and not summary.startswith("[offline"):
        summary = "[offline rule-based judge] " + summary
    return Judgement(
        scores=tuple(
            DimensionScore(d, float(data["scores"][d]), data["dimension_analysis"].get(d, "")) for d in DIMENSIONS
        ),
        findings=tuple(
            Finding(
                rank=rank,
                title=p["title"][:300],
                turns=tuple(p["turns"]),
                description=p["description"],
                quote=p["quote"],
                quote_found=quote_in_transcript(p["quote"], messages),
                severity=p["severity"],
                root_cause=p["root_cause"],
            )
            for rank, p in enumerate(data["problems"][:5], start=1)
        ),
        summary=summary,
        judge_label=f"{result.provider}/{result.model}",
    )
