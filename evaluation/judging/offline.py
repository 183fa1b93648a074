"""The offline rubric judge: deterministic scores from measurable signals of the text, never from labels.

Each dimension a rule knows (by name, case ignored) gets a signal in [0, 1] from the conversation
or the candidate response: whether a mistake is acknowledged and located, whether the answer is
given away, hints, a next step, uptake of the student's words, warmth, length and boilerplate.
A dimension no rule knows gets the mean of the unit's signals, and its rationale says so. A small
seeded jitter per repeat (the call's seed) lets self-consistency be measured; the same input and
repeat always give the same score. Every rationale begins "[offline rule-based judge]".
"""

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaluation.providers.base import Request
from evaluation.text import content_words, ngram_overlap, tokens, word_count

LABEL = "[offline rule-based judge]"
MISTAKE = (
    "not quite",
    "not correct",
    "incorrect",
    "mistake",
    "careful",
    "almost",
    "close, but",
    "wrong",
    "error",
    "look again",
    "double-check",
    "check your",
    "not right",
    "isn't right",
    "let's check",
)
REVEAL = re.compile(r"\b(the (final |correct )?answer is|answer should be|so it'?s|which gives|equals|=\s*-?\d)", re.I)
HINT = (
    "try",
    "think about",
    "remember",
    "hint",
    "what if",
    "for example",
    "because",
    "step",
    "first",
    "notice",
    "how many",
    "what do you",
    "let's",
    "look at",
    "means",
)
NEXT_STEP = (
    "can you",
    "could you",
    "try",
    "what is",
    "what's",
    "how would",
    "calculate",
    "work out",
    "check",
    "tell me",
    "let's",
)
WARM = (
    "great",
    "good",
    "well done",
    "nice",
    "don't worry",
    "that's okay",
    "it's okay",
    "good try",
    "you can",
    "right track",
    "thank",
    "love",
    "excellent",
)
HARSH = ("obviously", "stupid", "careless", "wrong!", "pay attention", "again?!", "clearly you", "no.", "lazy", "silly")
BOILERPLATE = (
    "as an ai",
    "certainly!",
    "i'd be happy to",
    "great question",
    "i understand your",
    "feel free to",
    "i hope this helps",
    "let me know if",
)
DIGRESSION = ("instead", "let's talk about", "by the way", "anyway", "different topic", "something else")
SIGNALS_WORDS = (
    "don't know",
    "dont know",
    "confused",
    "not sure",
    "too much",
    "i don't get",
    "boring",
    "hard",
    "not good",
    "sorry",
    "easy",
)


@dataclass(frozen=True)
class DimensionScale:
    """What the rule needs of a dimension: its name and its levels, worst first."""

    name: str
    levels: tuple[str, ...]
    integer: bool = False


@dataclass(frozen=True)
class RubricJudgeRule:
    """The offline answer to one rubric-judge call, from the item's text."""

    dimensions: tuple[DimensionScale, ...]
    messages: tuple[tuple[str, str], ...]
    response: str = ""
    """The candidate response, for response-level rubrics; "" judges the whole conversation."""

    def __call__(self, request: Request, rng: random.Random) -> dict[str, Any]:
        return offline_rubric_judge(self.dimensions, self.messages, self.response, rng)


def _has(text: str, phrases: tuple[str, ...]) -> bool:
    lowered = text.lower().replace("\u2019", "'")
    return any(p in lowered for p in phrases)


def _clip(x: float) -> float:
    return max(0.0, min(1.0, x))


