"""Grounded personas: the move rolled each turn follows the persona's shares, the offline student writes it, the
LLM simulator is told it, and an ungrounded persona's rolls are unchanged."""

import json
import random
from pathlib import Path

import pytest

from evaluation.text.student_turns import measure_dialogue
from evaluation.tutoring.offline import offline_student
from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.values import Grounding, PersonaSpec

ROOT = Path(__file__).resolve().parents[2]
STRUGGLER = json.loads((ROOT / "personas" / "struggler.json").read_text())
GROUNDING = {"verbosity": 1, "question_rate": 0.1, "acknowledgement_rate": 0.3, "cooperation": 0.8}


def persona(grounding=GROUNDING) -> PersonaSpec:
    # without behaviours, whose lines ("Is it 5/16? I'm not good at this.") would add to the shares
    data = {k: v for k, v in STRUGGLER.items() if k not in ("grounding", "persona_specific_behaviors")}
    return PersonaSpec.from_dict({**data, "grounding": grounding} if grounding else data)


def test_a_move_is_picked_by_the_shares_in_order():
    g = Grounding.from_dict(GROUNDING)
    assert [g.move(x) for x in (0.0, 0.299, 0.3, 0.499, 0.5, 0.599, 0.6, 0.999)] == [
        "acknowledge",
        "acknowledge",
        "disengage",
        "disengage",
        "question",
        "question",
        "answer",
        "answer",
    ]


def test_grounded_turns_measure_like_the_persona_says():
    """2,000 offline turns answering 'What is 3/8 + 2/8?': the measured shares are the persona's, within 3 points."""
    sim = StudentSimulator(persona(), None, None, seed=3)
    rng = random.Random(3)
    messages = []
    for turn in range(1, 2001):
        decision = sim.decide(turn)
        messages += [
            ("tutor", "What is 3/8 + 2/8?"),
            ("student", offline_student(sim.persona, decision, "What is 3/8 + 2/8?", rng)),
        ]
    turns = measure_dialogue(messages).turns

    def share(keep):
        return sum(1 for t in turns if keep(t)) / len(turns)

    assert share(lambda t: t.acknowledgement_only) == pytest.approx(0.3, abs=0.03)
    assert share(lambda t: t.asks_question) == pytest.approx(0.1, abs=0.03)
    assert share(lambda t: t.act in ("confusion", "other")) == pytest.approx(0.2, abs=0.03)
    answers = [t for t in turns if t.act == "answer_attempt" and not t.asks_question]
    assert sorted({t.words for t in answers}) == [1]  # verbosity 1: the bare answer


def test_the_llm_simulator_is_told_the_values_and_the_move():
    sim = StudentSimulator(persona(), None, None, seed=1)
    prompt = sim.system_prompt()
    assert "most of your messages are a word or two" in prompt and "About 30% of your messages are only 'ok'" in prompt
    decisions = [sim.decide(t) for t in range(1, 40)]
    ack = next(d for d in decisions if d.move == "acknowledge")
    assert "only acknowledge the tutor in a word or two" in StudentSimulator.directive(ack)
    answer = next(d for d in decisions if d.move == "answer")
    assert "only acknowledge" not in StudentSimulator.directive(answer)


def test_an_ungrounded_persona_rolls_as_before():
    plain = StudentSimulator(persona(None), None, None, seed=9)
    grounded = StudentSimulator(persona(), None, None, seed=9)
    a = [plain.decide(t) for t in range(1, 30)]
    b = [grounded.decide(t) for t in range(1, 30)]
    assert all(d.move == "answer" for d in a)
    assert "Write like a real student" not in plain.system_prompt()
    # the correctness roll comes first for both: the first turn's decision is the same
    assert (a[0].roll, a[0].correct) == (b[0].roll, b[0].correct)
