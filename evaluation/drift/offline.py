"""Rule-based stand-ins for the drift roles (offline provider), transparent about what they measure.

- proposition_judge: how much of the claim's content the context bears out (shared content words)
  plus cues a reader can check (exclamation marks, figures, questions, Latin binomials, brevity,
  assistant-speak), mapped to 0-9;
- gate: persona-spec words the message uses, minus assistant-speak;
- character: a line in the agent's voice from its cast file's sample lines.
"""

import random
import re
from typing import Any

from evaluation.providers.base import Request
from evaluation.providers.offline import register
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


@register("proposition_judge")
def offline_proposition_judge(request: Request, rng: random.Random) -> dict[str, Any]:
    checks = request.context.get("checks") or []
    out = []
    for check in checks:
        score, why = judge_check(check["claim"], check["context"])
        out.append({"id": check["id"], "score": score, "reasoning": why})
    return {"scores": out}


@register("gate")
def offline_gate(request: Request, rng: random.Random) -> dict[str, Any]:
    spec = request.context.get("persona_spec", "")
    text = request.context.get("text", "")
    overlap = len(content_words(text) & content_words(spec))
    penalty = 6 if any(p in text.lower() for p in ASSISTANT_SPEAK) else 0
    score = max(0, min(9, 3 + 2 * overlap - penalty))
    return {
        "score": score,
        "reasoning": f"[offline rule-based gate] {overlap} persona words used"
        + ("; assistant-speak found" if penalty else ""),
        "feedback": "Use your own voice and concerns from your persona; drop assistant phrases.",
    }


@register("character")
def offline_character(request: Request, rng: random.Random) -> str:
    agent = request.context.get("agent") or {}
    lines = agent.get("sample_lines") or [f"{agent.get('name', 'I')} has nothing to add."]
    turn = int(request.context.get("turn", 0))
    line = lines[(turn + rng.randrange(len(lines))) % len(lines)]
    avoid = (request.context.get("guidance") or {}).get("avoid_phrases") or []
    if avoid and any(phrase in line.lower() for phrase in avoid):
        line = next((candidate for candidate in lines if not any(p in candidate.lower() for p in avoid)), line)
    return line
