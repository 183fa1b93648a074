"""The persona-aware LLM judge (spec 001): five dimensions scored 1-10, and the top five problems."""

import re
from dataclasses import dataclass, field
from typing import Any

from evaluation.models.runs import RootCause, Severity
from evaluation.providers import LLM, Message

DIMENSIONS = {
    "responsiveness": "Does the tutor adapt to student signals?",
    "explanation_quality": "Does the tutor explain well and try different approaches?",
    "emotional_attunement": "Does the tutor read the room emotionally?",
    "pacing": "Is the tutor moving at the right speed for this student?",
    "authenticity": "Does it feel like a real teacher or a chatbot?",
}

RUBRICS = {
    "responsiveness": [
        "ignores what the student says; a fixed script regardless of answers or signals",
        "notices answers but not confusion, boredom or requests; rarely changes course",
        "responds to explicit requests but misses implicit signals",
        "adapts to most signals: slows down, speeds up, changes examples when asked or when it is implied",
        "every move is shaped by what this student just showed; signals are caught early, even subtle ones",
    ],
    "explanation_quality": [
        "explanations are wrong, missing or confusing",
        "correct but generic; repeats the same explanation when it fails",
        "clear explanations with one approach; some attempt to diagnose mistakes",
        "clear, concrete explanations; tries a new approach when the first fails; addresses misconceptions",
        "explanations fit this student exactly, with well-chosen examples and the misconception named and fixed",
    ],
    "emotional_attunement": [
        "dismissive or cold; misses distress or frustration entirely",
        "generic praise and encouragement unrelated to how the student feels",
        "acknowledges strong emotions but in a formulaic way",
        "reads frustration, boredom and shyness and responds to them warmly",
        "consistently attuned: builds confidence, respects mood, turns setbacks into progress",
    ],
    "pacing": [
        "badly mismatched: drags a fast student or rushes a struggling one throughout",
        "often too fast or too slow for this student; too much at once",
        "acceptable pace with clear stretches of mismatch",
        "mostly right for this student; adjusts after signs of mismatch",
        "exactly right throughout: step size, length and challenge tuned to this student",
    ],
    "authenticity": [
        "robotic: templates, repeated phrases, walls of text",
        "noticeably scripted; formulaic praise and openers",
        "mostly natural with some chatbot habits",
        "sounds like a real teacher, varied and personal",
        "indistinguishable from an excellent human tutor",
    ],
}
ANCHORS = ("1-2", "3-4", "5-6", "7-8", "9-10")

PERSONA_CRITERIA = {
    "ace": "Did the tutor avoid patronising? Speed up and offer harder problems once the student showed mastery?",
    "average_student": "Did the tutor give examples when introducing something new, and check understanding?",
    "confused_confident": "Did the tutor surface the misconception behind confident wrong answers instead of just correcting?",
    "distractor": "Did the tutor redirect gently, using the student's interests, without scolding or losing the thread?",
    "quiet_one": "Did the tutor draw the student out with low-pressure questions, and check understanding beyond 'ok'?",
    "repetition_detector": "Did the tutor vary its phrasing and approach, especially after being called out?",
    "simplicity_seeker": "Did the tutor keep steps short and single, and simplify when the student was overwhelmed?",
    "struggler": "Did the tutor encourage, create small wins, and break problems down without doing them for her?",
}
GENERIC_CRITERIA = "Judge every dimension against what this particular student needs, not an average student."

SUGGESTED_FIXES = {
    "missed_student_signal": "Have the tutor check the student's last message for confusion, boredom or distress before replying.",
    "wrong_pacing": "Tune step size and reply length to the persona; speed up after successes, slow down after errors.",
    "repetitive_approach": "Track the explanations already given and require a different approach after a failed one.",
    "emotional_mismatch": "Acknowledge the student's feelings explicitly before continuing with the maths.",
    "missed_misconception": "Ask the student to explain their reasoning after a wrong answer and name the misconception.",
    "over_scaffolding": "Let the student attempt the step before giving hints; withdraw support as they succeed.",
    "conversation_history_window": "Increase the conversation history window.",
    "session_summary_lossy": "Improve session summary to capture narrative context.",
    "prompt_quality": "Revise the tutor's system prompt for the behaviour this problem shows.",
    "model_capability": "Try a stronger tutor model for this persona, or simplify what the prompt asks of it.",
    "other": "Read the quoted turns and decide on a targeted fix.",
}


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


