"""Reproducible offline runs: the same seed and inputs give byte-identical transcripts and scores."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.models import EvaluationRun

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"


def run_once(**options):
    options.setdefault("provider", "offline")
    call_command("run_evaluation", stdout=StringIO(), topic_id=TOPIC, **options)
    return EvaluationRun.objects.order_by("-created_at").first()


def artefacts(run, settings):
    """The run's transcript and judgement files, with the run's own id (its folder name) masked."""
    folder = Path(settings.EVALUATION["RUNS_DIR"]) / run.run_id
    return {
        name: (folder / name).read_bytes().replace(run.run_id.encode(), b"<run>")
        for name in ("conversation.md", "evaluation.json", "review.md", "problems.md")
    }


def transcript(run):
    return [(m.turn, m.role, m.content, m.metadata) for m in run.messages.order_by("turn")]


@pytest.mark.parametrize("persona", ["ace", "struggler"])
def test_the_same_seeded_offline_evaluation_twice_gives_identical_transcripts_and_scores(server, settings, persona):
    first = run_once(persona=persona, max_turns=10, seed=424242)
    second = run_once(persona=persona, max_turns=10, seed=424242)
    assert first.status == second.status == "completed", (first.error, second.error)
    assert transcript(first) == transcript(second) and len(transcript(first)) > 10
    assert artefacts(first, settings) == artefacts(second, settings)
    assert first.overall_score == second.overall_score
    assert first.config["turn_decisions"] == second.config["turn_decisions"]
    # another seed gives another conversation: the seed, not a constant, decides it
    other = run_once(persona=persona, max_turns=10, seed=7)
    assert transcript(other) != transcript(first)


def test_real_models_get_the_seed_where_the_vendor_takes_one_and_the_run_records_it(server, loopback):
    """OpenAI chat completions take a seed: every simulator and judge call carries one derived from the
    run's seed, and the run records each role's model, temperature and seed."""
    from tests.tutoring.test_pipeline import JUDGE, scripted

    loopback.responder = scripted(JUDGE)
    run = run_once(persona="ace", max_turns=3, seed=31, provider=f"openai/sim-model@{loopback.openai_url}")
    assert run.status == "completed", run.error
    bodies = [r.body for r in loopback.requests]
    student = [b for b in bodies if not b.get("response_format")]
    assert run.seed == 31  # the batch's seed: its first persona's first run replays with it
    assert [b["seed"] for b in student] == [31 * 1000 + turn for turn in (1, 2, 3)]
    assert {b["temperature"] for b in student} == {0.9}
    assert [b["seed"] for b in bodies if b.get("response_format")] == [31]
    llm = run.config["llm"]
    assert llm["simulator"] == {
        "provider": "openai",
        "model": "sim-model",
        "source": "override",
        "temperature": 0.9,
        "seed": 31,
        "seed_sent": True,
    }
    assert llm["judge"]["seed"] == 31 and llm["judge"]["seed_sent"] is True
