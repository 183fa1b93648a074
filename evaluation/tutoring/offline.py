"""Rule-based stand-ins for the tutoring roles, used by the offline provider (no network, no key).

Each is a rule the caller passes with its call, built from typed inputs:
- StudentRule (simulator): answers the tutor's problem right or wrong as the turn decision says, in the
  persona's voice and word budget, showing the behaviours that fired;
- TutorRule (tutor): a scripted reference tutor that checks answers against the problem set;
- JudgeRule (judge): a transparent judge over measurable signals. Its summaries say that they come from the
  offline rule-based judge.
"""

import random
import re
from dataclasses import dataclass
from typing import Any

from evaluation.providers.base import Request
from evaluation.text import content_words, ngram_overlap, repeated_ngrams, tokens, word_count
from evaluation.tutoring.exercises import answer_matches, solve
from evaluation.tutoring.rubric import DIMENSIONS
from evaluation.tutoring.values import PersonaSpec, TurnDecision

BEHAVIOUR_LINES = {
    "boredom": ["This is easy.", "Can we do something harder?", "Boring..."],
    "challenge_request": ["Give me a harder one!", "Too easy, next."],
    "example_request": ["Can you show me an example?", "Can you explain with an example?"],
    "pushback": ["No, I'm sure I'm right.", "My way is right though."],
    "off_topic": ["Did you know my dog can catch a frisbee?", "Do you play Minecraft?", "We had football today!"],
    "minimal_response": [],
    "call_out_repetition": ["You said that already.", "Why do you keep saying the same thing?"],
    "overwhelm": ["That's too much.", "Can you say it simpler?"],
    "discouragement": ["I'm not good at this.", "I always get these wrong."],
}
SHORT_LINES = {
    "boredom": ["boring", "too easy"],
    "challenge_request": ["harder one", "too easy, next"],
    "example_request": ["example?", "show me"],
    "pushback": ["no, im sure", "but i did it my way"],
    "off_topic": ["my dog is funny", "i like minecraft", "football today"],
    "call_out_repetition": ["you said that already", "again?"],
    "overwhelm": ["too much", "slow down"],
    "discouragement": ["i cant do this", "im bad at this"],
}
"""A grounded student's behaviours, the way real students show them: a few words beside the turn's move (the
full BEHAVIOUR_LINES would be clipped to the persona's verbosity and lose what they show)."""
NEGATIVE_SIGNALS = (
    "not good",
    "too much",
    "don't know",
    "dont know",
    "confused",
    "boring",
    "easy",
    "always get",
    "said that already",
    "simpler",
    "harder",
    "sorry",
    "not sure",
    "i don't get",
)


def _clip(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) if len(words) > max_words else text


@dataclass(frozen=True)
class StudentRule:
    """The student's turn: the persona's voice and word budget, right or wrong as the decision says."""

    persona: PersonaSpec
    decision: TurnDecision
    tutor_message: str

    def __call__(self, request: Request, rng: random.Random) -> str:
        return offline_student(self.persona, self.decision, self.tutor_message, rng)


def offline_student(persona: PersonaSpec, decision: TurnDecision, tutor_message: str, rng: random.Random) -> str:
    max_words = persona.response_style.max_words
    solved = solve(tutor_message)
    behaviours = decision.behaviors
    grounding = persona.grounding
    if grounding is not None:
        shown = [rng.choice(SHORT_LINES[name]) for name in behaviours if name in SHORT_LINES]
        move = _grounded_move(persona, decision, solved, rng)
        return " ".join([*shown, move]) if shown else move
    if solved is None:
        examples = [e for e in persona.response_style.examples if not any(c.isdigit() for c in e)]
        return _clip(rng.choice(examples or ["Okay."]), max_words)
    right, wrong = solved
    answer = right if decision.correct else wrong
    if "minimal_response" in behaviours:
        return rng.choice([answer, f"{answer}?", f"maybe {answer}"])
    parts = []
    for name in behaviours:
        lines = BEHAVIOUR_LINES.get(name)
        if lines:
            parts.append(rng.choice(lines))
    hedge = rng.choice(["", "I think ", "Is it ", "Umm, "]) if persona.correct_answer_probability < 0.7 else ""
    parts.append(f"{hedge}{answer}{'?' if hedge.startswith('Is') else '.'}")
    return _clip(" ".join(parts), max_words)


