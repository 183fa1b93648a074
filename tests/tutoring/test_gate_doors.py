"""The gate through its doors, end to end on the offline provider: an unchanged tutor does not cry wolf at one
run per persona (it says inconclusive, with exit status 3 and why), a forced comparison on fewer personas never
passes, the planner prints k, cost and time, a recorded seed replays its run, and `degraded-tutor` is the
reference tutor with its faults, told apart by the judge's signals alone."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import BaselineGate, EvaluationRun

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"


def cli(out=None, **options):
    options.setdefault("provider", "offline")
    options.setdefault("max_turns", 6)
    call_command("run_evaluation", stdout=out or StringIO(), topic_id=TOPIC, **options)


def newest_group(*exclude):
    return EvaluationRun.objects.exclude(group__in=["", *exclude]).order_by("-created_at").first().group


def transcript(run):
    return [(m.turn, m.role, m.content) for m in run.messages.order_by("turn")]


def test_one_run_per_persona_on_an_unchanged_tutor_is_inconclusive_not_a_regression(server, settings, staff_client):
    """Item 1 of the issue: seeds 11 and 14 against a 2-run baseline of seed 3 were REGRESSION (48 per-persona
    comparisons, each able to fail); the family of dimension tests says inconclusive, and why."""
    cli(persona="all", runs_per_persona=2, seed=3)
    baseline = newest_group()
    for seed in (11, 14):
        out = StringIO()
        with pytest.raises(CommandError) as error:
            cli(out, persona="all", seed=seed, baseline=baseline)
        assert error.value.returncode == 3, out.getvalue()
        assert f"Against baseline {baseline}: INCONCLUSIVE" in out.getvalue()
        assert "k=1 detects only drops >= " in str(error.value) and "runs per persona" in str(error.value)
    stored = BaselineGate.objects.order_by("-checked_at").first()
    assert stored.outcome == "inconclusive" and stored.detail["tests"] and stored.detail["plan"]["runs_per_persona"]
    api = staff_client.get(f"/api/evaluation/comparisons/{stored.group}").json()
    assert api["gate"]["outcome"] == "inconclusive" and len(api["gate"]["tests"]) == 5
    assert api["gate"]["pairing"].startswith("unpaired")
    page = staff_client.get(f"/admin/evaluation/comparisons/{stored.group}/").content.decode()
    assert "<b>INCONCLUSIVE</b>: k=1 detects only drops" in page and "Holm over 5 dimensions" in page
    data = json.loads((Path(settings.EVALUATION["RUNS_DIR"]) / stored.group / "comparison.json").read_text())
    text = (Path(settings.EVALUATION["RUNS_DIR"]) / stored.group / "comparison.md").read_text()
    assert data["gate"]["outcome"] == "inconclusive" and "**INCONCLUSIVE**: k=1 detects only drops" in text

    # the same seed as the baseline: every run has its pair, the pairs show no change, and the gate passes
    out = StringIO()
    cli(out, persona="all", seed=3, baseline=baseline)
    assert f"Against baseline {baseline}: PASS" in out.getvalue()
    assert "paired by persona, topic and seed" in out.getvalue()

    # the planner, from this baseline's repeats: k, cost and time as JSON
    out = StringIO()
    cli(out, persona="all", plan=True, json=True, baseline=baseline)
    plan = json.loads(out.getvalue())
    assert plan["runs_per_persona"] >= 2 and plan["cost_usd"] == 0 and plan["minutes"] > 0
    assert set(plan["detects"]) == {
        "responsiveness",
        "explanation_quality",
        "emotional_attunement",
        "pacing",
        "authenticity",
    }
    assert all(drop <= 1.0 for drop in plan["detects"].values()) and plan["spread_from"] == baseline
    assert max(plan["detects_at_one_run"].values()) > 1.0


def test_a_forced_comparison_on_fewer_personas_than_the_batch_never_passes(server):
    """Item 3 of the issue: an ace-only baseline and `--persona all --force-baseline` passed with exit 0."""
    cli(persona="ace", runs_per_persona=2, seed=3)
    baseline = newest_group()
    out = StringIO()
    with pytest.raises(CommandError, match="inconclusive") as error:
        cli(out, persona="all", seed=3, baseline=baseline, force_baseline=True)
    assert error.value.returncode == 3
    assert "(FORCED: the baseline does not match): INCONCLUSIVE" in out.getvalue()
    assert "the baseline covers 1 of the batch's 8 personas" in out.getvalue()


def test_a_recorded_seed_replays_its_run(server, settings):
    """Item 5 of the issue: `--seed 3` recorded 4, and the recorded seed gave another run."""
    cli(persona="all", runs_per_persona=2, seed=5, max_turns=3)
    batch = list(EvaluationRun.objects.filter(group=newest_group()).select_related("persona"))
    first = min(batch, key=lambda r: (r.persona.persona_id, r.repeat_index))
    assert first.seed == 5 and first.config["batch_seed"] == 5
    struggler = next(r for r in batch if r.persona.persona_id == "struggler" and r.repeat_index == 2)
    recorded = json.loads((Path(settings.EVALUATION["RUNS_DIR"]) / struggler.run_id / "config.json").read_text())
    assert recorded["seed"] == struggler.seed and recorded["batch_seed"] == 5
    cli(persona="struggler", seed=recorded["seed"], max_turns=3)
    again = EvaluationRun.objects.order_by("-created_at").first()
    assert again.seed == struggler.seed and transcript(again) == transcript(struggler)
    assert again.overall_score == struggler.overall_score


def test_the_degraded_tutor_shows_its_faults_and_the_judge_sees_them_by_its_signals(server, staff_client):
    agents = staff_client.get("/api/catalogue/agents").json()
    listed = agents["results"] if isinstance(agents, dict) else agents
    assert "degraded-tutor" in {a["id"] for a in listed}
    cli(persona="ace", seed=9, max_turns=6)
    reference = EvaluationRun.objects.order_by("-created_at").first()
    cli(persona="ace", seed=9, max_turns=6, target="degraded-tutor")
    degraded = EvaluationRun.objects.order_by("-created_at").first()
    assert degraded.agent_id == "degraded-tutor" and degraded.status == "completed", degraded.error
    tutor = [m.content for m in degraded.messages.order_by("turn") if m.role == "tutor"][1:]
    # it never reads the student's answer: every reply says "not quite" and gives the answer, right or wrong
    assert tutor and all(t.startswith("Not quite. The answer is ") for t in tutor)
    # the same seed, the same student rolls: the reference tutor praised some of those answers
    assert any(m.content.startswith(("Yes", "Correct", "Great", "Exactly")) for m in reference.messages.all())
    assert degraded.overall_score < reference.overall_score
    # no judge knows of the degraded tutor: its faults show through the signals the judges measure
    root = Path(__file__).resolve().parents[2] / "evaluation"
    for judge_file in ("tutoring/offline.py", "tutoring/judge.py", "judging/judge.py"):
        source = (root / judge_file).read_text()
        assert "degraded" not in source
    assert "faults" not in (root / "tutoring/judge.py").read_text()
