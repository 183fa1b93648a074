"""Corrected (prediction-powered) estimates: the estimator against the reference code ppi_py and against the
formulas written out on a hand example; then its doors: the command, the API and the judge card."""

import json
import math
import statistics

import numpy as np
import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate
from rest_framework.authtoken.models import Token

from evaluation.judging import estimates, selectors, services
from evaluation.models import Annotation, Item, JudgeConfiguration, JudgeScore
from tests.judging.synthetic import candidate_sets
from tests.judging.test_estimates_budget import stratifiable_by_hand, stratified_by_hand

Z_95 = 1.959963984540054

# --- the estimator ------------------------------------------------------------------------------------


def _case(seed: int, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, big_n = 40 + 10 * seed, 400
    truth = rng.normal(size=n + big_n)
    if kind == "tuned":  # a noisy, biased judge: lambda strictly between 0 and 1
        f = truth + rng.normal(scale=1.0 + seed % 3, size=truth.size) - 0.7
    elif kind == "clipped-low":  # a judge that gets it backwards: lambda below 0, clipped to 0
        f = -truth + rng.normal(scale=0.3, size=truth.size)
    else:  # people's values twice the judge's: lambda above 1, clipped to 1
        f = truth / 2 + rng.normal(scale=0.05, size=truth.size)
    return truth[:n], f[:n], f[n:]


@pytest.mark.parametrize("kind", ["tuned", "clipped-low", "clipped-high"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_corrected_mean_is_ppi_pys(seed, kind):
    y, f, f_unlabelled = _case(seed, kind)
    ours = estimates.ppi_mean(y, f, f_unlabelled)
    low, high = ppi_mean_ci(y, f, f_unlabelled, alpha=0.05)
    assert ours.value == pytest.approx(float(ppi_mean_pointestimate(y, f, f_unlabelled)[0]), abs=1e-12)
    assert (ours.low, ours.high) == pytest.approx((float(low[0]), float(high[0])), abs=1e-12)
    assert (ours.n, ours.unlabelled, ours.method) == (y.size, 400, estimates.PPI_PLUS_PLUS)
    if kind == "clipped-low":
        assert ours.lam == 0.0
    elif kind == "clipped-high":
        assert ours.lam == 1.0
    else:
        assert 0.0 < ours.lam < 1.0
    # a given lambda is used as is, as ppi_py's lam=1 (plain PPI)
    plain = estimates.ppi_mean(y, f, f_unlabelled, lam=1.0)
    assert (plain.low, plain.high) == pytest.approx(
        tuple(float(v[0]) for v in ppi_mean_ci(y, f, f_unlabelled, alpha=0.05, lam=1)), abs=1e-12
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_people_and_judge_only_intervals_are_ppi_pys_classical_ones(seed):
    y, f, f_unlabelled = _case(seed, "tuned")
    for ours, values in ((estimates.classical_mean(y), y), (estimates.judge_only(f_unlabelled), f_unlabelled)):
        low, high = classical_mean_ci(values, alpha=0.05)
        assert (ours.value, ours.low, ours.high) == pytest.approx((values.mean(), low, high), abs=1e-12)
    assert estimates.judge_only(f).method == estimates.JUDGE_ONLY
    # lambda 0 is the people's own estimate
    zero = estimates.ppi_mean(y, f, f_unlabelled, lam=0.0)
    people = estimates.classical_mean(y)
    assert (zero.value, zero.low, zero.high) == pytest.approx((people.value, people.low, people.high), abs=1e-12)


def test_a_hand_example_with_the_formulas_written_out():
    y, f, f_unl = [1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 1, 0, 1]
    n, big_n = 4, 6
    y_bar, f_bar = sum(y) / n, sum(f) / n
    covariance = sum((a - y_bar) * (b - f_bar) for a, b in zip(y, f, strict=True)) / n  # 0.125
    pooled = statistics.variance(f + f_unl)  # divides by n + N - 1: 2.4 / 9
    lam = covariance / ((1 + n / big_n) * pooled)
    assert lam == pytest.approx(0.28125)
    theta = lam * sum(f_unl) / big_n + sum(a - lam * b for a, b in zip(y, f, strict=True)) / n
    assert theta == pytest.approx(0.796875)
    se = math.sqrt(
        statistics.pvariance([lam * v for v in f_unl]) / big_n
        + statistics.pvariance([a - lam * b for a, b in zip(y, f, strict=True)]) / n
    )
    ours = estimates.ppi_mean(np.array(y), np.array(f), np.array(f_unl))
    assert ours.lam == pytest.approx(lam, abs=1e-12)
    assert (ours.value, ours.se) == pytest.approx((theta, se), abs=1e-12)
    assert (ours.low, ours.high) == pytest.approx((theta - 1.959963984540054 * se, theta + 1.959963984540054 * se))
    # the difference of two independent estimates: the variances add
    other = estimates.classical_mean(np.array([0.0, 1.0, 0.0, 0.0, 1.0]))
    gap = estimates.difference(ours, other)
    assert gap.value == pytest.approx(theta - 0.4)
    assert gap.se == pytest.approx(math.sqrt(se**2 + 0.4 * 0.6 / 5))
    assert gap.high - gap.value == pytest.approx(1.959963984540054 * gap.se)


def test_not_enough_data_is_a_result_with_a_reason():
    one = estimates.ppi_mean(np.array([1.0]), np.array([1.0]), np.array([0.0, 1.0]))
    assert one.value is None and one.low is None and "1 labelled item(s)" in one.reason and "at least 2" in one.reason
    assert "not enough data" in str(one)
    assert estimates.classical_mean(np.array([])).value is None
    gap = estimates.difference(one, estimates.classical_mean(np.array([0.0, 1.0])))
    assert gap.value is None and gap.reason == one.reason
    # every item labelled: nothing to correct with, the people's mean says so
    all_labelled = estimates.ppi_mean(np.array([0.0, 1.0, 1.0]), np.array([1.0, 1.0, 0.0]), np.array([]))
    assert all_labelled.value == pytest.approx(2 / 3) and "every judged item is labelled" in all_labelled.method
    # a judge that gives every item the same value carries no information: lambda 0, the people's interval
    flat = estimates.ppi_mean(np.array([0.0, 1.0, 1.0]), np.ones(3), np.ones(5))
    assert flat.lam == 0.0 and flat.width == pytest.approx(estimates.classical_mean(np.array([0.0, 1.0, 1.0])).width)
    # equal values: an interval of no width is flagged, not passed off
    assert "no width" in estimates.classical_mean(np.array([1.0, 1.0])).method
    with pytest.raises(ValueError, match="same items"):
        estimates.ppi_mean(np.array([1.0, 0.0]), np.array([1.0]), np.array([0.0]))


def test_what_not_enough_data_says_names_the_count_the_method_and_the_reason():
    # each of these is printed by the command and the API, word for word
    one = estimates.classical_mean(np.array([1.0]))
    assert (one.n, one.method, one.reason) == (1, estimates.CLASSICAL, "1 item(s); an interval needs at least 2")
    assert str(one) == "not enough data (1 item(s); an interval needs at least 2)"
    few = estimates.ppi_mean(np.array([1.0]), np.array([0.0]), np.array([0.0, 1.0]))
    assert (few.n, few.method, few.se, few.lam) == (1, estimates.PPI_PLUS_PLUS, None, None)
    assert few.reason == "1 labelled item(s); an interval needs at least 2"
    # two labelled items are enough (MIN_LABELLED), and give ppi_py's interval
    two = estimates.ppi_mean(np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([0.0, 1.0, 1.0]))
    low, high = ppi_mean_ci(np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([0.0, 1.0, 1.0]), alpha=0.05)
    assert two.n == 2 and (two.low, two.high) == pytest.approx((low[0], high[0]), abs=1e-12)
    assert estimates.classical_mean(np.array([0.0, 1.0])).n == 2
    equal = estimates.classical_mean(np.array([1.0, 1.0]))
    assert equal.method == estimates.CLASSICAL + "; every value equal, so the interval has no width: treat it with care"
    assert str(equal) == "1.000 [1.000, 1.000]"


def test_every_judged_item_labelled_gives_the_peoples_interval_with_lambda_zero():
    y = np.array([0.0, 1.0, 1.0, 1.0])
    every = estimates.ppi_mean(y, np.array([1.0, 1.0, 0.0, 1.0]), np.array([]))
    people = estimates.classical_mean(y)
    assert (every.value, every.low, every.high, every.se) == (people.value, people.low, people.high, people.se)
    assert (every.n, every.lam, every.unlabelled) == (4, 0.0, 0)
    assert every.method == estimates.CLASSICAL + ": every judged item is labelled, so the people's mean is the estimate"


def test_a_difference_needs_both_values_and_both_standard_errors():
    full = estimates.classical_mean(np.array([0.0, 1.0, 1.0]))
    short = estimates.classical_mean(np.array([1.0]))
    for a, b in ((full, short), (short, full)):
        gap = estimates.difference(a, b)
        assert gap.value is None and gap.n == 1 and gap.reason == short.reason
        assert gap.method == f"difference of {a.method}"
    # an estimate given without its standard error cannot be differenced either: no interval, said so
    bare = estimates.MeanEstimate(0.5, 0.4, 0.6, 10, "given")
    for a, b in ((full, bare), (bare, full)):
        gap = estimates.difference(a, b)
        assert gap.value is None and gap.reason == "no interval" and gap.n == 3
    unsure = estimates.MeanEstimate(None, None, None, 5, "given", se=0.1)
    assert estimates.difference(unsure, full).value is None and estimates.difference(full, unsure).value is None
    gap = estimates.difference(full, estimates.classical_mean(np.array([0.0, 0.0, 1.0, 1.0, 1.0])))
    assert gap.n == 3 and gap.method == f"difference of {estimates.CLASSICAL}; variances added"
    assert gap.se == pytest.approx(math.sqrt(full.se**2 + (math.sqrt(0.24) / math.sqrt(5)) ** 2))


def test_the_rows_as_the_json_and_the_api_give_them():
    rows = estimates.dimension_estimates("score", ("1", "2", "3"), True, {1: 0, 2: 2, 3: 1, 4: 2}, {1: 0, 2: 1}, None)
    (row,) = rows
    # the mean is in the scale's own units (1 to 3), not its places (0 to 2)
    assert row.judge_only.value == pytest.approx((1 + 3 + 2 + 3) / 4) and row.people_only.value == 1.5
    y, f, f_unl = np.array([1.0, 2.0]), np.array([1.0, 3.0]), np.array([2.0, 3.0])
    value = float(ppi_mean_pointestimate(y, f, f_unl)[0])
    assert row.corrected.value == pytest.approx(value) and row.corrected.unlabelled == 2
    assert row.as_dict() == {
        "name": "score",
        "estimand": "mean",
        "judge_only": {"value": row.judge_only.value, "low": row.judge_only.low, "high": row.judge_only.high},
        "people_only": {"value": 1.5, "low": row.people_only.low, "high": row.people_only.high, "n": 2},
        "corrected": {"value": row.corrected.value, "low": row.corrected.low, "high": row.corrected.high},
        "all_people": None,
    }
    everyone = estimates.dimension_estimates("score", ("1", "2", "3"), True, {1: 0, 2: 2}, {1: 0, 2: 1}, None)[0]
    assert everyone.as_dict()["all_people"] == {"value": 1.5, "n": 2}
    # keep: only the kept items' labels count, the others count as unlabelled
    kept = estimates.dimension_estimates(
        "score", ("1", "2", "3"), True, {1: 0, 2: 2, 3: 1}, {1: 0, 2: 1, 3: 2}, frozenset({1, 3})
    )[0]
    assert kept.people_only.value == 2.0 and kept.corrected.unlabelled == 1 and kept.all_people == (2.0, 3)
    a = estimates.classical_mean(np.array([0.0, 1.0, 1.0]))
    b = estimates.classical_mean(np.array([0.0, 1.0]))
    shown = estimates.DifferenceRow("d", "share:Yes", a, b, estimates.difference(a, b), estimates.difference(b, a))
    assert shown.as_dict() == {
        "name": "d",
        "estimand": "share:Yes",
        "a": a.as_dict(),
        "b": b.as_dict(),
        "difference": shown.corrected.as_dict(),
        "judge_only_difference": shown.judge_only.as_dict(),
    }
    assert a.as_dict() == {"value": a.value, "low": a.low, "high": a.high}
    table = estimates.EstimateTable("r", 1, "c", 1, "all", 3, 2, 2, (row,))
    assert table.as_dict() == {
        "rubric": "r",
        "adjudicated": 0,
        "people_value": estimates.PEOPLE_VALUE,
        "dimensions": [row.as_dict()],
    }


def test_the_differences_of_two_tables_pair_their_estimands():
    first = estimates.table_rows(
        [estimates.DimensionData("d", ("No", "Yes"), False, {1: 1, 2: 0, 3: 1}, {1: 1, 2: 0})], None
    )
    second = estimates.table_rows(
        [estimates.DimensionData("d", ("No", "Yes"), False, {4: 0, 5: 0, 6: 1}, {4: 0, 6: 1})], None
    )
    a = estimates.EstimateTable("r", 1, "c", 1, "a", 3, 2, 2, first)
    b = estimates.EstimateTable("r", 1, "c", 1, "b", 3, 2, 2, second)
    rows = estimates.differences(a, b)
    assert [(r.dimension, r.estimand) for r in rows] == [("d", "share:Yes"), ("d", "share:No")]
    for row, x, y in zip(rows, first, second, strict=True):
        assert (row.a, row.b) == (x.corrected, y.corrected)
        assert row.corrected.value == pytest.approx(x.corrected.value - y.corrected.value)
        assert row.corrected.se == pytest.approx(math.hypot(x.corrected.se, y.corrected.se))
        assert row.judge_only.value == pytest.approx(x.judge_only.value - y.judge_only.value)


def test_no_labels_or_no_judged_items_are_not_enough_data_and_a_table_keeps_its_labelling_budget():
    unlabelled = estimates.dimension_estimates("score", ("1", "2", "3"), True, {1: 0, 2: 2, 3: 1}, {}, None)[0]
    assert unlabelled.judge_only.value == 2.0 and unlabelled.all_people is None
    assert unlabelled.people_only.reason == "0 item(s); an interval needs at least 2"
    assert unlabelled.corrected.reason == "0 labelled item(s); an interval needs at least 2"
    nothing = estimates.dimension_estimates("score", ("1", "2", "3"), True, {}, {}, None)[0]
    assert nothing.judge_only.value is None and nothing.judge_only.n == 0
    # table_rows passes the scale's kind and the kept labels on to every dimension
    data = [estimates.DimensionData("score", ("1", "2", "3"), True, {1: 0, 2: 2, 3: 1, 4: 2}, {1: 0, 2: 1, 3: 2})]
    (row,) = estimates.table_rows(data, frozenset({1, 3}))
    assert row.estimand == "mean" and row.people_only.n == 2 and row.people_only.value == 2.0
    assert row.corrected.unlabelled == 2


def test_a_categorical_scale_gives_each_labels_share_first_label_first():
    levels = ("No", "To some extent", "Yes")  # worst first
    rows = estimates.dimension_estimates(
        "Coherence", levels, False, {1: 2, 2: 2, 3: 0, 4: 1}, {1: 2, 2: 1, 3: 0, 4: 1}, None
    )
    assert [r.estimand for r in rows] == ["share:Yes", "share:To some extent", "share:No"]
    assert [r.judge_only.value for r in rows] == [0.5, 0.25, 0.25]
    assert [r.people_only.value for r in rows] == [0.25, 0.5, 0.25]
    assert all(r.all_people == (r.people_only.value, 4) for r in rows)
    # every judged item labelled: the corrected estimate is the people's
    assert all(r.corrected.value == r.people_only.value for r in rows)
    numeric = estimates.dimension_estimates("score", ("1", "2", "3"), True, {1: 0, 2: 2}, {1: 0}, None)
    assert [r.estimand for r in numeric] == ["mean"] and numeric[0].judge_only.value == 2.0
    assert numeric[0].all_people is None and numeric[0].corrected.value is None


def test_label_next_fills_the_judges_levels_in_proportion_to_their_size_and_spread():
    values = np.array([1.0, 2.0])  # a scale's mean (a share's spread has two values added: see the budget tests)
    # level 0: 60 judged, 10 labelled, people disagree often; level 1: 40 judged, 10 labelled, always agree
    judged = {i: 0 for i in range(60)} | {i: 1 for i in range(60, 100)}
    people = {i: (1 if i % 2 else 0) for i in range(10)} | {i: 1 for i in range(60, 70)}
    picked, strata = estimates.label_next(values, ("No", "Yes"), judged, people, count=10, seed=1)
    assert len(picked) == 10 and len(set(picked)) == 10 and not set(picked) & set(people)
    # level 1's residual spread is 0, so every new label goes to level 0 (Neyman: N_h x sd_h)
    assert all(judged[i] == 0 for i in picked)
    assert [(s.level, s.judged, s.labelled) for s in strata] == [("No", 60, 10), ("Yes", 40, 10)]
    assert strata[0].residual_sd == pytest.approx(statistics.stdev([v - 0.5 * 0 for v in [0, 1] * 5]))
    assert strata[1].residual_sd == 0.0 and strata[0].target == 30.0
    # a level without two labels is sampled first (its spread is unknown)
    fresh = {i: 0 for i in range(10)} | {i: 1 for i in range(10, 20)}
    first, _ = estimates.label_next(values, ("No", "Yes"), fresh, {i: 0 for i in range(5)}, count=3, seed=0)
    assert all(fresh[i] == 1 for i in first)


def test_the_budget_curve_narrows_with_labels_and_ends_at_the_full_estimate():
    rng = np.random.default_rng(5)
    judged = {i: int(v) for i, v in enumerate(rng.integers(0, 2, size=600))}
    people = {i: (v if rng.random() > 0.15 else 1 - v) for i, v in list(judged.items())[:200]}
    values = np.array([0.0, 1.0])
    points = estimates.budget_curve(values, judged, people, draws=30, seed=2)
    assert [p.labelled for p in points] == [10, 20, 40, 80, 160, 200]
    widths = [p.corrected for p in points]
    assert widths == sorted(widths, reverse=True)
    full = estimates.corrected_mean(
        values,
        np.array([judged[i] for i in sorted(people)]),
        np.array([people[i] for i in sorted(people)]),
        np.array([v for i, v in judged.items() if i not in people]),
    )
    assert full.method == estimates.STRATIFIED  # both levels hold labels: the table's corrected estimate
    assert points[-1].corrected == pytest.approx(full.width)
    assert all(p.corrected <= p.people_only * 1.05 for p in points[2:])


# --- the doors ----------------------------------------------------------------------------------------


@pytest.fixture
def judged(db):
    services.transcripts_import(json.dumps(candidate_sets(15, 8, seed=4)), file="synthetic.json")
    report = services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=1, workers=1)
    assert report.judged == 15 * 8 and not report.failed
    return JudgeConfiguration.objects.get()


def _stored(configuration, dimension):
    """The judge's and the people's values of one dimension, from the stored rows (one repeat, one label each
    except where three people labelled: the lower median)."""
    judge = dict(
        JudgeScore.objects.filter(configuration=configuration, dimension__name=dimension).values_list(
            "item_id", "score"
        )
    )
    labels: dict[int, list[float]] = {}
    for item, score in Annotation.objects.filter(dimension__name=dimension).values_list("item_id", "score"):
        labels.setdefault(item, []).append(score)
    people = {i: sorted(v)[(len(v) - 1) // 2] for i, v in labels.items()}
    return judge, people


def test_the_command_json_has_the_documented_shape_and_ppi_pys_figures(judged, capsys):
    call_command("estimate", "--rubric", "tutor-response", "--labelled", "30", "--seed", "7", "--json")
    body = json.loads(capsys.readouterr().out)
    assert set(body) == {"rubric", "adjudicated", "people_value", "dimensions"} and body["rubric"] == "tutor-response"
    assert body["adjudicated"] == 0  # nothing settled: every people's value is the median of raw labels
    first = body["dimensions"][0]
    assert set(first) == {"name", "estimand", "judge_only", "people_only", "corrected", "all_people"}
    assert set(first["people_only"]) == {"value", "low", "high", "n"}
    assert set(first["judge_only"]) == set(first["corrected"]) == {"value", "low", "high"}
    assert set(first["all_people"]) == {"value", "n"}
    names = [d["name"] for d in body["dimensions"]]
    assert len(body["dimensions"]) == 8 * 3 and names[0] == "Mistake_Identification"
    assert [d["estimand"] for d in body["dimensions"][:3]] == ["share:Yes", "share:To some extent", "share:No"]
    # recomputed here from the stored rows with ppi_py, on the same 30 items the command kept
    table = selectors.estimate_table("tutor-response", labelled=30, seed=7)
    kept = sorted(table.keep)
    judge, people = _stored(judged, "Mistake_Identification")
    yes = 2.0  # "Yes" is the best of three levels: place 2
    y = np.array([people[i] == yes for i in kept], dtype=float)
    places = {i: int(judge[i]) for i in judge}
    g_lab, g_unl = [places[i] for i in kept], [places[i] for i in sorted(judge) if i not in table.keep]
    # stratified by the judge's level where the 30 random labels put two on each level, else ppi_py's PPI++
    value, se = _corrected([0.0, 0.0, 1.0], g_lab, [int(people[i]) for i in kept], g_unl)
    assert first["people_only"]["n"] == 30
    low, high = max(0.0, value - Z_95 * se), min(1.0, value + Z_95 * se)
    assert (first["corrected"]["low"], first["corrected"]["high"]) == pytest.approx((low, high))
    assert first["people_only"]["value"] == pytest.approx(y.mean())
    assert first["judge_only"]["value"] == pytest.approx(np.mean([v == yes for v in judge.values()]))
    assert first["all_people"] == {"value": pytest.approx(np.mean([people[i] == yes for i in judge])), "n": 120}


def test_the_command_prints_the_table_the_budget_and_a_comparison(judged, capsys):
    call_command("estimate", "--rubric", "tutor-response", "--labelled", "40", "--budget")
    out = capsys.readouterr().out
    assert "120 items judged, 40 with people's labels (of 120; the others' labels hidden)" in out
    assert "How many labels?" in out and "label next (stratified by the judge's level" in out
    line = next(x for x in out.splitlines() if x.startswith("Tutor_Tone") and "share:Encouraging" in x)
    assert line.count("[") == 3 and "n=40" in line
    call_command("estimate", "--rubric", "tutor-response", "--compare", "Sonnet", "GPT4", "--by", "candidate")
    out = capsys.readouterr().out
    assert "Corrected difference candidate 'Sonnet' minus 'GPT4'" in out
    call_command("estimate", "--rubric", "tutor-response", "--compare", "Sonnet", "GPT4", "--by", "candidate", "--json")
    rows = json.loads(capsys.readouterr().out)["dimensions"]
    a = selectors.estimate_table("tutor-response", selection=selectors.Selection(candidate="Sonnet")).rows[0]
    b = selectors.estimate_table("tutor-response", selection=selectors.Selection(candidate="GPT4")).rows[0]
    half = 1.959963984540054 * math.hypot(a.corrected.se, b.corrected.se)
    assert rows[0]["difference"]["value"] == pytest.approx(a.corrected.value - b.corrected.value)
    assert rows[0]["difference"]["high"] - rows[0]["difference"]["value"] == pytest.approx(half)


def test_the_command_says_not_enough_data_and_refuses_bad_input(judged, capsys):
    call_command("estimate", "--rubric", "tutor-response", "--labelled", "1")
    out = capsys.readouterr().out
    assert "not enough data: 1 labelled item(s); an interval needs at least 2" in out
    with pytest.raises(CommandError, match="no-such"):
        call_command("estimate", "--rubric", "no-such")
    with pytest.raises(CommandError, match="no judged items in the selection"):
        call_command("estimate", "--rubric", "tutor-response", "--source", "elsewhere")
    with pytest.raises(CommandError, match="must be 0 or more"):
        call_command("estimate", "--rubric", "tutor-response", "--labelled", "-3")
    with pytest.raises(CommandError, match="nothing judged with rubric 'tutor-session'"):
        call_command("estimate", "--rubric", "tutor-session")


@pytest.fixture
def api(db, client, django_user_model):
    user = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="viewer"))
    token = Token.objects.create(user=user)
    return lambda path: client.get(path, HTTP_AUTHORIZATION=f"Token {token.key}")


def test_the_api_gives_the_estimates(judged, api):
    answer = api("/api/judging/estimates?rubric=tutor-response&labelled=30&seed=7")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["items"] == 120 and body["labelled"] == 30 and body["configuration"] == judged.key
    command = selectors.estimate_table("tutor-response", labelled=30, seed=7).as_dict()
    first = body["dimensions"][0]
    assert {k: first["corrected"][k] for k in ("value", "low", "high")} == command["dimensions"][0]["corrected"]
    # stratified by the judge's level (no lambda) where every level holds two labels, else PPI++ (a lambda)
    stratified = first["corrected"]["method"].startswith(estimates.STRATIFIED)
    assert stratified or first["corrected"]["method"].startswith(estimates.PPI_PLUS_PLUS)
    assert (first["corrected"]["lam"] is None) == stratified
    assert first["people_only"]["n"] == 30
    assert api("/api/judging/estimates").status_code == 400
    assert api("/api/judging/estimates?rubric=tutor-response&labelled=-1").json()["fields"]
    assert api("/api/judging/estimates?rubric=no-such").status_code == 404
    assert api(f"/api/judging/estimates?rubric=tutor-response&configuration={judged.pk + 99}").status_code == 404
    few = api("/api/judging/estimates?rubric=tutor-response&labelled=1").json()["dimensions"][0]
    assert few["corrected"]["value"] is None and "at least 2" in few["corrected"]["reason"]


def test_the_judge_card_shows_the_estimates_the_chart_and_what_to_label_next(judged, admin_client):
    page = admin_client.get(f"/admin/evaluation/judging/{judged.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="estimates-table"' in html and 'aria-label="Corrected interval width by labelled items"' in html
    row = selectors.estimate_table("tutor-response").rows[0]
    section = html[html.index('id="estimate-Mistake_Identification"') :]
    assert f"{row.corrected.value:.3f}" in section[:2000] and f"{row.judge_only.value:.3f}" in section[:2000]
    assert "<td>share of Yes</td>" in section[:300]
    # every item is labelled: nothing is left to label next
    assert 'id="label-next-list"' not in html


def test_the_card_lists_items_to_label_linked_to_their_page(judged, admin_client):
    Annotation.objects.filter(item__key__in=["Sonnet", "GPT4", "Gemini"]).delete()
    html = admin_client.get(f"/admin/evaluation/judging/{judged.pk}/").content.decode()
    listed = html[html.index('id="label-next-list"') :]
    listed = listed[: listed.index("</ol>")]
    assert listed.count("<li>") == 10 and "/admin/evaluation/judging/transcripts/" in listed
    assert all(name in ("Sonnet", "GPT4", "Gemini") for name in [x.split("/")[-1] for x in listed.split("</a>")[:-1]])


def _ppi(y, f, f_unl):
    """ppi_py's PPI++ mean and its standard error (the 95% interval's half-width over z)."""
    low, high = ppi_mean_ci(
        np.array(y, dtype=float), np.array(f, dtype=float), np.array(f_unl, dtype=float), alpha=0.05
    )
    value = float(
        ppi_mean_pointestimate(np.array(y, dtype=float), np.array(f, dtype=float), np.array(f_unl, dtype=float))[0]
    )
    return value, (float(high[0]) - float(low[0])) / (2 * 1.959963984540054)


def _corrected(values, g_lab, y_lab, g_unl):
    """(value, se) of the corrected estimate by the rule written out: stratified by the judge's level where every
    level holds two labels (or all its items), else ppi_py's PPI++."""
    if stratifiable_by_hand(g_lab, g_unl):
        return stratified_by_hand([values[v] for v in y_lab], g_lab, g_unl, share=True)
    return _ppi([values[v] for v in y_lab], [values[v] for v in g_lab], [values[v] for v in g_unl])


def test_the_api_gives_the_corrected_difference_between_two_groups(judged, api):
    # the candidates of every other dialogue lose their labels: each group's estimate is a corrected one
    dialogues = sorted(set(Item.objects.values_list("transcript_id", flat=True)))
    Annotation.objects.filter(item__transcript_id__in=dialogues[::2]).delete()
    answer = api("/api/judging/estimates?rubric=tutor-response&compare=Sonnet,GPT4&by=candidate")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["by"], body["a"], body["b"], body["configuration"]) == ("candidate", "Sonnet", "GPT4", judged.key)
    judge, people = _stored(judged, "Mistake_Identification")
    sides = []
    for name in ("Sonnet", "GPT4"):
        items = sorted(Item.objects.filter(key=name).values_list("pk", flat=True))
        labelled = [i for i in items if i in people]
        sides.append(
            (
                _corrected(
                    [0.0, 0.0, 1.0],
                    [int(judge[i]) for i in labelled],
                    [int(people[i]) for i in labelled],
                    [int(judge[i]) for i in items if i not in people],
                ),
                len(items),
                len(labelled),
                np.mean([judge[i] == 2.0 for i in items]),
            )
        )
    assert body["groups"] == [
        {"name": "Sonnet", "items": 15, "labelled": sides[0][2]},
        {"name": "GPT4", "items": 15, "labelled": sides[1][2]},
    ]
    (a, se_a), (b, se_b) = sides[0][0], sides[1][0]
    first = body["dimensions"][0]
    assert (first["name"], first["estimand"]) == ("Mistake_Identification", "share:Yes")
    assert first["a"]["value"] == pytest.approx(a) and first["b"]["value"] == pytest.approx(b)
    half = 1.959963984540054 * math.sqrt(se_a**2 + se_b**2)
    gap = first["difference"]
    assert (gap["value"], gap["low"], gap["high"]) == pytest.approx((a - b, a - b - half, a - b + half))
    # the judge calls no answer of either candidate "Yes": each judge-only share is 0 with a Wilson interval, and
    # two intervals without a standard error have no normal difference (never 0.000 [0.000, 0.000])
    assert sides[0][3] == sides[1][3] == 0.0
    assert "Wilson score interval of 0 of 15" in first["a"]["method"] or first["a"]["low"] < first["a"]["high"]
    assert first["judge_only_difference"]["value"] is None
    assert "no standard error to add" in first["judge_only_difference"]["reason"]
    assert first["a"]["n"] == sides[0][2]
    # refused, each naming the field and the reason
    for query, field, reason in (
        ("compare=Sonnet", "compare", "two names"),
        ("compare=Sonnet,Sonnet", "compare", "with itself"),
        ("compare=Sonnet,GPT4&by=agent", "by", "not a valid choice"),
        ("compare=Sonnet,GPT4&candidate=Sonnet", "candidate", "cannot be combined"),
        ("compare=Sonnet,Nobody&by=candidate", "compare", "candidate 'Nobody' has no items judged"),
    ):
        refused = api(f"/api/judging/estimates?rubric=tutor-response&{query}")
        assert refused.status_code == 400, (query, refused.content)
        assert reason in json.dumps(refused.json()["fields"][field]), (query, refused.json())


# --- the comparison page ------------------------------------------------------------------------------

RUNS_JUDGE = "offline/offline-rules-v1"
PACING = {  # run -> (the judge's pacing score, a person's pacing label or None)
    "new": [(7, 5), (8, 6), (6, 6), (9, 7), (7, None), (8, None), (5, None), (9, None), (6, None), (8, None)],
    "old": [(6, 6), (5, 4), (7, 7), (6, None), (4, None), (7, None), (5, None), (6, None)],
}


def _group(name, runs, baseline=None):
    from django.utils import timezone

    from evaluation.models import DimensionScore, EvaluationRun, RunMessage

    config = {}
    if baseline:
        config["baseline"] = {
            "id": baseline,
            "judge": RUNS_JUDGE,
            "judge_config": None,
            "forced": False,
            "mismatches": [],
            "rule": "fixed",
            "threshold": 1.0,
            "means": {},
        }
    made = []
    for k, (score, _) in enumerate(runs):
        run = EvaluationRun.objects.create(
            run_id=f"{name}_{k:02d}",
            status="completed",
            stage="completed",
            judge_label=RUNS_JUDGE,
            group=name,
            config=config,
        )
        RunMessage.objects.create(
            run=run, turn=1, role="tutor", content=f"Hello {k}", timestamp=timezone.now(), attempt=1
        )
        DimensionScore.objects.create(run=run, dimension="pacing", score=score)
        DimensionScore.objects.create(run=run, dimension="authenticity", score=5 + k % 3)
        made.append(run)
    return made


def _label(runs, labels, user):
    for run, (_, label) in zip(runs, labels, strict=True):
        if label is not None:
            services.run_labels_set(run_id=run.run_id, user=user, values={"pacing": str(label)})


def test_the_comparison_page_shows_the_corrected_estimate_and_difference_beside_the_judges_mean(
    db, admin_client, admin_user
):
    from evaluation.models import EvaluationRun

    old = _group("cmp_old", PACING["old"])
    new = _group("cmp_new", PACING["new"], baseline="cmp_old")
    # neither a failed run nor another judge's run counts, labelled or not
    from evaluation.models import DimensionScore

    for run_id, status, judge in (("cmp_new_failed", "failed", RUNS_JUDGE), ("cmp_new_other", "completed", "openai/x")):
        run = EvaluationRun.objects.create(run_id=run_id, status=status, judge_label=judge, group="cmp_new")
        DimensionScore.objects.create(run=run, dimension="pacing", score=1)
    page = admin_client.get("/admin/evaluation/comparisons/cmp_new/")
    assert page.status_code == 200
    assert 'id="comparison-estimates"' not in page.content.decode()  # no labels: nothing said
    assert "Corrected by people" not in page.content.decode()
    _label(old, PACING["old"], admin_user)
    _label(new, PACING["new"], admin_user)
    html = admin_client.get("/admin/evaluation/comparisons/cmp_new/").content.decode()
    section = html[html.index('id="comparison-estimates"') :]
    row = section[section.index('id="corrected-pacing"') :]
    row = row[: row.index("</tr>")]

    def expected(runs):
        f = [s for s, label in runs if label is not None]
        y = [label for _, label in runs if label is not None]
        return _ppi(y, f, [s for s, label in runs if label is None])

    (a, se_a), (b, se_b) = expected(PACING["new"]), expected(PACING["old"])
    judge = [s for s, _ in PACING["new"]]
    judge_se = statistics.pstdev(judge) / math.sqrt(len(judge))
    half = 1.959963984540054 * math.sqrt(se_a**2 + se_b**2)
    cells = [
        f'{statistics.fmean(judge):.3f}</strong> <span class="ci">[{statistics.fmean(judge) - 1.959963984540054 * judge_se:.3f}, ',
        "n=10",  # the judge's mean over every completed run of the group
        "n=4",  # people labelled four of them
        f'{a:.3f}</strong> <span class="ci">[{a - 1.959963984540054 * se_a:.3f}, {a + 1.959963984540054 * se_a:.3f}]',
        f'{b:.3f}</strong> <span class="ci">[{b - 1.959963984540054 * se_b:.3f}, {b + 1.959963984540054 * se_b:.3f}]',
        f'{a - b:.3f}</strong> <span class="ci">[{a - b - half:.3f}, {a - b + half:.3f}]',
    ]
    for cell in cells:
        assert cell in row, (cell, row)
    assert "baseline cmp_old, corrected" in section and "judged by more than one judge" in html
    # a dimension nobody labelled says so rather than showing a number
    other = section[section.index('id="corrected-authenticity"') :]
    assert "not enough data: 0 labelled item(s)" in other[: other.index("</tr>")]


def test_without_labels_on_the_baseline_the_page_says_there_is_no_corrected_difference(db, admin_client, admin_user):
    _group("cmp_old", PACING["old"])
    new = _group("cmp_new", PACING["new"], baseline="cmp_old")
    _label(new, PACING["new"], admin_user)
    html = admin_client.get("/admin/evaluation/comparisons/cmp_new/").content.decode()
    assert (
        'id="comparison-estimates"' in html
        and "corrected difference" not in html.split('id="comparison-estimates"')[1].split("</thead>")[0]
    )
    assert 'id="no-corrected-difference"' in html and "No corrected difference against the baseline cmp_old" in html


def test_an_interval_past_what_the_estimand_can_be_is_clipped_and_says_so():
    # the judge says "Yes" (the best of three levels, place 2) on 1 item of 120: a share of 1/120 whose normal
    # interval reaches below 0
    judged = {i: (2 if i == 0 else 0) for i in range(120)}
    people = {i: (2 if i < 60 else 1) for i in range(40)}
    rows = {r.estimand: r for r in estimates.dimension_estimates("d", ("No", "Maybe", "Yes"), False, judged, people)}
    p, n = 1 / 120, 120
    half = 1.959963984540054 * math.sqrt(p * (1 - p) / n)
    assert p - half < 0  # what a normal interval would say
    yes = rows["share:Yes"].judge_only
    assert (yes.value, yes.low) == (p, 0.0) and abs(yes.high - (p + half)) < 1e-12
    assert yes.method.endswith("; clipped to [0, 1]")
    # people's "Yes" on every labelled item: a share of 1 with the Wilson interval of 40 of 40, n / (n + z^2) to 1
    everyone = rows["share:Yes"].people_only
    assert (everyone.value, everyone.high) == (1.0, 1.0) and everyone.low == pytest.approx(
        40 / (40 + 1.959963984540054**2)
    )
    assert "clipped" not in everyone.method and everyone.method.endswith("Wilson score interval of 40 of 40")
    # a mean stays within the scale's ends
    scale = ("1", "2", "3")
    top = {i: 2 for i in range(50)} | {50: 0}
    mean = estimates.dimension_estimates("d", scale, True, top, {i: 2 for i in range(10)})[0].judge_only
    assert mean.high == 3.0 and mean.low < 3.0 and mean.method.endswith("; clipped to [1, 3]")
    inside = estimates.on_scale(estimates.classical_mean(np.array([0.2, 0.4, 0.6])), 0.0, 1.0)
    assert inside == estimates.classical_mean(np.array([0.2, 0.4, 0.6]))
