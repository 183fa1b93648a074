"""Noise-aware regressions: with k repeats a drop counts only when it exceeds the threshold AND the
bootstrap 95% CI excludes the baseline (the fixed rule stays available), and a baseline scored by
another judge configuration is refused unless forced."""

import itertools
import json
import re
import shutil
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from evaluation.drift.engine import PROMPT_VERSION
from evaluation.drift.harness import Report, Row, bootstrap_ci, markdown, row_test
from evaluation.drift.services import messages_ingest_body
from evaluation.models import EvaluationRun
from evaluation.providers.loopback import Reply

ROOT = Path(__file__).resolve().parents[2]


def percentile_bootstrap(samples: list[float], seed: int = 0, resamples: int = 2000) -> tuple[float, float]:
    """Efron's percentile bootstrap of the mean, written out: draw `resamples` resamples of the indices with
    replacement from numpy's Generator seeded `seed` (the draws scipy.stats.bootstrap makes with rng=seed),
    take each resample's mean, and read the 2.5th and 97.5th percentiles (linear interpolation)."""
    data = np.asarray(samples)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), (resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


@pytest.mark.parametrize(
    "samples", [[4.0, 5.5, 6.0, 3.5, 5.0], [6.1, 6.3, 5.8], [2.0, 8.0, 3.0, 7.5, 4.0, 6.25, 5.5, 3.3]]
)
def test_bootstrap_ci_is_the_percentile_interval_of_the_mean(samples):
    low, high = percentile_bootstrap(samples)
    assert bootstrap_ci(samples) == pytest.approx((low, high), abs=1e-3)
    mean = sum(samples) / len(samples)
    assert low < mean < high


def test_bootstrap_ci_on_worked_numbers_and_its_edges():
    # [6.1, 6.3, 5.8]: the 27 equally likely resample means run from 5.8 to 6.3; the percentile
    # interval of the mean cuts 2.5% from each tail of the 2000 drawn.
    assert bootstrap_ci([6.1, 6.3, 5.8]) == pytest.approx(percentile_bootstrap([6.1, 6.3, 5.8]), abs=1e-3)
    assert 5.8 <= bootstrap_ci([6.1, 6.3, 5.8])[0] < bootstrap_ci([6.1, 6.3, 5.8])[1] <= 6.3
    assert bootstrap_ci([5.0]) is None and bootstrap_ci([]) is None
    assert bootstrap_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)  # no spread: a zero-width interval, not an error
    assert bootstrap_ci([4.0, 6.0]) == pytest.approx(percentile_bootstrap([4.0, 6.0]), abs=1e-3)


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


def test_against_a_baseline_that_kept_its_repeats_the_noise_model_is_the_gates_two_sample_t():
    """A baseline made from repeats carries the run-to-run spread: one repeat now is judged against a prediction
    from it (not by the fixed rule), and the test is Student's two-sample t (scipy) at alpha / D."""
    from scipy import stats

    steady, noisy = [6.0, 6.2, 5.9, 6.1], [3.0, 8.0, 5.0, 8.8]
    # one repeat now, 2 points down: against a steady baseline a regression, against a noisy one not
    assert Row("rex", "adherence", 6.05, [4.0], rule="interval", baseline_samples=steady).regression
    within = Row("rex", "adherence", 6.2, [4.0], rule="interval", baseline_samples=noisy)
    assert within.delta < -1 and not within.regression
    assert "ok (within the noise: p " in markdown(Report(mode="live", rule="interval", rows=[within], agents=["rex"]))
    # the p-value is scipy's pooled two-sample t, one-sided; the family divides alpha
    now, spread = [4.6, 5.2, 4.1], [6.0, 6.7, 5.5, 6.3]  # spreads above the judge's rounding (1/12)
    row = Row("rex", "adherence", 6.125, now, rule="interval", baseline_samples=spread, family=4)
    ref = stats.ttest_ind(now, spread, equal_var=True, alternative="less")
    test = row_test(row)
    assert test.p_value == pytest.approx(float(ref.pvalue), rel=1e-6) and test.df == len(now) + len(spread) - 2
    assert row.regression == (float(ref.pvalue) <= 0.05 / 4) is True
    # a p-value between alpha / D and alpha: significant alone, not within the family
    edge, moderate = [5.5, 5.0, 4.6], [5.5, 6.5, 6.0, 6.8]  # a drop of 1.17, p 0.017
    p = float(stats.ttest_ind(edge, moderate, equal_var=True, alternative="less").pvalue)
    assert 0.05 / 4 < p <= 0.05
    assert not Row("rex", "d", 6.2, edge, rule="interval", baseline_samples=moderate, family=4).regression
    assert Row("rex", "d", 6.2, edge, rule="interval", baseline_samples=moderate, family=1).regression
    # the fixed rule ignores the noise; a proposition row (means only in the baseline) keeps the bootstrap rule
    assert Row("rex", "adherence", 6.2, [4.0], rule="fixed", baseline_samples=noisy).regression
    assert row_test(Row("rex", "adherence", 6.2, [4.0], baseline_samples=[6.0])) is None
    report = Report(mode="live", rule="interval", repeats=1, rows=[within])
    assert "two-sample t test on both sides' repeats" in report.rule_text and "one repeat" in report.rule_text


