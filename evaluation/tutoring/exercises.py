"""Practice exercises for the reference tutor, generated from a topic, with answers it can check.

(Called exercises, not problems: a "problem" in this app is a judge's finding about a conversation.)

Both the reference tutor's prompt (for a real LLM) and the offline rule-based tutor and student
use them: the LLM is told the answer, so its feedback is grounded; the offline roles compare text.
"""

import random
import re
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Exercise:
    question: str
    answer: str
    hint: str
    wrong_answer: str

    def as_dict(self) -> dict[str, str]:
        # Written out: dataclasses.asdict deep-copies field by field, and a session's state holds dozens.
        return {"question": self.question, "answer": self.answer, "hint": self.hint, "wrong_answer": self.wrong_answer}


def _fractions(rng: random.Random) -> Exercise:
    d = rng.choice([5, 6, 8, 10, 12])
    a, b = rng.randint(1, d // 2), rng.randint(1, d // 2 - 1)
    total = Fraction(a + b, d)
    answer = f"{a + b}/{d}" if total.denominator == d else f"{a + b}/{d} = {total.numerator}/{total.denominator}"
    return Exercise(
        question=f"What is {a}/{d} + {b}/{d}?",
        answer=answer,
        hint=f"The pieces are all {d}ths, so count how many {d}ths you have altogether.",
        wrong_answer=f"{a + b}/{2 * d}",
    )


def _decimals(rng: random.Random) -> Exercise:
    tenths = rng.randint(2, 8)
    hundredths = rng.randint(11, tenths * 10 - 1)
    x, y = f"0.{hundredths:02d}", f"0.{tenths}"
    return Exercise(
        question=f"Which is larger, {x} or {y}?",
        answer=y,
        hint=f"Write {y} as {y}0 so both have hundredths, then compare.",
        wrong_answer=x,
    )


def _addition(rng: random.Random) -> Exercise:
    # Ones digits that add to 10 or more, so every problem needs regrouping.
    ones_a = rng.randint(2, 9)
    ones_b = rng.randint(10 - ones_a, 9)
    a, b = rng.randint(1, 5) * 10 + ones_a, rng.randint(1, 3) * 10 + ones_b
    return Exercise(
        question=f"What is {a} + {b}?",
        answer=str(a + b),
        hint=f"Add the ones first: {a % 10} + {b % 10} makes a new ten.",
        wrong_answer=str(a + b - 10),
    )


def _area(rng: random.Random) -> Exercise:
    w, h = rng.randint(3, 9), rng.randint(2, 8)
    return Exercise(
        question=f"A rectangle is {w} cm long and {h} cm wide. What is its area?",
        answer=f"{w * h} square cm",
        hint="Area counts the squares inside: multiply the length by the width.",
        wrong_answer=f"{2 * (w + h)} square cm",
    )


GENERATORS = {"fraction": _fractions, "decimal": _decimals, "area": _area, "perimeter": _area, "addition": _addition}


def exercises_for(topic_id: str, seed: str, count: int = 8) -> list[Exercise]:
    """A deterministic set of problems for a topic (by keywords in its id), seeded by the session."""
    generator = next((g for key, g in GENERATORS.items() if key in topic_id), _addition)
    rng = random.Random(f"{topic_id}:{seed}")
    return [generator(rng) for _ in range(count)]


_NUMBER = re.compile(r"\d+(?:[./]\d+)?")


def answer_matches(text: str, answer: str) -> bool:
    """Does the student's reply contain the answer's first number (3/8, 0.3, 47)?"""
    wanted = _NUMBER.findall(answer)
    return bool(wanted) and wanted[0] in _NUMBER.findall(text)


def solve(question: str) -> tuple[str, str] | None:
    """(right answer, typical wrong answer) for a question the offline student meets, if it can read it."""
    if m := re.search(r"What is (\d+)/(\d+) \+ (\d+)/(\d+)\?", question):
        a, d, b, _ = map(int, m.groups())
        return f"{a + b}/{d}", f"{a + b}/{2 * d}"
    if m := re.search(r"What is (\d+) \+ (\d+)\?", question):
        a, b = map(int, m.groups())
        return str(a + b), str(a + b - 10)
    if m := re.search(r"Which is larger, ([\d.]+) or ([\d.]+)\?", question):
        x, y = m.groups()
        return (x, y) if float(x) > float(y) else (y, x)
    if m := re.search(r"(\d+) cm long and (\d+) cm wide", question):
        w, h = map(int, m.groups())
        return f"{w * h} square cm", f"{2 * (w + h)} square cm"
    return None
