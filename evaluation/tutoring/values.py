"""Typed values of the tutoring room, built once per run and read everywhere instead of untyped dicts."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evaluation.tutoring.personas import persona_as_dict
from evaluation.tutoring.topics import topic_as_dict


@dataclass(frozen=True)
class ResponseStyle:
    """How a persona writes."""

    max_words: int = 25
    """The word budget of one student message."""
    language: str = "simple English"
    examples: tuple[str, ...] = ()
    """Sample lines in the persona's voice."""


TRIGGERS: dict[str, str] = {
    "always": "every turn",
    "when_correct": "a turn on which the student answers correctly",
    "when_incorrect": "a turn on which the student answers incorrectly",
    "after_correct": "the turn after a correct answer",
    "after_incorrect": "the turn after an incorrect answer",
    "after_repeated_explanation": "the tutor's last message repeats one of its earlier ones (half its 3-grams or more)",
    "after_question": "the tutor's last message asks a question",
}
"""When a persona-specific behaviour may fire (personas/schema.json lists the same names)."""
DEFAULT_TRIGGER = "always"
"""A behaviour given as a bare probability (spec 001's files) is rolled on every turn, as before."""


@dataclass(frozen=True)
class Behaviour:
    """One persona_specific_behaviors entry: a tendency, its chance, and when that chance is rolled."""

    key: str
    """As the file names it, e.g. "boredom_probability"."""
    probability: float
    trigger: str = DEFAULT_TRIGGER

    @property
    def name(self) -> str:
        return self.key.removesuffix("_probability")

    @classmethod
    def from_entry(cls, key: str, value: Any) -> "Behaviour":
        """`0.3`, or `{"probability": 0.3, "trigger": "after_correct"}` (trigger optional)."""
        if isinstance(value, Mapping):
            return cls(str(key), float(value["probability"]), str(value.get("trigger") or DEFAULT_TRIGGER))
        return cls(str(key), float(value))

    def describe(self) -> str:
        when = "" if self.trigger == DEFAULT_TRIGGER else f", {self.trigger.replace('_', ' ')}"
        return f"{self.name.replace('_', ' ')} (about {self.probability:.0%} of turns{when})"


MOVES = ("answer", "acknowledge", "disengage", "question")
"""What a grounded student does with a turn: attempt the answer, only acknowledge ("ok"), not take up the task
("idk"), or ask (its answer as a question, "is it 12?")."""


@dataclass(frozen=True)
class Grounding:
    """What real students do, as a persona's targets (personas/schema.json `grounding`): the measures the
    realism card compares, which the simulator steers by (each turn's move is rolled against them)."""

    verbosity: int
    """The usual (median) words of a turn."""
    question_rate: float
    """Share of turns that ask something."""
    acknowledgement_rate: float
    """Share of turns that only acknowledge ("ok", "yes")."""
    cooperation: float
    """Share of turns that take up the tutor's task (the others: "idk", one-word replies, off-task)."""
    source: str = ""
    """Where the values come from, e.g. "bridge:error=guess"."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Grounding | None":
        if not data:
            return None
        return cls(
            verbosity=int(data.get("verbosity", 1)),
            question_rate=float(data.get("question_rate", 0.0)),
            acknowledgement_rate=float(data.get("acknowledgement_rate", 0.0)),
            cooperation=float(data.get("cooperation", 1.0)),
            source=str(data.get("source") or ""),
        )

    def move(self, roll: float) -> str:
        """One roll in [0, 1) against the shares: acknowledge, disengage, question, else answer."""
        for name, share in (
            ("acknowledge", self.acknowledgement_rate),
            ("disengage", 1 - self.cooperation),
            ("question", self.question_rate),
        ):
            if roll < share:
                return name
            roll -= share
        return "answer"

    def describe(self) -> str:
        """For the simulator's prompt."""
        words = "a word or two" if self.verbosity <= 2 else f"about {self.verbosity} words or fewer"
        return (
            f"Write like a real student in an online chat: most of your messages are {words}, often a bare number. "
            f"About {self.acknowledgement_rate:.0%} of your messages are only 'ok' or 'yes'; in about "
            f"{1 - self.cooperation:.0%} you do not take up the task ('idk', a shrug); you ask something in about "
            f"{self.question_rate:.0%}. Never write full explanations of your working unless asked."
        )


