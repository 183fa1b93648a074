"""Simulator fidelity: a run says whether its simulated student did what its turn decisions asked."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.models import EvaluationRun
from evaluation.tutoring.fidelity import simulator_fidelity

TOPIC = "two-digit-addition-regrouping"


def decision(turn, correct, behaviors=()):
    return {
        "turn_decision": {
            "turn": turn,
            "correct": correct,
            "roll": 0.5,
            "probability": 0.5,
            "behaviors": list(behaviors),
        }
    }


def test_fidelity_counts_contradictions_rates_and_behaviours_from_the_transcript():
    messages = [
        {"role": "tutor", "content": "Let's start: What is 27 + 15?"},
        {"role": "student", "content": "It's 42.", "metadata": decision(1, True)},
        {"role": "tutor", "content": "Great! Next one: What is 36 + 48?"},
        {"role": "student", "content": "This is easy. 84.", "metadata": decision(2, False, ["boredom"])},
        {"role": "tutor", "content": "Right. Next one: What is 19 + 23?"},
        {"role": "student", "content": "32", "metadata": decision(3, False, ["boredom", "daydreams"])},
        {"role": "tutor", "content": "Let's take a short break."},
        {"role": "student", "content": "Okay.", "metadata": decision(4, True)},
    ]
    f = simulator_fidelity(messages, target=0.5)
    assert (f.decided.k, f.decided.n) == (2, 4) and (f.realised.k, f.realised.n) == (2, 3) and f.unchecked_answers == 1
    assert [(c.turn, c.message, c.decided_correct, c.expected) for c in f.contradictions] == [(2, None, False, "84")]
    # The student's turn 2 is the transcript's message 4: pages link to the message, and name both.
    numbered = simulator_fidelity([{**m, "turn": n} for n, m in enumerate(messages, start=1)], target=0.5)
    assert [(c.turn, c.message) for c in numbered.contradictions] == [(2, 4)]
    assert [(b.name, b.requested, b.shown, b.checked) for b in f.behaviours] == [
        ("boredom", 2, 1, True),
        ("daydreams", 1, 0, False),
    ]
    # Wilson interval of 2/3 at 95% (as scipy computes it), which holds the target 0.5
    assert (f.realised.low, f.realised.high) == pytest.approx((0.2077, 0.9385), abs=1e-4)
    assert f.strayed and f.reasons == ("1 of 3 checked answers contradict their turn decision",)


def test_a_real_session_without_turn_decisions_has_no_fidelity():
    assert (
        simulator_fidelity([{"role": "tutor", "content": "What is 2 + 3?"}, {"role": "student", "content": "5"}], 0.5)
        is None
    )


def cli(**options):
    call_command("run_evaluation", stdout=StringIO(), topic_id=TOPIC, **options)
    return EvaluationRun.objects.get()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("persona", ["ace", "struggler", "quiet_one", "repetition_detector"])
def test_the_offline_student_follows_its_decisions_and_the_report_says_so(server, settings, persona):
    run = cli(persona=persona, provider="offline", max_turns=12, seed=11)
    evaluation = json.loads((Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id / "evaluation.json").read_text())
    fidelity = evaluation["simulator_fidelity"]
    assert fidelity["strayed"] is False, fidelity["reasons"]
    assert fidelity["contradictions"] == [] and fidelity["realised"]["n"] >= 5
    review = (Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id / "review.md").read_text()
    assert (
        "## Simulator fidelity" in review
        and "- verdict: followed its decisions" in review
        and "strayed from" not in review
    )


@pytest.mark.django_db(transaction=True)
def test_a_student_that_ignores_its_decisions_flags_the_run(server, loopback, settings, staff_client):
    """An LLM student that answers 12 whatever it is told: the report blames the student, not the tutor."""
    from tests.tutoring.test_pipeline import JUDGE, scripted

    loopback.responder = scripted(JUDGE)  # the student always says "I think it is 12."
    run = cli(persona="ace", provider=f"openai/sim@{loopback.openai_url}", max_turns=8, seed=5)
    assert run.status == "completed", run.error
    fidelity = staff_client.get(f"/api/evaluation/runs/{run.run_id}").json()["evaluation"]["simulator_fidelity"]
    # a grounded persona's turns that were decided not to answer ("ok", "idk") are not checked
    decided_correct = [d["turn"] for d in run.config["turn_decisions"] if d["correct"] and d["move"] == "answer"]
    assert fidelity["strayed"] is True and fidelity["realised"]["k"] == 0
    assert [c["turn"] for c in fidelity["contradictions"]] == decided_correct != []
    assert fidelity["realised"]["high"] < 0.9 and "excludes the persona's target 90%" in fidelity["reasons"][0]
    review = (Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id / "review.md").read_text()
    assert "**Warning: the simulated student strayed from its persona**" in review
    assert f"- answers contradicting their turn decision: {len(decided_correct)}" in review
    page = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    assert 'id="simulator-strayed"' in page and "excludes the persona&#x27;s target 90%" in page
