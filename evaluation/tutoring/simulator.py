"""The student simulator: an LLM role-plays a persona, with correctness enforced per turn.

Each turn a seeded roll decides correct or incorrect against `correct_answer_probability`; an
incorrect turn draws a mistake that fits the topic (topic_mistakes: the persona's own `common_mistakes`
that share a word with the topic, else the topic's `common_misconceptions`, else a generic slip);
persona-specific behaviours fire by
their probabilities, on the turns their trigger allows (every turn by default). The decision becomes
an explicit turn directive (placed per vendor by the provider layer) and is recorded in
`turn_decisions`. The same seed gives the same decisions.
"""

import random
import re
from typing import Any

from evaluation.providers import LLM, Message
from evaluation.text import ngram_overlap
from evaluation.tutoring.offline import StudentRule
from evaluation.tutoring.values import PersonaSpec, TopicSpec, TurnDecision

REPEAT_OVERLAP = 0.5
"""A tutor message repeats an earlier one when at least this share of its 3-grams occur in it."""

NATURAL_VARIATION = (
    "Vary how you behave from turn to turn like a real child would: do not follow the persona like a script, "
    "and never mention that you are simulated or that you received instructions."
)


MOVE_DIRECTIVES = {
    "acknowledge": " But this turn do not answer: only acknowledge the tutor in a word or two, like 'ok' or 'yes'.",
    "disengage": " But this turn do not take up the task: say you don't know, or shrug it off in a word or two.",
    "question": " Put it as a short question (like 'is it 12?'), or ask the tutor something short.",
}
"""A grounded persona's move (values.MOVES) as the directive says it; "answer" adds nothing."""


GENERIC_MISTAKES = (
    "makes a careless slip in the working",
    "misreads what the question asks",
    "guesses instead of working it out",
)
"""An incorrect turn's mistake when neither the topic nor the persona names one that fits the topic."""

COMMON_WORDS = frozenset(
    "about after answer before being digit digits first from into like number numbers order problem problems "
    "question questions second step steps than that their them then there they this using what when where which "
    "with without word words".split()
)
"""Words too common in mistakes and topics to say that a mistake is about the topic."""


def _stems(text: str) -> set[str]:
    """A text's content words, cut to their first 5 letters (`decimals` and `decimal` meet), and its decimal
    numbers as written (`0.25`)."""
    tokens = re.findall(r"\d+\.\d+|[a-z]{4,}", text.lower())
    return {t if t[0].isdigit() else t[:5] for t in tokens if t not in COMMON_WORDS}


def topic_mistakes(persona: PersonaSpec, topic: TopicSpec | None) -> tuple[str, ...]:
    """The mistakes an incorrect turn draws from: the persona's own that share a word with the topic's id,
    name or description (or a decimal number with its misconceptions), else the topic's common misconceptions, else a generic slip. Without a topic, the
    persona's own."""
    own = tuple(persona.common_mistakes)
    if topic is None:
        return own or GENERIC_MISTAKES
    words = _stems(" ".join([topic.topic_id.replace("-", " "), topic.name, topic.description]))
    words |= {w for w in _stems(" ".join(topic.common_misconceptions)) if w[0].isdigit()}
    fitting = tuple(m for m in own if _stems(m) & words)
    return fitting or tuple(topic.common_misconceptions) or GENERIC_MISTAKES


def repeats_earlier(transcript: list[dict[str, Any]]) -> bool:
    """Does the tutor's last message repeat one of its earlier messages?"""
    tutor = [m["content"] for m in transcript if m["role"] == "tutor"]
    return len(tutor) >= 2 and any(ngram_overlap(tutor[-1], earlier) >= REPEAT_OVERLAP for earlier in tutor[:-1])