@dataclass(frozen=True)
class PersonaSpec:
    """A student persona (personas/schema.json), as the simulator, the judge and the reports read it."""

    persona_id: str
    name: str
    grade: int
    description: str
    correct_answer_probability: float
    response_style: ResponseStyle
    age: int | None = None
    personality_traits: tuple[str, ...] = ()
    common_mistakes: tuple[str, ...] = ()
    behavioral_notes: tuple[str, ...] = ()
    behaviors: tuple[Behaviour, ...] = ()
    """persona_specific_behaviors, sorted by key so a seed replays exactly."""
    grounding: Grounding | None = None
    """Targets from real students (verbosity, question, acknowledgement and cooperation rates); None: not grounded."""
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The persona as its file holds it (unknown keys included), for reports."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PersonaSpec":
        style = data.get("response_style") or {}
        notes = data.get("behavioral_notes") or ()
        return cls(
            persona_id=str(data["persona_id"]),
            name=str(data["name"]),
            grade=int(data["grade"]),
            description=str(data.get("description") or ""),
            correct_answer_probability=float(data["correct_answer_probability"]),
            response_style=ResponseStyle(
                max_words=int(style.get("max_words", 25)),
                language=str(style.get("language") or "simple English"),
                examples=tuple(style.get("examples") or ()),
            ),
            age=data.get("age"),
            personality_traits=tuple(data.get("personality_traits") or ()),
            common_mistakes=tuple(data.get("common_mistakes") or ()),
            behavioral_notes=(notes,) if isinstance(notes, str) else tuple(notes),
            behaviors=tuple(
                sorted(
                    (Behaviour.from_entry(k, v) for k, v in (data.get("persona_specific_behaviors") or {}).items()),
                    key=lambda b: b.key,
                )
            ),
            grounding=Grounding.from_dict(data.get("grounding")),
            document=dict(data),
        )

    @classmethod
    def from_record(cls, persona: Any) -> "PersonaSpec":
        """From a Persona row."""
        return cls.from_dict(persona_as_dict(persona))

    def as_dict(self) -> dict[str, Any]:
        """The persona file, with the grade this run gave the student."""
        return {**self.document, "grade": self.grade}


@dataclass(frozen=True)
class TopicSpec:
    """A tutoring topic."""

    topic_id: str
    name: str
    grade: int
    subject: str = ""
    description: str = ""
    learning_objectives: tuple[str, ...] = ()
    common_misconceptions: tuple[str, ...] = ()
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TopicSpec":
        return cls(
            topic_id=str(data.get("topic_id") or ""),
            name=str(data.get("name") or ""),
            grade=int(data.get("grade") or 0),
            subject=str(data.get("subject") or ""),
            description=str(data.get("description") or ""),
            learning_objectives=tuple(data.get("learning_objectives") or ()),
            common_misconceptions=tuple(data.get("common_misconceptions") or ()),
            document=dict(data),
        )

    @classmethod
    def from_record(cls, topic: Any) -> "TopicSpec":
        return cls.from_dict(topic_as_dict(topic))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.document)


@dataclass(frozen=True)
class DimensionScore:
    """One rubric dimension's score, with the judge's analysis."""

    dimension: str
    score: float
    analysis: str = ""


@dataclass(frozen=True)
class Finding:
    """One of the judge's top problems in a conversation (not to be confused with a maths exercise)."""

    rank: int
    title: str
    turns: tuple[int, ...]
    description: str
    quote: str
    quote_found: bool
    """False when the quote does not occur in the transcript."""
    severity: str
    root_cause: str


@dataclass(frozen=True)
class Judgement:
    """What a judge concluded about one conversation."""

    scores: tuple[DimensionScore, ...]
    findings: tuple[Finding, ...]
    summary: str
    judge_label: str
    """provider/model of the judge."""

    @property
    def average(self) -> float:
        return round(sum(s.score for s in self.scores) / len(self.scores), 2) if self.scores else 0.0

    def score_of(self, dimension: str) -> float | None:
        return next((s.score for s in self.scores if s.dimension == dimension), None)


@dataclass(frozen=True)
class TurnDecision:
    """What the simulator decided for one student turn, before the LLM wrote it."""

    turn: int
    roll: float
    probability: float
    correct: bool
    mistake: str | None = None
    behaviors: tuple[str, ...] = ()
    move: str = "answer"
    """A grounded persona's move this turn (MOVES); always "answer" without grounding."""

    def as_dict(self) -> dict[str, Any]:
        # Field by field: dataclasses.asdict deep-copies every value, and this runs twice a turn.
        return {
            "turn": self.turn,
            "roll": self.roll,
            "probability": self.probability,
            "correct": self.correct,
            "mistake": self.mistake,
            "behaviors": list(self.behaviors),
            "move": self.move,
        }
