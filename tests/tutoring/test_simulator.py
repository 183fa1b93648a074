"""The student simulator: enforced correctness rates, reproducible decisions, directives, offline turns."""

import dataclasses
import json
from pathlib import Path

import pytest

from evaluation.providers import Message, get_llm
from evaluation.tutoring.offline import StudentRule
from evaluation.tutoring.simulator import StudentSimulator
from evaluation.tutoring.values import PersonaSpec, TopicSpec, TurnDecision

ROOT = Path(__file__).resolve().parents[2]
FILES = {p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "personas").glob("*.json")) if p.stem != "schema"}
PERSONAS = {name: PersonaSpec.from_dict(data) for name, data in FILES.items()}


def realised_rate(persona, seed, turns=200):
    sim = StudentSimulator(persona, None, llm=None, seed=seed)
    return sum(sim.decide(t).correct for t in range(1, turns + 1)) / turns


@pytest.mark.parametrize("persona_id", sorted(PERSONAS))
def test_realised_correct_rate_is_within_7_points(persona_id):
    persona = PERSONAS[persona_id]
    rate = realised_rate(persona, seed=2026)
    assert abs(rate - persona.correct_answer_probability) <= 0.07, (
        f"{persona_id}: {rate:.3f} vs {persona.correct_answer_probability}"
    )


def test_same_seed_same_decisions_other_seed_other_decisions():
    persona = PERSONAS["average_student"]
    sim = StudentSimulator(persona, None, None, seed=5)
    a = [sim.decide(t) for t in range(1, 30)]
    sim2 = StudentSimulator(persona, None, None, seed=5)
    b = [sim2.decide(t) for t in range(1, 30)]
    sim3 = StudentSimulator(persona, None, None, seed=6)
    c = [sim3.decide(t) for t in range(1, 30)]
    assert a == b and a != c
    assert sim.turn_decisions == a


def test_incorrect_turns_carry_a_mistake_and_behaviours_fire():
    persona = PERSONAS["struggler"]
    sim = StudentSimulator(persona, None, None, seed=1)
    decisions = [sim.decide(t) for t in range(1, 200)]
    wrong = [d for d in decisions if not d.correct]
    assert wrong and all(d.mistake in persona.common_mistakes for d in wrong)
    assert all(d.mistake is None for d in decisions if d.correct)
    fired = sum("discouragement" in d.behaviors for d in decisions) / len(decisions)
    assert 0.3 <= fired <= 0.5  # discouragement_probability is 0.4
    directive = StudentSimulator.directive(wrong[0])
    assert (
        directive.startswith("[TURN DIRECTIVE: This turn you MUST ANSWER INCORRECTLY") and wrong[0].mistake in directive
    )


def test_system_prompt_carries_the_persona():
    sim = StudentSimulator(
        PERSONAS["quiet_one"],
        TopicSpec.from_dict({"topic_id": "x", "name": "Comparing decimals", "grade": 5}),
        None,
        seed=1,
    )
    prompt = sim.system_prompt()
    assert "You are Meera, a grade 5 student aged 10" in prompt
    assert "at most 8 words" in prompt and "minimal response (about 80% of turns)" in prompt
    assert "Vary how you behave" in prompt


@pytest.mark.django_db
def test_offline_student_follows_the_decision_and_seed():
    llm = get_llm("simulator", override="offline")
    # an ungrounded student varies its wording; a grounded one mostly writes the bare answer (below)
    persona = PersonaSpec.from_dict({k: v for k, v in FILES["average_student"].items() if k != "grounding"})
    question = "Let's start: What is 3/8 + 2/8?"

    def turn(seed, correct):
        decision = TurnDecision(turn=1, roll=0.5, probability=0.7, correct=correct)
        rule = StudentRule(persona=persona, decision=decision, tutor_message=question)
        return llm.call([Message("user", question)], offline=rule, seed=seed).text

    assert "5/8" in turn(1, True) and "5/16" in turn(1, False)
    assert turn(1, True) == turn(1, True)
    assert len({turn(seed, True) for seed in range(1, 12)}) > 1


def with_behaviours(behaviours, **fields):
    return PersonaSpec.from_dict({**FILES["struggler"], "persona_specific_behaviors": behaviours, **fields})


def test_a_behaviour_fires_only_on_the_turns_its_trigger_allows():
    persona = with_behaviours(
        {
            "celebrates_breakthrough_probability": {"probability": 1.0, "trigger": "when_correct"},
            "sulks_probability": {"probability": 1.0, "trigger": "after_incorrect"},
            "discouragement_probability": 1.0,  # no trigger: every turn, as spec 001's files have it
        }
    )
    sim = StudentSimulator(persona, None, None, seed=3)
    decisions = [sim.decide(t) for t in range(1, 120)]
    assert {d.correct for d in decisions} == {True, False}
    for previous, d in zip([None, *decisions], decisions, strict=False):
        assert ("celebrates_breakthrough" in d.behaviors) == d.correct, d
        assert ("sulks" in d.behaviors) == (previous is not None and not previous.correct), d
        assert "discouragement" in d.behaviors


