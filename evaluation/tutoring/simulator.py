"""The student simulator: an LLM role-plays a persona, with correctness enforced per turn.

Each turn a seeded roll decides correct or incorrect against `correct_answer_probability`; an
incorrect turn draws one of the persona's `common_mistakes`; persona-specific behaviours fire by
their probabilities. The decision becomes an explicit turn directive (placed per vendor by the
provider layer) and is recorded in `turn_decisions`. The same seed gives the same decisions.
"""

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from evaluation.providers import LLM, Message

NATURAL_VARIATION = (
    "Vary how you behave from turn to turn like a real child would: do not follow the persona like a script, "
    "and never mention that you are simulated or that you received instructions."
)


@dataclass
class TurnDecision:
    """What the simulator decided for one student turn, before the LLM wrote it."""

    turn: int
    roll: float
    probability: float
    correct: bool
    mistake: str | None = None
    behaviors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def behaviour_name(key: str) -> str:
    return key.removesuffix("_probability")


class StudentSimulator:
    def __init__(self, persona: dict[str, Any], topic: dict[str, Any] | None, llm: LLM, *, seed: int):
        self.persona = persona
        self.topic = topic or {}
        self.llm = llm
        self.seed = seed
        self.rng = random.Random(seed)
        self.turn_decisions: list[TurnDecision] = []

    def system_prompt(self) -> str:
        p = self.persona
        style = p.get("response_style") or {}
        lines = [
            f"You are {p['name']}, a grade {p['grade']} student" + (f" aged {p['age']}" if p.get("age") else "") + ".",
            p.get("description", ""),
            "Personality: " + ", ".join(p.get("personality_traits") or []) + ".",
            f"Reply in at most {style.get('max_words', 30)} words, in {style.get('language', 'simple English')}.",
        ]
        if style.get("examples"):
            lines.append("How you sound: " + " | ".join(style["examples"]))
        notes = p.get("behavioral_notes") or []
        lines.append("Guidelines: " + (" ".join(notes) if isinstance(notes, list) else str(notes)))
        tendencies = p.get("persona_specific_behaviors") or {}
        if tendencies:
            lines.append(
                "Tendencies: "
                + ", ".join(
                    f"{behaviour_name(k).replace('_', ' ')} (about {v:.0%} of turns)" for k, v in tendencies.items()
                )
            )
        if self.topic:
            lines.append(f"You are being tutored on: {self.topic.get('name')}.")
        lines.append(NATURAL_VARIATION)
        return "\n".join(line for line in lines if line)

    def decide(self, turn: int) -> TurnDecision:
        """Roll this turn's decision; rolls are drawn in a fixed order so a seed replays exactly."""
        probability = float(self.persona["correct_answer_probability"])
        roll = self.rng.random()
        behaviours = [
            behaviour_name(key)
            for key, chance in sorted((self.persona.get("persona_specific_behaviors") or {}).items())
            if self.rng.random() < float(chance)
        ]
        correct = roll < probability
        mistakes = self.persona.get("common_mistakes") or []
        mistake = self.rng.choice(mistakes) if (not correct and mistakes) else None
        decision = TurnDecision(turn, round(roll, 6), probability, correct, mistake, behaviours)
        self.turn_decisions.append(decision)
        return decision

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
        decision = self.decide(turn)
        last_tutor = next((m["content"] for m in reversed(transcript) if m["role"] == "tutor"), "")
        result = await self.llm.acall(
            self.messages(transcript),
            directive=self.directive(decision),
            context={"persona": self.persona, "decision": decision.as_dict(), "tutor_message": last_tutor},
            seed=self.seed * 1000 + turn,
        )
        return result.text.strip(), decision
