"""Regression gates end to end: a batch checked against its baseline compares, or says loudly why it
cannot (one run per persona, every run failed, a baseline that does not compare), through every door."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import BaselineGate, EvaluationRun

TOPIC = "two-digit-addition-regrouping"
DIMS = ["responsiveness", "explanation_quality", "emotional_attunement", "pacing", "authenticity"]


def cli(out=None, **options):
    options.setdefault("persona", "quiet_one")
    options.setdefault("max_turns", 4)
    call_command("run_evaluation", stdout=out or StringIO(), topic_id=TOPIC, **options)


def comparison(settings, group):
    folder = Path(settings.EVALUATION["RUNS_DIR"]) / group
    return json.loads((folder / "comparison.json").read_text()), (folder / "comparison.md").read_text()


def judge_giving(score):
    from tests.tutoring.test_pipeline import JUDGE

    return {**JUDGE, "scores": dict.fromkeys(DIMS, score)}


def newest_group(*exclude):
    return EvaluationRun.objects.exclude(group__in=["", *exclude]).order_by("-created_at").first().group


@pytest.mark.django_db(transaction=True)
def test_one_run_per_persona_against_a_higher_baseline_fails_with_regression_lines(
    server, loopback, settings, staff_client
):
    from tests.tutoring.test_pipeline import scripted

    judge = f"openai/judge@{loopback.openai_url}"
    loopback.responder = scripted(judge_giving(10))
    cli(provider=judge, seed=3, runs_per_persona=3)
    baseline = newest_group()
    loopback.responder = scripted(judge_giving(1))
    out = StringIO()
    with pytest.raises(CommandError, match="regression: 5 dimension\\(s\\) dropped") as error:
        cli(out, provider=judge, seed=30, baseline=baseline)  # the default: one run per persona
    assert error.value.returncode == 1
    printed = out.getvalue()
    assert f"Against baseline {baseline}: REGRESSION" in printed
    # the five dimension tests decide; the six per-persona rows are diagnostics
    assert printed.count("REGRESSION") == 6 and "diagnostics (decide nothing): 6 persona row(s)" in printed
    assert "Holm over 5 dimensions at family alpha 0.05" in printed and "(spread floored)" in printed
    group = newest_group(baseline)
    stored = BaselineGate.objects.get(group=group)
    assert (stored.outcome, stored.baseline, stored.forced) == ("regression", baseline, False)
    api = staff_client.get(f"/api/evaluation/comparisons/{group}").json()
    assert api["final"] is True and api["gate"]["outcome"] == "regression"
    assert {t["dimension"] for t in api["gate"]["tests"] if t["regression"]} == set(DIMS)
    assert {v["dimension"] for v in api["gate"]["verdicts"] if v["flagged"]} == {*DIMS, "average"}
    page = staff_client.get(f"/admin/evaluation/comparisons/{group}/").content.decode()
    assert "<b>REGRESSION</b>: 5 dimension(s) dropped" in page and '<tr class="regression"><td>Pacing</td>' in page
    data, text = comparison(settings, group)
    assert data["gate"]["outcome"] == "regression" and "**REGRESSION**: 5 dimension(s) dropped" in text

    # the same scores again: one run per persona against three cannot see a drop of 1, and says so with its
    # own exit status
    loopback.responder = scripted(judge_giving(10))
    out = StringIO()
    with pytest.raises(CommandError, match="inconclusive: k=1 detects only drops >= ") as error:
        cli(out, provider=judge, seed=30, baseline=baseline)
    assert error.value.returncode == 3
    assert f"Against baseline {baseline}: INCONCLUSIVE" in out.getvalue()
    assert BaselineGate.objects.get(group=newest_group(baseline, group)).outcome == "inconclusive"


@pytest.mark.django_db(transaction=True)
def test_a_baseline_from_another_judge_or_setup_is_refused_unless_forced(server, loopback, settings, staff_client):
    from tests.tutoring.test_pipeline import scripted

    loopback.responder = scripted(judge_giving(9))
    cli(provider=f"openai/gpt-5-mini@{loopback.openai_url}", seed=3, runs_per_persona=2)
    baseline = newest_group()
    # a model whose name the baseline's starts with is another model
    with pytest.raises(CommandError, match="judge: the baseline has openai/gpt-5-mini, this batch openai/gpt-5"):
        cli(provider=f"openai/gpt-5@{loopback.openai_url}", baseline=baseline)
    same = f"openai/gpt-5-mini@{loopback.openai_url}"
    with pytest.raises(CommandError, match="max turns: the baseline has 4, this batch 6"):
        cli(provider=same, baseline=baseline, max_turns=6)
    with pytest.raises(CommandError, match="personas: the baseline has no runs of ace"):
        cli(provider=same, baseline=baseline, persona="ace")
    with pytest.raises(CommandError, match="topic: the baseline has two-digit-addition-regrouping, this batch"):
        call_command(
            "run_evaluation", stdout=StringIO(), topic_id="comparing-decimals", persona="quiet_one", max_turns=4,
            provider=same, baseline=baseline,
        )  # fmt: skip
    # a baseline judged under an older judge prompt and rubric version (as stored before an edit)
    for run in EvaluationRun.objects.filter(group=baseline):
        run.config = {
            **run.config,
            "judge_config": {**run.config["judge_config"], "prompt_hash": "0ld", "rubric": "r v0"},
        }
        run.save(update_fields=["config"])
    with pytest.raises(CommandError, match="judge prompt: the baseline has 0ld.*rubric: the baseline has r v0"):
        cli(provider=same, baseline=baseline)
    assert not EvaluationRun.objects.exclude(group=baseline).exists()  # nothing was started

    # forced: compared, and labelled forced wherever it shows (one run against two: inconclusive, exit status 3)
    loopback.responder = scripted(judge_giving(9))
    out = StringIO()
    with pytest.raises(CommandError, match="inconclusive") as error:
        cli(out, provider=same, baseline=baseline, force_baseline=True)
    assert error.value.returncode == 3
    assert f"Against baseline {baseline} (FORCED: the baseline does not match): INCONCLUSIVE" in out.getvalue()
    assert "forced: judge prompt: the baseline has 0ld" in out.getvalue()
    group = newest_group(baseline)
    _, text = comparison(settings, group)
    assert f"## Against baseline {baseline} (FORCED: the baseline does not match)" in text
    assert "- forced: rubric: the baseline has r v0" in text
    api = staff_client.get(f"/api/evaluation/comparisons/{group}").json()
    assert api["gate"]["forced"] is True and len(api["gate"]["mismatches"]) == 2
    page = staff_client.get(f"/admin/evaluation/comparisons/{group}/").content.decode()
    assert '<span class="badge forced">forced</span>' in page and "judge prompt: the baseline has 0ld" in page


@pytest.mark.django_db(transaction=True)
def test_a_batch_whose_runs_all_failed_is_not_compared_and_fails(server, settings):
    cli(provider="offline", seed=3, runs_per_persona=2)
    baseline = newest_group()
    # no tutor where the batch looks for it: every run fails
    settings.EVALUATION = {**settings.EVALUATION, "SERVER_URL": "http://127.0.0.1:9"}
    out = StringIO()
    with pytest.raises(CommandError, match="not compared: no run of the batch counts: 1 of 1 left out") as error:
        cli(out, provider="offline", seed=3, baseline=baseline, skip_server=True)
    assert "1 run(s) failed" in str(error.value)
    assert f"Against baseline {baseline}: NOT COMPARED" in out.getvalue()
    assert BaselineGate.objects.get(group=newest_group(baseline)).outcome == "not compared"


@pytest.mark.django_db(transaction=True)
def test_the_api_start_checks_the_baseline_and_the_comparison_names_its_gate(server, staff_client):
    cli(provider="offline", seed=3, runs_per_persona=2)
    baseline = newest_group()
    start = {"topic_id": TOPIC, "persona_file": "quiet_one", "provider": "offline", "max_turns": 4}
    refused = staff_client.post(
        "/api/evaluation/start", {**start, "max_turns": 5, "baseline": baseline}, content_type="application/json"
    )
    assert refused.status_code == 400
    assert "max turns: the baseline has 4, this batch 5" in refused.json()["fields"]["baseline"][0]
    started = staff_client.post(
        "/api/evaluation/start", {**start, "baseline": baseline}, content_type="application/json"
    )
    assert started.status_code == 202 and started.json()["group"]
    group = started.json()["group"]
    pending = staff_client.get(f"/api/evaluation/comparisons/{group}").json()
    assert pending["final"] is False and pending["gate"]["outcome"] == "not compared"
    assert staff_client.get("/api/evaluation/comparisons/comparison_nothing").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_dashboard_starts_a_batch_against_a_baseline_and_shows_its_gate(server, staff_client, q_sync):
    cli(provider="offline", seed=3, runs_per_persona=2)
    baseline = newest_group()
    form = {"mode": "simulate", "topic_id": TOPIC, "personas": ["quiet_one"], "provider": "offline"}
    refused = staff_client.post("/admin/evaluation/start", {**form, "max_turns": 5, "baseline": baseline}, follow=True)
    assert "Not started: baseline: " in refused.content.decode()
    assert "max turns: the baseline has 4, this batch 5" in refused.content.decode()
    assert not EvaluationRun.objects.exclude(group=baseline).exists()
    started = staff_client.post("/admin/evaluation/start", {**form, "max_turns": 4, "baseline": baseline}, follow=True)
    group = newest_group(baseline)
    assert started.redirect_chain[-1][0] == f"/admin/evaluation/comparisons/{group}/"
    stored = BaselineGate.objects.get(group=group)  # the dashboard's seed is random: pass or regression
    assert stored.outcome in ("pass", "regression", "inconclusive") and len(stored.detail["verdicts"]) == 6
    page = started.content.decode()
    assert f"Against baseline {baseline}" in page and f"<b>{stored.outcome.upper()}</b>: " in page
