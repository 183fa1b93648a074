"""Simulator fidelity: did the simulated student do what its turn decisions asked of it?

A low score may be the student's fault, not the tutor's. For each simulated run this measures, from
the stored transcript and turn decisions alone:
- the correct rate: decided (the seeded rolls) and realised (answers whose text is right, where the
  tutor's question can be solved), each with a Wilson 95% interval, against the persona's target;
- answers whose text contradicts their turn's decision (told to be right, wrote a wrong answer);
- requested behaviours (those that fired) shown or not, by markers a reader can check.
A run "strayed" when the target lies outside the realised rate's interval, when more than
CONTRADICTION_LIMIT of the checked answers contradict their decision, or when fewer than
BEHAVIOUR_SHOWN_LIMIT of the checked behaviour requests show.
"""

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from evaluation.text import word_count
from evaluation.tutoring.exercises import answer_matches, solve

# scipy is imported where it is used: it takes longer to import than the rest of the app.

CONFIDENCE = 0.95
CONTRADICTION_LIMIT = 0.1
BEHAVIOUR_SHOWN_LIMIT = 0.5
MIN_BEHAVIOUR_CHECKS = 2
"""Fewer checked behaviour requests than this say too little to flag a run."""

SHOWN_MARKERS: dict[str, tuple[str, ...]] = {
    "boredom": ("easy", "boring", "bored", "harder", "already know"),
    "challenge_request": ("harder", "challenge", "too easy", "next"),
    "example_request": ("example", "show me"),
    "pushback": ("i'm sure", "im sure", "i am sure", "my way", "no,", "but i"),
    "off_topic": ("dog", "minecraft", "football", "game", "did you know", "lunch", "cartoon"),
    "call_out_repetition": ("already", "same thing", "again", "keep saying"),
    "overwhelm": ("too much", "simpler", "confus", "slow down"),
    "discouragement": ("not good", "always get", "can't", "cant", "bad at", "give up"),
}
"""Words that show a behaviour in the student's text (lower case); a behaviour without markers is unchecked."""
MINIMAL_WORDS = 4
"""minimal_response is shown by a reply of at most this many words."""


@dataclass(frozen=True)
class Rate:
    """k of n, with its Wilson interval."""

    k: int
    n: int
    rate: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, k: int, n: int) -> "Rate":
        if n == 0:
            return cls(k, n, None, None, None)
        low, high = _wilson(k, n)
        return cls(k, n, round(k / n, 4), low, high)

    def excludes(self, value: float) -> bool:
        return self.low is not None and self.high is not None and not self.low <= value <= self.high


@lru_cache(maxsize=4096)
def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson interval of k in n, rounded. Kept per (k, n): scipy's binomtest also works out an
    exact p-value nobody reads here (most of its cost), and a run's counts are small numbers that recur."""
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return round(float(ci.low), 4), round(float(ci.high), 4)


@dataclass(frozen=True)
class Contradiction:
    """A student answer whose text disagrees with its turn's decision."""

    turn: int
    """The student's turn (its decision's number: turn 3 is the student's third message)."""
    message: int | None
    """The message's number in the transcript, where the messages carry one (what pages link to)."""
    decided_correct: bool
    answer: str
    expected: str
    """The right answer the tutor's question has."""


@dataclass(frozen=True)
class BehaviourCheck:
    name: str
    requested: int
    shown: int
    checked: bool
    """False when no marker can tell whether the behaviour was shown."""


@dataclass(frozen=True)
class Fidelity:
    target: float
    decided: Rate
    realised: Rate
    unchecked_answers: int
    """Student turns whose tutor message held no question the checker can solve, or whose (grounded) move was
    not to answer."""
    contradictions: tuple[Contradiction, ...]
    behaviours: tuple[BehaviourCheck, ...]
    strayed: bool
    reasons: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def shown(name: str, text: str) -> bool | None:
    """Does the text show the behaviour? None when no marker can tell."""
    if name == "minimal_response":
        return word_count(text) <= MINIMAL_WORDS
    markers = SHOWN_MARKERS.get(name)
    if markers is None:
        return None
    lower = text.lower()
    return any(marker in lower for marker in markers)


def simulator_fidelity(messages: list[dict[str, Any]], target: float) -> Fidelity | None:
    """The fidelity of one simulated conversation; None when it has no turn decisions (a real session)."""
    last_tutor = ""
    decided = right = checked = unchecked = 0
    contradictions: list[Contradiction] = []
    requested: dict[str, list[bool | None]] = {}
    for m in messages:
        if m["role"] == "tutor":
            last_tutor = m["content"]
            continue
        decision = (m.get("metadata") or {}).get("turn_decision")
        if m["role"] != "student" or not decision:
            continue
        decided += bool(decision["correct"])
        for name in decision.get("behaviors") or ():
            requested.setdefault(name, []).append(shown(name, m["content"]))
        solved = solve(last_tutor)
        if solved is None or decision.get("move", "answer") != "answer":
            unchecked += 1  # no question to check, or a grounded turn decided not to answer ("ok", "idk")
            continue
        checked += 1
        text_right = answer_matches(m["content"], solved[0])
        right += text_right
        if text_right != bool(decision["correct"]):
            contradictions.append(
                Contradiction(decision["turn"], m.get("turn"), bool(decision["correct"]), m["content"], solved[0])
            )
    turns = sum(1 for m in messages if (m.get("metadata") or {}).get("turn_decision"))
    if turns == 0:
        return None
    realised = Rate.of(right, checked)
    behaviours = tuple(
        BehaviourCheck(
            name,
            len(results),
            sum(1 for r in results if r),
            checked=all(r is not None for r in results),
        )
        for name, results in sorted(requested.items())
    )
    reasons = []
    if realised.excludes(target):
        reasons.append(
            f"realised correct rate {realised.rate:.0%} ({realised.k}/{realised.n}, 95% CI "
            f"{realised.low:.0%}-{realised.high:.0%}) excludes the persona's target {target:.0%}"
        )
    if checked and len(contradictions) / checked > CONTRADICTION_LIMIT:
        reasons.append(f"{len(contradictions)} of {checked} checked answers contradict their turn decision")
    checks = [b for b in behaviours if b.checked]
    asked, showed = sum(b.requested for b in checks), sum(b.shown for b in checks)
    if asked >= MIN_BEHAVIOUR_CHECKS and showed / asked < BEHAVIOUR_SHOWN_LIMIT:
        reasons.append(f"only {showed} of {asked} requested behaviours were shown")
    return Fidelity(
        target=target,
        decided=Rate.of(decided, turns),
        realised=realised,
        unchecked_answers=unchecked,
        contradictions=tuple(contradictions),
        behaviours=behaviours,
        strayed=bool(reasons),
        reasons=tuple(reasons),
    )