def _grounded_move(
    persona: PersonaSpec, decision: TurnDecision, solved: tuple[str, str] | None, rng: random.Random
) -> str:
    """A grounded student's move in its few words: an acknowledgement, a disengaged reply, a question about
    the answer, or the bare answer (real students mostly write the bare answer)."""
    grounding = persona.grounding
    assert grounding is not None
    if decision.move in ("acknowledge", "disengage"):
        return rng.choice(ACKNOWLEDGEMENTS if decision.move == "acknowledge" else DISENGAGED)
    if solved is None:
        examples = [e for e in persona.response_style.examples if not any(c.isdigit() for c in e)]
        return _clip(rng.choice(examples or ["Okay."]), grounding.verbosity)
    answer = solved[0] if decision.correct else solved[1]
    if decision.move == "question":
        return f"is it {answer}?"
    if grounding.verbosity <= 2 or "minimal_response" in decision.behaviors:
        return answer
    hedge = rng.choice(["", "i think ", "umm "]) if persona.correct_answer_probability < 0.7 else ""
    return _clip(f"{hedge}{answer}", grounding.verbosity)


ACKNOWLEDGEMENTS = ["ok", "okay", "yes", "ok", "yeah", "k"]
DISENGAGED = ["idk", "i dont know", "no", "dunno", "not sure"]
"""A grounded student's turns that are not answers (the acknowledgement and disengage moves)."""

PRAISE = ["Yes, that's right!", "Correct, well done.", "Great job!", "Exactly right."]


@dataclass(frozen=True)
class TutorRule:
    """The scripted reference tutor: checks the student's answer against the session's exercises.

    Without a session state (a tutor call from outside a reference-tutor session) it answers plainly.
    """

    state: dict[str, Any] | None = None
    opening: bool = False
    student_text: str = ""

    def __call__(self, request: Request, rng: random.Random) -> str | dict[str, Any]:
        return offline_tutor(request, rng, self.state, self.opening, self.student_text)


def offline_tutor(
    request: Request, rng: random.Random, state: dict[str, Any] | None, opening: bool, student: str
) -> str | dict[str, Any]:
    if state is None:
        last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        return f"Let's work through it together. You said: {last[:200]}"
    problems = state["problems"]
    if opening:
        return f"Hi! Today we're practising {state['topic']['name'].lower()}. Let's start: {problems[0]['question']}"
    current = problems[state["index"]]
    upcoming = problems[state["index"] + 1]["question"] if state["index"] + 1 < len(problems) else None
    correct = answer_matches(student, current["answer"])
    then = f" Next one: {upcoming}" if upcoming else " That was the last one. Great work today, see you next time!"
    if correct:
        return {
            "reply": f"{rng.choice(PRAISE)} It's {current['answer']}.{then}",
            "student_correct": True,
            "move_on": True,
        }
    if "gives_answer_away" in state.get("faults", ()):
        return {
            "reply": f"Not quite. The answer is {current['answer']}.{then}",
            "student_correct": False,
            "move_on": True,
        }
    if state["attempts"] + 1 >= 2:
        reply = f"Not quite. The answer is {current['answer']}. {current['hint']}{then}"
        return {"reply": reply, "student_correct": False, "move_on": True}
    if not any(ch.isdigit() for ch in student):
        return {
            "reply": f"Let's focus on the problem. {current['question']}",
            "student_correct": False,
            "move_on": False,
        }
    return {
        "reply": f"Not quite. {current['hint']} Try again: {current['question']}",
        "student_correct": False,
        "move_on": False,
    }


def _clamp(x: float) -> int:
    return int(max(1, min(10, round(x))))


@dataclass(frozen=True)
class JudgeRule:
    """The transparent judge: scores from signals a reader can check; problems quote the transcript exactly."""

    messages: tuple[dict[str, Any], ...]
    persona: PersonaSpec | None = None

    def __call__(self, request: Request, rng: random.Random) -> dict[str, Any]:
        return offline_judge(list(self.messages), self.persona)


