"""Rule-based stand-ins for the drift roles (offline provider), transparent about what they measure.

Each is a rule the caller passes with its call:
- PropositionRule (proposition_judge): how much of the claim's content the context bears out (shared content words)
  plus cues a reader can check (exclamation marks, figures, questions, Latin binomials, brevity,
  assistant-speak), mapped to 0-9;
- GateRule (gate): persona-spec words the message uses, minus assistant-speak;
- CharacterRule (a character agent speaking): a line in its voice from its cast file's sample lines,
  or, without any, a line built from the words of its description (varied by turn and seed).
"""

import random
import re
from dataclasses import dataclass
from typing import Any

from evaluation.providers.base import Request
from evaluation.text import content_words, word_count

ASSISTANT_SPEAK = ("as an ai", "happy to help", "great question", "i'd be glad", "certainly!", "how can i assist")
_LATIN = re.compile(r"\b[A-Z][a-z]+ [a-z]{3,}\b")
CUES = {
    "exclamation": lambda t: "!" in t,
    "enthusias": lambda t: t.count("!") >= 1,
    "figure": lambda t: bool(re.search(r"\d", t)),
    "budget": lambda t: bool(re.search(r"\d", t)) and "pound" in t.lower(),
    "question": lambda t: "?" in t,
    "latin": lambda t: bool(_LATIN.search(t)),
    "short": lambda t: max((word_count(s) for s in re.split(r"[.!?]", t) if s.strip()), default=0) <= 9,
    "blunt": lambda t: max((word_count(s) for s in re.split(r"[.!?]", t) if s.strip()), default=0) <= 9,
    "assistant": lambda t: any(p in t.lower() for p in ASSISTANT_SPEAK),
    "writing": lambda t: "writing" in t.lower(),
    "children": lambda t: any(w in t.lower() for w in ("child", "kids", "famil")),
}


def judge_check(claim: str, context: str) -> tuple[int, str]:
    message = context.split(":\n")[-1] if ":\n" in context else context
    claim_words = content_words(claim) - {"agent_name", "message", "messages"}
    shared = claim_words & content_words(context)
    base = 9 * len(shared) / max(1, len(claim_words))
    fired = [name for name, test in CUES.items() if name in claim.lower() and test(message)]
    missed = [name for name, test in CUES.items() if name in claim.lower() and not test(message)]
    score = base * 0.5 + 4.5 * (len(fired) / max(1, len(fired) + len(missed)) if (fired or missed) else base / 9)
    score = int(max(0, min(9, round(score))))
    why = f"[offline rule-based judge] shares {sorted(shared)[:4] or 'no words'} with the claim"
    if fired or missed:
        why += f"; cues present: {fired or 'none'}, absent: {missed or 'none'}"
    return score, why


@dataclass(frozen=True)
class PropositionRule:
    """Scores a batch of checks, each (id, claim, context)."""

    checks: tuple[tuple[str, str, str], ...]

    def __call__(self, request: Request, rng: random.Random) -> dict[str, Any]:
        out = []
        for check_id, claim, context in self.checks:
            score, why = judge_check(claim, context)
            out.append({"id": check_id, "score": score, "reasoning": why})
        return {"scores": out}


@dataclass(frozen=True)
class GateRule:
    persona_spec: str
    text: str

    def __call__(self, request: Request, rng: random.Random) -> dict[str, Any]:
        return offline_gate(self.persona_spec, self.text)


def offline_gate(spec: str, text: str) -> dict[str, Any]:
    overlap = len(content_words(text) & content_words(spec))
    penalty = 6 if any(p in text.lower() for p in ASSISTANT_SPEAK) else 0
    score = max(0, min(9, 3 + 2 * overlap - penalty))
    return {
        "score": score,
        "reasoning": f"[offline rule-based gate] {overlap} persona words used"
        + ("; assistant-speak found" if penalty else ""),
        "feedback": "Use your own voice and concerns from your persona; drop assistant phrases.",
    }


@dataclass(frozen=True)
class CharacterRule:
    """A character agent's next line, from its sample lines, avoiding the phrases it overuses."""

    name: str
    sample_lines: tuple[str, ...]
    turn: int
    avoid_phrases: tuple[str, ...] = ()
    description: str = ""

    def __call__(self, request: Request, rng: random.Random) -> str:
        return offline_character(self, rng)


OPENERS = ("Honestly,", "Well,", "Look,", "For what it's worth,", "If you ask me,", "Right,", "Hm.", "Listen,")
SHAPES = (
    "{o} this is about {a} for me, and {b} matters more than we admit.",
    "{o} I keep coming back to {a}. What about {b}?",
    "{o} {a} first, then {b}. That's how I'd do it.",
    "Can we talk about {a}? {o} {b} is where it goes wrong.",
    "{o} nobody has mentioned {a} yet, and I care about {b}.",
    "{o} {b} and {a}: that's my whole point, really.",
)


def lines_from_description(name: str, description: str, rng: random.Random, count: int = 6) -> list[str]:
    """Varied lines made of the description's own content words (no sample lines to speak from)."""
    name_words = content_words(name)
    words = sorted(content_words(description) - name_words - {"agent", "persona"})
    if len(words) < 2:
        return [f"{name or 'I'} has nothing to add."]
    out = []
    for _ in range(count):
        a, b = rng.sample(words, 2)
        out.append(rng.choice(SHAPES).format(o=rng.choice(OPENERS), a=a, b=b).replace("Hm. ", "Hm, "))
    return out


def offline_character(rule: CharacterRule, rng: random.Random) -> str:
    lines = list(rule.sample_lines) or lines_from_description(rule.name, rule.description, rng)
    line = lines[(rule.turn + rng.randrange(len(lines))) % len(lines)]
    avoid = rule.avoid_phrases
    if avoid and any(phrase in line.lower() for phrase in avoid):
        line = next((candidate for candidate in lines if not any(p in candidate.lower() for p in avoid)), line)
    return line