def _response_signals(messages: tuple[tuple[str, str], ...], response: str) -> dict[str, tuple[float, str]]:
    student = next((c for r, c in reversed(messages) if r == "student"), "")
    shared = content_words(student) & content_words(response)
    numbers = {t for t in tokens(student) if any(ch.isdigit() for ch in t)} & set(tokens(response))
    words = word_count(response)
    ack = _has(response, MISTAKE)
    reveal = bool(REVEAL.search(response))
    hints = sum(1 for h in HINT if h in response.lower())
    question = response.rstrip().endswith("?") or "?" in response
    warm, harsh = _has(response, WARM), _has(response, HARSH)
    boiler = _has(response, BOILERPLATE)
    uptake = len(shared) / max(1, min(len(content_words(student)), 6))
    length_fit = 1.0 if 8 <= words <= 60 else (0.5 if 4 <= words <= 100 else 0.0)
    return {
        "mistake_identification": (
            _clip(0.8 * ack + 0.2 * (uptake > 0)),
            f"{'acknowledges' if ack else 'does not acknowledge'} a mistake; takes up {len(shared)} of the student's words",
        ),
        "mistake_location": (
            _clip(0.45 * ack + 0.35 * bool(numbers) + 0.2 * min(1.0, uptake)),
            f"names {len(numbers)} of the student's numbers and {len(shared)} of their words",
        ),
        "revealing_of_the_answer": (
            0.5 if reveal else 1.0,
            "states an answer outright" if reveal else "leaves the answer to the student",
        ),
        "providing_guidance": (_clip(0.3 * min(hints, 3) + 0.1 * (words > 12)), f"{hints} hint or explanation markers"),
        "actionability": (
            _clip(0.6 * question + 0.4 * _has(response, NEXT_STEP)),
            f"{'asks' if question else 'asks no'} question; {'names' if _has(response, NEXT_STEP) else 'no'} next step",
        ),
        "coherence": (
            _clip(0.55 + 0.45 * min(1.0, uptake + 0.5 * bool(numbers)) - 0.7 * _has(response, DIGRESSION)),
            f"takes up {len(shared)} words and {len(numbers)} numbers of the student's last turn"
            + ("; changes the subject" if _has(response, DIGRESSION) else ""),
        ),
        "tutor_tone": (
            0.0 if harsh else (1.0 if warm else 0.5),
            "harsh wording" if harsh else ("warm wording" if warm else "neutral wording"),
        ),
        "humanlikeness": (
            _clip(length_fit - 0.6 * boiler),
            f"{words} words{'; boilerplate phrases' if boiler else ''}",
        ),
    }


def _session_signals(messages: tuple[tuple[str, str], ...]) -> dict[str, tuple[float, str]]:
    pairs = [
        (messages[i][1], messages[i + 1][1])
        for i in range(len(messages) - 1)
        if messages[i][0] == "student" and messages[i + 1][0] == "tutor"
    ]
    tutor = [c for r, c in messages if r == "tutor"]
    student = [c for r, c in messages if r == "student"]
    uptake = sum(1 for s, t in pairs if content_words(s) & content_words(t)) / max(1, len(pairs))
    signals = [(s, t) for s, t in pairs if _has(s, SIGNALS_WORDS)]
    met = [t for s, t in signals if _has(t, WARM) or content_words(s) & content_words(t)]
    overlap = sum(ngram_overlap(a, b) for a, b in zip(tutor, tutor[1:], strict=False)) / max(1, len(tutor) - 1)
    explained = sum(1 for t in tutor if _has(t, HINT)) / max(1, len(tutor))
    t_words = sum(word_count(t) for t in tutor) / max(1, len(tutor))
    s_words = sum(word_count(s) for s in student) / max(1, len(student))
    ratio = t_words / max(1.0, s_words)
    warm = sum(1 for t in tutor if _has(t, WARM)) / max(1, len(tutor))
    boiler = sum(1 for t in tutor if _has(t, BOILERPLATE)) / max(1, len(tutor))
    return {
        "responsiveness": (
            _clip(0.6 * uptake + 0.4 * (len(met) / len(signals) if signals else uptake)),
            f"student words taken up in {uptake:.0%} of replies; {len(met)} of {len(signals)} signals met",
        ),
        "explanation_quality": (
            _clip(0.2 + 0.8 * explained - 0.5 * overlap),
            f"{explained:.0%} of tutor turns explain or hint; consecutive-turn 3-gram overlap {overlap:.2f}",
        ),
        "emotional_attunement": (
            _clip(0.3 + 0.7 * (len(met) / len(signals) if signals else warm)),
            f"warmth in {warm:.0%} of tutor turns; {len(met)} of {len(signals)} signals met",
        ),
        "pacing": (
            _clip(1.1 - 0.08 * max(0.0, ratio - 2)),
            f"tutor turns {t_words:.0f} words against the student's {s_words:.0f}",
        ),
        "authenticity": (
            _clip(1.0 - 1.2 * overlap - 0.5 * boiler),
            f"3-gram overlap {overlap:.2f}; boilerplate in {boiler:.0%} of turns",
        ),
    }


SignalFn = Callable[..., dict[str, tuple[float, str]]]


def offline_rubric_judge(
    dimensions: tuple[DimensionScale, ...],
    messages: tuple[tuple[str, str], ...],
    response: str,
    rng: random.Random,
) -> dict[str, Any]:
    signals = _response_signals(messages, response) if response else _session_signals(messages)
    mean = sum(v for v, _ in signals.values()) / len(signals)
    scores = {}
    for dim in dimensions:
        known = signals.get(dim.name.lower())
        value, why = known if known else (mean, "no rule measures this dimension: the mean of the other signals")
        noisy = _clip(value + rng.gauss(0.0, 0.08))
        index = round(noisy * (len(dim.levels) - 1))
        level = dim.levels[index]
        scores[dim.name] = {"value": int(level) if dim.integer else level, "rationale": f"{LABEL} {why}."}
    return {"scores": scores}