def offline_judge(messages: list[dict[str, Any]], persona: PersonaSpec | None) -> dict[str, Any]:
    budget = persona.response_style.max_words if persona else 25
    tutor = [m for m in messages if m["role"] == "tutor"]
    pairs = [
        (messages[i], messages[i + 1])
        for i in range(len(messages) - 1)
        if messages[i]["role"] == "student" and messages[i + 1]["role"] == "tutor"
    ]
    problems: list[dict[str, Any]] = []

    # Responsiveness: does the tutor take up the student's words and respond to signals?
    signals = [(s, t) for s, t in pairs if any(k in s["content"].lower() for k in NEGATIVE_SIGNALS)]
    missed = [(s, t) for s, t in signals if not content_words(s["content"]) & content_words(t["content"])]
    uptake = sum(1 for s, t in pairs if content_words(s["content"]) & content_words(t["content"])) / max(1, len(pairs))
    responsiveness = 3 + 5 * uptake - 4 * (len(missed) / max(1, len(signals)) if signals else 0) + 2
    if missed:
        s, t = missed[0]
        problems.append(
            {
                "title": "Student signal ignored",
                "turns": [s["turn"], t["turn"]],
                "severity": "major",
                "root_cause": "missed_student_signal",
                "quote": s["content"],
                "description": f"{len(missed)} of {len(signals)} student signals (confusion, boredom, "
                "distress) got a reply that did not acknowledge them.",
            }
        )

    # Repetition across tutor turns (authenticity, explanation quality).
    repeated = repeated_ngrams([m["content"] for m in tutor], n=3, min_count=3)
    overlap = sum(ngram_overlap(a["content"], b["content"]) for a, b in zip(tutor, tutor[1:], strict=False)) / max(
        1, len(tutor) - 1
    )
    authenticity = 9 - 8 * overlap - min(3, len(repeated) / 4)
    if repeated:
        phrase, count = repeated[0]
        hit = next(m for m in tutor if phrase in " ".join(tokens(m["content"])))
        quote = _original_span(hit["content"], phrase)
        problems.append(
            {
                "title": f"Repeats the phrase '{phrase}'",
                "turns": [m["turn"] for m in tutor if phrase in " ".join(tokens(m["content"]))][:6],
                "severity": "major" if count >= 5 else "minor",
                "root_cause": "repetitive_approach",
                "quote": quote,
                "description": f"The same three-word phrase opens or fills {count} tutor turns.",
            }
        )

    # Explanation quality: after a wrong answer, does the tutor explain (hint, why) rather than only correct?
    wrong_followups = [t for s, t in pairs if t["content"].lower().startswith("not quite")]
    explained = [t for t in wrong_followups if word_count(t["content"]) > 12]
    explanation = 4 + 4 * (len(explained) / max(1, len(wrong_followups))) - 2 * min(1.0, overlap * 2) + 1
    gave_away = [t for t in wrong_followups if "the answer is" in t["content"].lower()]
    if gave_away:
        t = gave_away[0]
        problems.append(
            {
                "title": "Gives the answer instead of finding the misconception",
                "turns": [t["turn"]],
                "severity": "major",
                "root_cause": "missed_misconception",
                "quote": _first_sentences(t["content"], 2),
                "description": f"{len(gave_away)} time(s) the tutor stated the answer after a second wrong try "
                "without asking how the student reasoned.",
            }
        )

    # Pacing: tutor length against what this student can take in (4x the student's word budget).
    lengths = [word_count(m["content"]) for m in tutor] or [0]
    too_long = [m for m in tutor if word_count(m["content"]) > 4 * budget]
    pacing = 9 - 6 * (len(too_long) / max(1, len(tutor)))
    if (
        persona is not None
        and persona.correct_answer_probability >= 0.85
        and not any("harder" in m["content"].lower() for m in tutor)
    ):
        pacing -= 2
        problems.append(
            {
                "title": "Never raises the difficulty for a fast student",
                "turns": [tutor[-1]["turn"]] if tutor else [],
                "severity": "minor",
                "root_cause": "wrong_pacing",
                "quote": _first_sentences(tutor[-1]["content"], 1) if tutor else "",
                "description": "The student answered quickly and correctly, yet every problem stayed at the same level.",
            }
        )
    if too_long:
        m = max(too_long, key=lambda x: word_count(x["content"]))
        problems.append(
            {
                "title": "Replies too long for this student",
                "turns": [x["turn"] for x in too_long][:6],
                "severity": "minor",
                "root_cause": "wrong_pacing",
                "quote": _first_sentences(m["content"], 1),
                "description": f"{len(too_long)} replies exceed {4 * budget} words for a student who writes at most {budget}.",
            }
        )

    # Emotional attunement: warmth words after negative signals.
    warm = ("don't worry", "that's okay", "it's okay", "good try", "well done", "great", "you can")
    warm_after = [t for s, t in signals if any(w in t["content"].lower() for w in warm)]
    attunement = 4 + 5 * (len(warm_after) / len(signals)) if signals else 7
    if signals and not warm_after:
        s, t = signals[0]
        problems.append(
            {
                "title": "No warmth after the student struggled",
                "turns": [s["turn"], t["turn"]],
                "severity": "major",
                "root_cause": "emotional_mismatch",
                "quote": t["content"][:120].rsplit(" ", 1)[0] if len(t["content"]) > 120 else t["content"],
                "description": "The student showed frustration or discomfort and the tutor moved on without acknowledging it.",
            }
        )

    scores = {
        "responsiveness": _clamp(responsiveness),
        "explanation_quality": _clamp(explanation),
        "emotional_attunement": _clamp(attunement),
        "pacing": _clamp(pacing),
        "authenticity": _clamp(authenticity),
    }
    analysis = {
        "responsiveness": f"Student words taken up in {uptake:.0%} of tutor replies; {len(signals) - len(missed)} of {len(signals)} signals acknowledged.",
        "explanation_quality": f"{len(explained)} of {len(wrong_followups)} corrections came with an explanation; {len(gave_away)} gave the answer away.",
        "emotional_attunement": f"Warmth after {len(warm_after)} of {len(signals)} negative signals."
        if signals
        else "No negative signals to respond to.",
        "pacing": f"Tutor replies average {sum(lengths) / len(lengths):.0f} words (budget {4 * budget}); {len(too_long)} too long.",
        "authenticity": f"Mean 3-gram overlap between consecutive tutor turns {overlap:.2f}; {len(repeated)} phrases repeated in 3+ turns.",
    }
    # A dimension registered in the rubric without a rule here gets the middle of the scale, and says so.
    for name in DIMENSIONS:
        if name not in scores:
            scores[name] = 5
            analysis[name] = "No offline rule measures this dimension: the midpoint is shown, not a measurement."
    scores = {name: scores[name] for name in DIMENSIONS}
    analysis = {name: analysis[name] for name in DIMENSIONS}
    order = {"critical": 0, "major": 1, "minor": 2}
    problems.sort(key=lambda p: order[p["severity"]])
    worst = min(scores, key=lambda d: scores[d])
    summary = (
        f"[offline rule-based judge] Scores come from measurable signals, not an LLM. Average "
        f"{sum(scores.values()) / len(scores):.1f}/10 over {len(tutor)} tutor turns; weakest: {worst.replace('_', ' ')}."
    )
    return {"scores": scores, "dimension_analysis": analysis, "problems": problems[:5], "summary": summary}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _first_sentences(text: str, n: int) -> str:
    """The first n sentences; a sentence ends at . ! or ? before a space or the end, so "0.3" stays whole."""
    text = text.strip()
    for count, boundary in enumerate(_SENTENCE_END.finditer(text), start=1):
        if count == n:
            return text[: boundary.start()]
    return text


def _original_span(text: str, phrase: str) -> str:
    """The phrase as written in text (original case and punctuation), for an exact quote."""
    words = phrase.split()
    raw = text.split()
    for i in range(len(raw) - len(words) + 1):
        if [" ".join(tokens(w)) for w in raw[i : i + len(words)]] == words:
            return " ".join(raw[i : i + len(words)]).strip(".,!?")
    return phrase