@pytest.fixture
def baselines(tmp_path):
    shutil.copytree(ROOT / "baselines", tmp_path / "baselines")
    return tmp_path / "baselines"


def by_repeat(calls_per_repeat: int, scores: list[int]):
    """A judge that gives every check scores[k] in the k-th evaluation (each makes calls_per_repeat calls)."""
    count = itertools.count()

    def respond(endpoint, body, n):
        score = scores[min(next(count) // calls_per_repeat, len(scores) - 1)]
        ids = re.findall(r"### Check (\S+)", body["messages"][-1]["content"])
        return Reply(json={"scores": [{"id": i, "score": score, "reasoning": "ok"} for i in ids]})

    return respond


@pytest.mark.django_db
def test_repeats_show_mean_and_ci_in_the_table(catalog, tmp_path, loopback):
    judge = f"openai/j@{loopback.openai_url}"
    messages_ingest_body((ROOT / "cast" / "messages.jsonl").read_text())
    loopback.responder = by_repeat(10**6, [5])
    call_command("drift_baseline", "--agents", "rex", "--judge", judge, "--baselines", str(tmp_path), stdout=StringIO())
    calls = len(loopback.requests)
    loopback.reset()
    loopback.responder = by_repeat(calls, [4, 6, 8])
    with pytest.raises(CommandError):  # whatever the verdict, the table is written first
        call_command(
            "drift_run", "--agents", "rex", "--judge", judge, "--repeats", "3", "--baselines", str(tmp_path),
            "--markdown", str(tmp_path / "t.md"), stdout=StringIO(),
        )  # fmt: skip
    runs = EvaluationRun.objects.filter(agent_id="rex", drift__is_baseline=False).order_by("created_at")
    samples = [run.dimension_scores.get(dimension="adherence").score for run in runs]
    assert len(samples) == 3 and len(set(samples)) == 3, samples  # the repeats differ
    baseline = json.loads((tmp_path / "rex.json").read_text())["dimensions"]["adherence"]
    mean = sum(samples) / 3
    low, high = percentile_bootstrap(samples)
    table = (tmp_path / "t.md").read_text()
    assert "Repeats: 3. A regression is a drop of more than 1.0 whose bootstrap 95% CI over 3 repeats" in table
    row = next(line for line in table.splitlines() if line.startswith("| rex | adherence |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[3:7] == [f"{baseline:.2f}", f"{mean:.2f}", f"{low:.2f}–{high:.2f}", f"{mean - baseline:+.2f}"], row
    assert low < mean < high


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
    assert "- rex: the baseline was scored by anthropic/claude-opus-4-6" in out.getvalue()
    assert "| rex | ok (forced comparison) |" in out.getvalue()


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
    # mock-judge's judge is the offline judge with this prompt: refused alike
    with pytest.raises(CommandError, match=r"scored by offline/offline-rules-v1 \(prompt 0ld0ld0ld0ld\)"):
        call_command(
            "drift_run", "--mode", "mock-judge", "--agents", "rex", "--baselines", str(baselines), stdout=StringIO()
        )


def test_the_threshold_is_a_drop_of_more_than_one_point_and_the_interval_must_lie_wholly_below():
    # "more than": a drop of exactly the threshold is not a regression, a hair more is
    assert not Row("rex", "adherence", 6.0, [5.0], rule="fixed").regression
    assert Row("rex", "adherence", 6.0, [4.999], rule="fixed").regression
    assert not Row("rex", "adherence", 6.0, [4.5], rule="fixed", threshold=1.5).regression
    # "wholly below": an interval that reaches the baseline is not beyond the noise
    spread = [2.0, 2.0, 2.0, 2.0, 8.0]
    high = bootstrap_ci(spread)[1]
    assert high - 3.2 > 1.0  # the drop alone is a regression under the fixed rule
    assert not Row("rex", "adherence", high, spread, rule="interval").regression
    assert Row("rex", "adherence", high + 0.01, spread, rule="interval").regression
    # a baseline with no score now is a regression; no baseline is never one
    assert Row("rex", "adherence", 6.0, [], rule="interval").regression
    assert not Row("rex", "adherence", None, [1.0], rule="fixed").regression


def test_the_rule_in_words():
    assert Report(mode="live", rule="fixed", repeats=3).rule_text == "a drop of more than 1.0 below the baseline"
    assert Report(mode="live", rule="interval", repeats=2, threshold=1.5).rule_text == (
        "a drop of more than 1.5 whose bootstrap 95% CI over 2 repeats lies below the baseline"
    )
    assert Report(mode="live", rule="interval", repeats=1).rule_text == (
        "a drop of more than 1.0 below the baseline (one repeat: no interval, so the fixed rule)"
    )


def test_the_table_prints_mean_interval_delta_and_verdict_of_each_row():
    from evaluation.drift.services import report_markdown

    noisy = [2.0, 8.0, 3.0, 7.5, 4.0]
    rows = [
        Row("rex", "adherence", 6.2, noisy, rule="interval", repeats=5),
        Row("rex", "fluency", 6.0, [6.5, 6.25, 6.75, 6.0, 6.5], rule="interval", repeats=5),
        Row("rex", "consistency", 6.2, [4.9, 5.0, 5.1, 4.95, 5.05], rule="interval", repeats=5),
        Row("rex", "convergence", 6.0, [6.0, 6.5], rule="interval", repeats=5),
    ]
    report = Report(mode="live", rule="interval", repeats=5, rows=rows, agents=["rex"])
    table = report_markdown(report)

    def printed(name):
        line = next(x for x in table.splitlines() if x.startswith(f"| rex | {name} |"))
        return [c.strip() for c in line.split("|")[1:-1]][3:]

    low, high = percentile_bootstrap(noisy)
    assert printed("adherence") == ["6.20", "4.90", f"{low:.2f}–{high:.2f}", "-1.30", "ok (within the noise)"]
    low, high = percentile_bootstrap([6.5, 6.25, 6.75, 6.0, 6.5])
    assert printed("fluency") == ["6.00", "6.40", f"{low:.2f}–{high:.2f}", "+0.40", "ok"]
    assert printed("consistency")[1:] == [
        "5.00",
        "{:.2f}–{:.2f}".format(*percentile_bootstrap([4.9, 5.0, 5.1, 4.95, 5.05])),
        "-1.20",
        "regression",
    ]
    assert printed("convergence")[-1] == "incomplete: 2 of 5 repeats"
    new = Report(mode="mock-judge", rows=[Row("newt", "adherence", None, [4.5]), Row("newt", "convergence", None, [])])
    newt = report_markdown(new)
    assert "| newt | adherence | - | - | 4.50 | - | - | no baseline |" in newt
    assert "| newt | convergence | - | - | - | - | - | unscored |" in newt
    assert "| rex | regression | consistency |" in table
    assert table.rstrip().endswith(
        "Failed: 1 regression(s): rex/consistency -1.20; incomplete: rex/convergence scored in 2 of 5 repeats."
    )


def test_a_row_scored_by_some_repeats_only_is_incomplete_and_a_failed_agent_is_named():
    from evaluation.drift.services import report_junit, report_markdown

    assert Row("rex", "adherence", None, [5.0], repeats=2).incomplete
    assert not Row("rex", "adherence", None, [5.0, 5.0], repeats=2).incomplete
    assert not Row("rex", "adherence", None, [], repeats=2).incomplete  # unscored, not half-scored
    assert not Row("rex", "adherence", None, [5.0], repeats=1).incomplete
    report = Report(
        mode="live",
        repeats=2,
        rows=[Row("rex", "adherence", 6.0, [6.0], repeats=2), Row("rex", "fluency", 6.0, [], repeats=2)],
        agents=["ivy", "rex"],
        failed={"ivy": "drift_1 failed: the judge refused the key"},
    )
    table = report_markdown(report)
    assert "| ivy | evaluation failed | drift_1 failed: the judge refused the key |" in table
    assert "| rex | regression | fluency |" in table
    assert "| rex | fluency | - | 6.00 | - | - | - | no score |" in table
    assert report.problems == [
        "1 regression(s): rex/fluency no score",
        "incomplete: rex/adherence scored in 1 of 2 repeats",
        "ivy: the evaluation failed: drift_1 failed: the judge refused the key",
    ]
    junit = report_junit(report)
    assert 'errors="1"' in junit and 'failures="2"' in junit and '<failure message="fluency has no score"' in junit
    assert '<error message="the evaluation failed: drift_1 failed: the judge refused the key"' in junit