def format_transcript(messages: list[dict[str, Any]]) -> str:
    return "\n".join(f"[Turn {m['turn']}] {m['role'].upper()}: {m['content']}" for m in messages)


def system_prompt() -> str:
    lines = [
        "You are an expert evaluator of tutoring conversations. A simulated student with a known persona talked to a "
        "tutor. Score the TUTOR on five dimensions from 1 to 10, judged for THIS student: the same tutor behaviour "
        "can be right for one persona and wrong for another.",
        "",
    ]
    for name, question in DIMENSIONS.items():
        lines.append(f"## {name}: {question}")
        lines += [f"- {anchor}: {text}" for anchor, text in zip(ANCHORS, RUBRICS[name], strict=True)]
    lines += [
        "",
        "Then name the top problems (at most 5), most important first. For each: a short title, the turn numbers, "
        "what went wrong for this persona, an exact quote copied from the transcript, a severity "
        f"({', '.join(Severity.values)}) and a root cause ({', '.join(RootCause.values)}).",
        "Write an analysis for each dimension and an overall summary. Reply with JSON only.",
    ]
    return "\n".join(lines)


def build_user_message(
    messages: list[dict[str, Any]], persona: dict[str, Any] | None, topic: dict[str, Any] | None
) -> str:
    """Spec 001's _build_user_message: transcript, persona context, topic context."""
    parts = ["# Transcript", format_transcript(messages), ""]
    if persona:
        tendencies = persona.get("persona_specific_behaviors") or {}
        parts += [
            "# Student persona",
            f"Name: {persona.get('name')} (id: {persona.get('persona_id')})",
            f"Description: {persona.get('description')}",
            "Personality traits: " + ", ".join(persona.get("personality_traits") or []),
            f"Correct answer probability: {persona.get('correct_answer_probability')}",
            "Behavioural tendencies: " + (", ".join(f"{k}={v}" for k, v in tendencies.items()) or "none"),
            f"Persona-specific criteria: {PERSONA_CRITERIA.get(persona.get('persona_id', ''), GENERIC_CRITERIA)}",
            "",
        ]
    if topic:
        parts += [
            "# Topic",
            f"Name: {topic.get('name')} (grade {topic.get('grade')})",
            "Learning objectives: " + "; ".join(topic.get("learning_objectives") or []),
            "Common misconceptions: " + "; ".join(topic.get("common_misconceptions") or []),
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


@dataclass
class Judgement:
    scores: dict[str, float]
    analysis: dict[str, str]
    problems: list[dict[str, Any]]
    summary: str
    judge_label: str
    offline: bool
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def average(self) -> float:
        return round(sum(self.scores.values()) / len(self.scores), 2) if self.scores else 0.0


def judge_conversation(
    messages: list[dict[str, Any]], persona: dict[str, Any] | None, topic: dict[str, Any] | None, llm: LLM
) -> Judgement:
    """Ask the judge; every problem gets quote_found. Raises InvalidJSONError if it never answers validly."""
    result = llm.call(
        [Message("system", system_prompt()), Message("user", build_user_message(messages, persona, topic))],
        schema=judge_schema(),
        context={"messages": messages, "persona": persona, "topic": topic},
    )
    data = result.data
    problems = []
    for rank, problem in enumerate(data["problems"][:5], start=1):
        problems.append({**problem, "rank": rank, "quote_found": quote_in_transcript(problem["quote"], messages)})
    summary = data["summary"]
    if llm.is_offline and not summary.startswith("[offline"):
        summary = "[offline rule-based judge] " + summary
    return Judgement(
        scores={d: float(data["scores"][d]) for d in DIMENSIONS},
        analysis={d: data["dimension_analysis"].get(d, "") for d in DIMENSIONS},
        problems=problems,
        summary=summary,
        judge_label=f"{result.provider}/{result.model}",
        offline=llm.is_offline,
        raw=data,
    )
