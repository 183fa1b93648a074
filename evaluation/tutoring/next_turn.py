"""Next-turn tests: replay a real dialogue up to a student turn, let the simulator write that turn with a persona,
and score it against what the real student wrote (after Scarlatos et al. 2026, "Substance or Illusion?": the same
dialogue act, an answer attempted or not, the length, and the wording's similarity).

Per turn: whether the acts agree (student_turns.dialogue_act on both), whether both attempt an answer or neither
does, the absolute log ratio of the lengths (log((words + 1) / (real words + 1)); 0 is the same length), and
ROUGE-L F1 (Lin 2004: the longest common subsequence of word tokens). Per persona and simulator model: the means,
and the shares of turns where the acts agree.
"""

import asyncio
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.providers import LLM
from evaluation.text.measures import tokens
from evaluation.text.student_turns import dialogue_act
from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.values import PersonaSpec


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 of two texts' word tokens (0 when either has none)."""
    a, b = tokens(candidate), tokens(reference)
    if not a or not b:
        return 0.0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class TurnScore:
    dialogue: str
    turn: int
    """The student turn's place among the dialogue's messages."""
    real: str
    simulated: str
    act_real: str
    act_simulated: str
    same_act: bool
    same_attempt: bool
    length_gap: float
    """|log((simulated words + 1) / (real words + 1))|."""
    rouge_l: float


def score_turn(dialogue: str, turn: int, real: str, simulated: str, tutor_asked: bool) -> TurnScore:
    act_real = dialogue_act(real, tutor_asked=tutor_asked)
    act_sim = dialogue_act(simulated, tutor_asked=tutor_asked)
    gap = abs(math.log((len(simulated.split()) + 1) / (len(real.split()) + 1)))
    return TurnScore(
        dialogue=dialogue,
        turn=turn,
        real=real,
        simulated=simulated,
        act_real=act_real,
        act_simulated=act_sim,
        same_act=act_real == act_sim,
        same_attempt=(act_real == "answer_attempt") == (act_sim == "answer_attempt"),
        length_gap=round(gap, 4),
        rouge_l=round(rouge_l(simulated, real), 4),
    )


@dataclass(frozen=True)
class NextTurnReport:
    """A persona played by one simulator model against the real students' next turns."""

    persona: str
    simulator: str
    turns: int
    act_agreement: float | None
    attempt_agreement: float | None
    mean_length_gap: float | None
    mean_rouge_l: float | None
    median_words: float | None
    real_median_words: float | None
    scores: tuple[TurnScore, ...]

    def as_dict(self, *, with_turns: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not with_turns:
            data.pop("scores")
        return data


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def next_turns(
    dialogues: Sequence[tuple[str, Sequence[tuple[str, str]]]],
    persona: PersonaSpec,
    llm: LLM,
    *,
    limit: int = 100,
    seed: int = 1,
) -> NextTurnReport:
    """Replay each dialogue ((id, [(role, text), ...])) to each of its student turns that follows a tutor message,
    have the simulator write it, and score it; at most `limit` turns."""
    scores: list[TurnScore] = []
    for number, (dialogue, messages) in enumerate(dialogues):
        for i, (role, real) in enumerate(messages):
            if len(scores) >= limit:
                break
            history: list[dict[str, Any]] = [
                {"role": r, "content": t, "turn": k + 1} for k, (r, t) in enumerate(messages[:i])
            ]
            if role != "student" or not any(m["role"] == "tutor" for m in history):
                continue
            simulator = StudentSimulator(persona, None, llm, seed=seed * 100_000 + number * 100 + i)
            text, _ = asyncio.run(simulator.respond(history, len(history) + 1))
            last_tutor = str(next(m["content"] for m in reversed(history) if m["role"] == "tutor"))
            scores.append(score_turn(dialogue, i, real, text, "?" in last_tutor))
    return NextTurnReport(
        persona=persona.persona_id,
        simulator=llm.label,
        turns=len(scores),
        act_agreement=_mean([float(s.same_act) for s in scores]),
        attempt_agreement=_mean([float(s.same_attempt) for s in scores]),
        mean_length_gap=_mean([s.length_gap for s in scores]),
        mean_rouge_l=_mean([s.rouge_l for s in scores]),
        median_words=statistics.median([len(s.simulated.split()) for s in scores]) if scores else None,
        real_median_words=statistics.median([len(s.real.split()) for s in scores]) if scores else None,
        scores=tuple(scores),
    )
