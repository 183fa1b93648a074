"""Noise-aware regressions: with k repeats a drop counts only when it exceeds the threshold AND the
bootstrap 95% CI excludes the baseline (the fixed rule stays available), and a baseline scored by
another judge configuration is refused unless forced."""

import json
import shutil
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy import stats

from evaluation.drift.engine import PROMPT_VERSION
from evaluation.drift.harness import Report, Row, bootstrap_ci
from evaluation.drift.services import messages_ingest_body
from evaluation.models import EvaluationRun

ROOT = Path(__file__).resolve().parents[2]


def test_bootstrap_ci_is_scipys_percentile_interval_of_the_mean():
    samples = [4.0, 5.5, 6.0, 3.5, 5.0]
    expected = stats.bootstrap(
        (np.asarray(samples),), np.mean, confidence_level=0.95, n_resamples=2000, method="percentile", rng=0
    ).confidence_interval
    assert bootstrap_ci(samples) == pytest.approx((expected.low, expected.high), abs=1e-3)
    assert bootstrap_ci([5.0]) is None and bootstrap_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)


def test_a_noisy_drop_is_not_a_regression_under_the_interval_rule_but_is_under_the_fixed_rule():
    noisy = [2.0, 8.0, 3.0, 7.5, 4.0]  # mean 4.9, far more spread than the 1.3 drop
    row = Row("rex", "adherence", 6.2, noisy, rule="interval")
    assert row.delta == pytest.approx(-1.3) and row.ci[1] > 6.2
    assert not row.regression
    assert Row("rex", "adherence", 6.2, noisy, rule="fixed").regression


def test_a_steady_drop_is_a_regression_under_both_rules():
    steady = [4.9, 5.0, 5.1, 4.95, 5.05]
    assert Row("rex", "adherence", 6.2, steady, rule="interval").regression
    assert Row("rex", "adherence", 6.2, steady, rule="fixed").regression
    assert not Row("rex", "adherence", 6.2, [5.3, 5.3], rule="interval").regression  # within 1.0


def test_one_repeat_falls_back_to_the_fixed_rule_and_says_so():
    assert Row("rex", "fluency", 6.2, [5.0], rule="interval").regression
    report = Report(mode="live", rule="interval", repeats=1)
    assert "one repeat: no interval, so the fixed rule" in report.rule_text
    assert "bootstrap 95% CI over 3 repeats" in Report(mode="live", rule="interval", repeats=3).rule_text


@pytest.fixture
def baselines(tmp_path):
    shutil.copytree(ROOT / "baselines", tmp_path / "baselines")
    return tmp_path / "baselines"


@pytest.mark.django_db
def test_repeats_show_mean_and_ci_in_the_table(catalog, baselines, tmp_path):
    call_command(
        "drift_run", "--mode", "mock-judge", "--agents", "rex", "--repeats", "3", "--baselines", str(baselines),
        "--markdown", str(tmp_path / "t.md"), stdout=StringIO(),
    )  # fmt: skip
    assert EvaluationRun.objects.filter(agent_id="rex").count() == 3
    table = (tmp_path / "t.md").read_text()
    assert "Repeats: 3. A regression is a drop of more than 1.0 whose bootstrap 95% CI over 3 repeats" in table
    assert "| rex | adherence | replay/offline-rules-v1 | 6.33 | 6.33 | 6.33–6.33 | +0.00 | ok |" in table


@pytest.mark.django_db
def test_a_baseline_from_another_judge_is_refused_unless_forced(catalog, baselines):
    path = baselines / "rex.json"
    doc = json.loads(path.read_text())
    doc["judge"] = {"provider": "anthropic", "model": "claude-opus-4-6"}
    path.write_text(json.dumps(doc))
    with pytest.raises(CommandError) as refused:
        call_command(
            "drift_run", "--agents", "rex", "--judge", "offline", "--baselines", str(baselines), stdout=StringIO()
        )
    message = str(refused.value)
    assert "this run's judge is offline/offline-rules-v1" in message
    assert "rex: the baseline was scored by anthropic/claude-opus-4-6" in message and "--force" in message
    assert not EvaluationRun.objects.exists()  # refused before any judging
    messages_ingest_body((ROOT / "cast" / "messages.jsonl").read_text())
    out = StringIO()
    call_command(
        "drift_run", "--agents", "rex", "--judge", "offline", "--baselines", str(baselines), "--force", stdout=out
    )
    assert "rex: the baseline was scored by anthropic/claude-opus-4-6 (compared anyway: --force)" in out.getvalue()


@pytest.mark.django_db
def test_an_older_baseline_naming_only_its_judge_model_is_checked_too(catalog, baselines):
    (baselines / "rex.json").write_text(
        json.dumps({"agent": "rex", "dimensions": {"adherence": 6}, "judge_model": "gpt-5.2"})
    )
    with pytest.raises(CommandError, match="scored by gpt-5.2"):
        call_command(
            "drift_run", "--agents", "rex", "--judge", "offline", "--baselines", str(baselines), stdout=StringIO()
        )


@pytest.mark.django_db
def test_a_baseline_from_another_judge_prompt_is_another_judge(catalog, baselines):
    path = baselines / "rex.json"
    doc = json.loads(path.read_text())
    assert doc["judge"]["prompt"] == PROMPT_VERSION
    doc["judge"]["prompt"] = "0ld0ld0ld0ld"
    path.write_text(json.dumps(doc))
    with pytest.raises(CommandError, match=r"scored by offline/offline-rules-v1 \(prompt 0ld0ld0ld0ld\)"):
        call_command(
            "drift_run", "--agents", "rex", "--judge", "offline", "--baselines", str(baselines), stdout=StringIO()
        )
    # mock-judge replays the baseline's own judge: no refusal
    call_command(
        "drift_run", "--mode", "mock-judge", "--agents", "rex", "--baselines", str(baselines), stdout=StringIO()
    )