def test_after_repeated_explanation_fires_only_when_the_tutor_repeats_itself():
    persona = with_behaviours(
        {"call_out_repetition_probability": {"probability": 1.0, "trigger": "after_repeated_explanation"}}
    )
    sim = StudentSimulator(persona, None, None, seed=1)
    fresh = [
        {"role": "tutor", "content": "Add the ones first: 7 + 5 makes a new ten. What is 27 + 15?"},
        {"role": "student", "content": "32"},
        {"role": "tutor", "content": "Let's think about place value with a picture of tens and ones."},
    ]
    repeated = [*fresh[:2], {"role": "tutor", "content": "Add the ones first: 7 + 5 makes a new ten. What is 27 + 15?"}]
    assert sim.decide(1, fresh).behaviors == ()
    assert sim.decide(2, repeated).behaviors == ("call_out_repetition",)


def test_files_without_triggers_replay_the_same_decisions_as_before():
    """A bare probability and {"probability": p} (trigger 'always', the default) roll identically."""
    bare = with_behaviours({"discouragement_probability": 0.4, "overwhelm_probability": 0.3})
    explicit = with_behaviours(
        {
            "discouragement_probability": {"probability": 0.4},
            "overwhelm_probability": {"probability": 0.3, "trigger": "always"},
        }
    )
    a, b = StudentSimulator(bare, None, None, seed=9), StudentSimulator(explicit, None, None, seed=9)
    assert [a.decide(t) for t in range(1, 60)] == [b.decide(t) for t in range(1, 60)]
    # A trigger that holds less often never shifts the other rolls: correctness and mistakes are unchanged.
    gated = with_behaviours(
        {"discouragement_probability": {"probability": 0.4, "trigger": "after_correct"}, "overwhelm_probability": 0.3}
    )
    c = StudentSimulator(gated, None, None, seed=9)
    assert [(d.correct, d.mistake) for d in a.turn_decisions] == [
        (d.correct, d.mistake) for d in (c.decide(t) for t in range(1, 60))
    ]


def test_the_schema_documents_every_trigger_and_refuses_an_unknown_one():
    from evaluation.tutoring.personas import validate_persona
    from evaluation.tutoring.values import TRIGGERS

    schema = json.loads((ROOT / "personas" / "schema.json").read_text())
    behaviours = schema["properties"]["persona_specific_behaviors"]
    assert behaviours["additionalProperties"] == {"$ref": "#/$defs/behaviour"}
    assert all(p["$ref"] == "#/$defs/behaviour" for p in behaviours["properties"].values())
    entry = schema["$defs"]["behaviour"]
    assert (
        entry["properties"]["trigger"]["enum"] == list(TRIGGERS)
        and entry["properties"]["trigger"]["default"] == "always"
    )
    good = {
        **FILES["ace"],
        "persona_specific_behaviors": {"boredom_probability": {"probability": 0.3, "trigger": "after_correct"}},
    }
    assert validate_persona(good) == []
    bad = {
        **FILES["ace"],
        "persona_specific_behaviors": {"boredom_probability": {"probability": 0.3, "trigger": "sometimes"}},
    }
    problems = validate_persona(bad, file="ace.json")
    assert [str(p) for p in problems] == [
        "ace.json: persona_specific_behaviors.boredom_probability.trigger: 'sometimes' is not one of "
        "['always', 'when_correct', 'when_incorrect', 'after_correct', 'after_incorrect', "
        "'after_repeated_explanation', 'after_question']"
    ]


def test_the_prompt_and_the_judge_name_a_behaviours_trigger():
    from evaluation.tutoring.judge import build_user_message

    persona = with_behaviours({"celebrates_breakthrough_probability": {"probability": 0.8, "trigger": "when_correct"}})
    sim = StudentSimulator(persona, None, None, seed=1)
    assert "celebrates breakthrough (about 80% of turns, when correct)" in sim.system_prompt()
    assert "celebrates_breakthrough_probability=0.8 (when_correct)" in build_user_message([], persona, None)


def test_a_turn_decision_as_stored_names_every_field_in_plain_values():
    decision = TurnDecision(turn=3, roll=0.25, probability=0.7, correct=False, mistake="m", behaviors=("b1", "b2"))
    stored = decision.as_dict()
    assert set(stored) == {f.name for f in dataclasses.fields(TurnDecision)}
    assert stored == {
        "turn": 3,
        "roll": 0.25,
        "probability": 0.7,
        "correct": False,
        "mistake": "m",
        "move": "answer",
        "behaviors": ["b1", "b2"],
    }
    assert json.loads(json.dumps(stored)) == stored
