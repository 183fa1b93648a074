"""Noise-aware comparisons: means with intervals, and regressions only beyond the noise."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvaluationRun
from evaluation.tutoring.regression import compare, mean_ci

TOPIC = "two-digit-addition-regrouping"


def test_the_mean_interval_is_students_t():
    # mean 5, sd 0.2, n 3: 5 ± t(0.975, 2) * 0.2 / sqrt(3) = 5 ± 4.3027 * 0.11547 = [4.5032, 5.4968]
    assert mean_ci([5.0, 5.2, 4.8]) == (4.5, 5.5)
    assert mean_ci([6.0]) == (None, None) and mean_ci([6.0, 6.0]) == (6.0, 6.0)


def runs_of(persona, averages):
    return [{"persona_id": persona, "scores": {"pacing": a}, "avg_score": a} for a in averages]


def test_a_drop_is_a_regression_only_beyond_the_threshold_and_outside_the_interval():
    runs = runs_of("steady", [5.0, 5.2, 4.8]) + runs_of("noisy", [3.0, 8.0, 7.0]) + runs_of("close", [6.6, 6.5, 6.7])
    baseline = {"steady": {"average": 7.0}, "noisy": {"average": 7.5}, "close": {"average": 7.0}}
    verdicts = {v.persona_id: v for v in compare(runs, baseline)}
    assert verdicts["steady"].regression and verdicts["steady"].drop == 2.0
    assert "excludes 7" in verdicts["steady"].why
    # a drop of 1.5, but three runs this far apart cannot tell it from noise
    assert not verdicts["noisy"].regression and "holds 7.5: noise" in verdicts["noisy"].why
    assert not verdicts["close"].regression and "within the threshold" in verdicts["close"].why
    # the fixed rule (one run's view) flags the noisy drop too
    fixed = {v.persona_id: v.regression for v in compare(runs, baseline, rule="fixed")}
    assert fixed == {"steady": True, "noisy": True, "close": False}


def cli(**options):
    call_command("run_evaluation", stdout=StringIO(), topic_id=TOPIC, persona="quiet_one", max_turns=4, **options)


def comparison(settings, group):
    folder = Path(settings.EVALUATION["RUNS_DIR"]) / group
    return json.loads((folder / "comparison.json").read_text()), (folder / "comparison.md").read_text()


@pytest.mark.django_db(transaction=True)
def test_a_batch_checked_against_its_baseline(server, loopback, settings, staff_client):
    from tests.tutoring.test_pipeline import JUDGE, scripted

    cli(provider="offline", seed=3, runs_per_persona=3)
    baseline = EvaluationRun.objects.get(repeat_index=1).group
    # the same seed again: the same scores, no regression
    cli(provider="offline", seed=3, runs_per_persona=3, baseline=baseline)
    again = EvaluationRun.objects.exclude(group=baseline).values_list("group", flat=True).first()
    data, text = comparison(settings, again)
    assert data["regressions"] == [] and {v["drop"] for v in data["verdicts"]} == {0.0}
    assert f"## Against baseline {baseline}" in text and "**No regression.**" in text
    assert data["personas"]["quiet_one"]["avg_ci"][0] is not None

    # another judge: refused, since its scores do not compare with the baseline's
    loopback.responder = scripted(JUDGE)  # the loopback judge gives 5.0 every time
    judge = f"openai/judge@{loopback.openai_url}"
    with pytest.raises(
        CommandError, match="was judged by offline/offline-rules-v1 and this batch's judge is openai/judge"
    ):
        cli(provider=judge, seed=3, runs_per_persona=3, baseline=baseline)
    baseline_avg = data["verdicts"][-1]["baseline"]
    assert baseline_avg > 6.0  # so the loopback judge's 5.0 is a drop beyond the threshold
    with pytest.raises(CommandError, match="regression\\(s\\) against"):
        cli(provider=judge, seed=3, runs_per_persona=3, baseline=baseline, force_baseline=True)
    forced = EvaluationRun.objects.exclude(group__in=[baseline, again]).values_list("group", flat=True).first()
    data, text = comparison(settings, forced)
    average = next(v for v in data["verdicts"] if v["dimension"] == "average")
    assert average["regression"] is True and (average["low"], average["high"]) == (5.0, 5.0)
    assert "| quiet_one | average |" in text and "**regression**" in text
    page = staff_client.get(f"/admin/evaluation/comparisons/{forced}/").content.decode()
    assert (
        f"Against baseline {baseline}" in page and '<tr class="regression"><td>quiet_one</td><td>average</td>' in page
    )
    assert (
        "(another judge than this batch's: compared because forced)" in page and '<small class="ci">[5.0, 5.0]' in page
    )