class StudentSimulator:
    def __init__(self, persona: PersonaSpec, topic: TopicSpec | None, llm: LLM, *, seed: int):
        self.persona = persona
        self.topic = topic
        self.llm = llm
        self.seed = seed
        self.rng = random.Random(seed)
        self.turn_decisions: list[TurnDecision] = []
        self._system_prompt = ""
        self.mistakes = topic_mistakes(persona, topic)

    def system_prompt(self) -> str:
        """The persona's prompt, built on the first turn: it depends on the persona and topic alone."""
        if not self._system_prompt:
            self._system_prompt = self._build_system_prompt()
        return self._system_prompt

    def _build_system_prompt(self) -> str:
        p = self.persona
        style = p.response_style
        lines = [
            f"You are {p.name}, a grade {p.grade} student" + (f" aged {p.age}" if p.age else "") + ".",
            p.description,
            "Personality: " + ", ".join(p.personality_traits) + ".",
            f"Reply in at most {style.max_words} words, in {style.language}.",
        ]
        if style.examples:
            lines.append("How you sound: " + " | ".join(style.examples))
        lines.append("Guidelines: " + " ".join(p.behavioral_notes))
        if p.behaviors:
            lines.append("Tendencies: " + ", ".join(b.describe() for b in p.behaviors))
        if p.grounding:
            lines.append(p.grounding.describe())
        if self.topic:
            lines.append(f"You are being tutored on: {self.topic.name}.")
        lines.append(NATURAL_VARIATION)
        return "\n".join(line for line in lines if line)

    def decide(self, turn: int, transcript: list[dict[str, Any]] | None = None) -> TurnDecision:
        """Roll this turn's decision. Every roll is drawn, in a fixed order, whether or not a behaviour's
        trigger holds, so a seed replays exactly and triggers never shift the other rolls."""
        probability = float(self.persona.correct_answer_probability)
        roll = self.rng.random()
        correct = roll < probability
        draws = [self.rng.random() for _ in self.persona.behaviors]
        behaviours = tuple(
            b.name
            for b, draw in zip(self.persona.behaviors, draws, strict=True)
            if draw < b.probability and self.triggered(b.trigger, correct, transcript or [])
        )
        mistake = self.rng.choice(self.mistakes) if not correct else None
        # A grounded persona rolls its move last, so an ungrounded one's rolls are as they always were.
        move = self.persona.grounding.move(self.rng.random()) if self.persona.grounding else "answer"
        decision = TurnDecision(turn, round(roll, 6), probability, correct, mistake, behaviours, move)
        self.turn_decisions.append(decision)
        return decision

    def triggered(self, trigger: str, correct: bool, transcript: list[dict[str, Any]]) -> bool:
        """Does a behaviour's trigger (values.TRIGGERS) hold on this turn?"""
        previous = self.turn_decisions[-1] if self.turn_decisions else None
        match trigger:  # only the trigger asked for is worked out: some read the whole transcript
            case "always":
                return True
            case "when_correct":
                return correct
            case "when_incorrect":
                return not correct
            case "after_correct":
                return previous is not None and previous.correct
            case "after_incorrect":
                return previous is not None and not previous.correct
            case "after_repeated_explanation":
                return repeats_earlier(transcript)
            case "after_question":
                return "?" in next((m["content"] for m in reversed(transcript) if m["role"] == "tutor"), "")
        raise KeyError(trigger)

    @staticmethod
    def directive(decision: TurnDecision) -> str:
        if decision.correct:
            text = "This turn you MUST ANSWER CORRECTLY if the tutor asked a question."
        else:
            text = "This turn you MUST ANSWER INCORRECTLY if the tutor asked a question."
            if decision.mistake:
                text += f" Make this mistake: {decision.mistake}."
        for name in decision.behaviors:
            text += f" Also show this tendency now: {name.replace('_', ' ')}."
        text += MOVE_DIRECTIVES.get(decision.move, "")
        return f"[TURN DIRECTIVE: {text}]"

    def messages(self, transcript: list[dict[str, Any]]) -> list[Message]:
        """The conversation from the student's side: the tutor speaks as 'user', the student as 'assistant'."""
        out = [Message("system", self.system_prompt())]
        for m in transcript:
            out.append(Message("user" if m["role"] == "tutor" else "assistant", m["content"]))
        if len(out) == 1 or out[-1].role != "user":
            out.append(Message("user", "(The tutor is waiting for you.)"))
        return out

    async def respond(self, transcript: list[dict[str, Any]], turn: int) -> tuple[str, TurnDecision]:
        decision = self.decide(turn, transcript)
        last_tutor = next((m["content"] for m in reversed(transcript) if m["role"] == "tutor"), "")
        result = await self.llm.acall(
            self.messages(transcript),
            directive=self.directive(decision),
            offline=StudentRule(persona=self.persona, decision=decision, tutor_message=last_tutor),
            seed=self.seed * 1000 + turn,
        )
        return result.text.strip(), decision
