"""Agreement statistics against scikit-learn, scipy, the krippendorff package and a published worked example."""

import numpy as np
import pytest
from krippendorff import alpha as k_alpha
from scipy.stats import rankdata, spearmanr
from scipy.stats import t as t_dist
from sklearn.metrics import cohen_kappa_score

from evaluation.judging import agreement


@pytest.fixture
def pair():
    rng = np.random.default_rng(7)
    human = rng.integers(0, 5, 300)
    judge = np.clip(human + rng.integers(-1, 2, 300) * (rng.random(300) < 0.5), 0, 4)
    return judge.astype(np.int64), human.astype(np.int64)


def test_kappa_rho_and_rates_match_the_libraries_on_the_same_arrays(pair):
    judge, human = pair
    result = agreement.judge_vs_humans(judge, human, 5)
    assert result.kappa.value == pytest.approx(cohen_kappa_score(judge, human, weights="quadratic"))
    assert result.rho.value == pytest.approx(spearmanr(judge, human).statistic)
    assert result.exact.value == pytest.approx(np.mean(judge == human))
    assert result.within_one.value == pytest.approx(np.mean(np.abs(judge - human) <= 1))
    assert result.kappa.n == 300
    assert 0.5 < result.kappa.value < 0.95  # correlated, imperfect
    assert sum(map(sum, result.confusion)) == 300 and result.confusion[0][0] == np.sum((human == 0) & (judge == 0))


def qwk_closed_form(a, b):
    """Quadratic-weighted kappa written out per row: 1 - mean((a - b)^2) / mean over all pairs (i, j) of
    (a_i - b_j)^2, the latter being mean(a^2) + mean(b^2) - 2 mean(a) mean(b)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    chance = (a * a).mean(-1) + (b * b).mean(-1) - 2 * a.mean(-1) * b.mean(-1)
    return 1 - ((a - b) ** 2).mean(-1) / chance


def spearman_by_ranks(a, b):
    """Spearman's rho per row: Pearson's r of scipy's average ranks."""
    ra, rb = rankdata(a, axis=-1), rankdata(b, axis=-1)
    ra, rb = ra - ra.mean(-1, keepdims=True), rb - rb.mean(-1, keepdims=True)
    return (ra * rb).sum(-1) / np.sqrt((ra * ra).sum(-1) * (rb * rb).sum(-1))


@pytest.fixture
def wide_pair():
    """A judge off by up to three levels, so exact, within-one and the rest all differ."""
    rng = np.random.default_rng(17)
    human = rng.integers(0, 5, 300)
    judge = np.clip(human + rng.integers(-3, 4, 300) * (rng.random(300) < 0.6), 0, 4)
    return judge.astype(np.int64), human.astype(np.int64)


@pytest.mark.parametrize("data", ["pair", "wide_pair"])
def test_every_interval_is_the_2_5_and_97_5_percentiles_of_the_statistic_over_the_resamples(data, request):
    judge, human = request.getfixturevalue(data)
    result = agreement.judge_vs_humans(judge, human, 5)
    idx = agreement.resample_indices(len(judge))
    assert idx.shape == (1000, 300)
    assert result.exact.value == np.mean(judge == human) and result.within_one.value == np.mean(abs(judge - human) <= 1)
    assert result.kappa.value == pytest.approx(cohen_kappa_score(judge, human, labels=range(5), weights="quadratic"))
    assert result.rho.value == pytest.approx(spearmanr(judge, human).statistic)
    a, b = judge[idx], human[idx]
    kappas, rhos = qwk_closed_form(a, b), spearman_by_ranks(a, b)
    # the written-out formulas are the libraries' own on these resamples (checked on a stride of them)
    for r in range(0, 1000, 97):
        assert kappas[r] == pytest.approx(cohen_kappa_score(a[r], b[r], labels=range(5), weights="quadratic"))
        assert rhos[r] == pytest.approx(spearmanr(a[r], b[r]).statistic)
    exact = (a == b).mean(1)
    within = (np.abs(a - b) <= 1).mean(1)
    for estimate, samples in (
        (result.kappa, kappas),
        (result.rho, rhos),
        (result.exact, exact),
        (result.within_one, within),
    ):
        low, high = np.percentile(samples, [2.5, 97.5])
        assert (estimate.low, estimate.high) == (pytest.approx(low), pytest.approx(high))
        assert estimate.low <= estimate.value <= estimate.high and estimate.n == 300


def test_the_vectorised_resamples_equal_the_libraries_resample_by_resample(pair):
    judge, human = pair
    idx = agreement.resample_indices(len(judge), resamples=25, seed=3)
    kappas = agreement.qwk_resampled(judge, human, 5, idx)
    rhos = agreement.spearman_resampled(judge, human, 5, idx)
    for r in range(25):
        a, b = judge[idx[r]], human[idx[r]]
        assert kappas[r] == pytest.approx(cohen_kappa_score(a, b, labels=range(5), weights="quadratic"))
        assert rhos[r] == pytest.approx(spearmanr(a, b).statistic)


def test_alpha_resamples_equal_the_krippendorff_package():
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 4, 120)
    units = [[int(np.clip(t + rng.integers(-1, 2), 0, 3)) for _ in range(rng.integers(1, 4))] for t in truth]
    counts = agreement.value_counts(units, 4)
    pairable = counts[counts.sum(1) >= 2]
    idx = agreement.resample_indices(len(pairable), resamples=20, seed=5)
    alphas = agreement.alpha_resampled(pairable, 4, idx)
    for r in range(20):
        expected = k_alpha(value_counts=pairable[idx[r]], value_domain=range(4), level_of_measurement="ordinal")
        assert alphas[r] == pytest.approx(expected)


def test_an_interval_needs_at_least_half_the_resamples_defined():
    # two items, 0 and 1 for both: a resample of both items has kappa and rho 1; one item twice, no variation,
    # neither (nan). The value stands either way; the interval only when at least half the resamples give one.
    judge = human = np.array([0, 1], dtype=np.int64)
    both, one = [0, 1], [1, 1]
    half = agreement.judge_vs_humans(judge, human, 2, np.array([both, one, both[::-1], [0, 0]]))
    for estimate in (half.kappa, half.rho):
        assert (estimate.value, estimate.low, estimate.high, estimate.n) == pytest.approx((1.0, 1.0, 1.0, 2))
    fewer = agreement.judge_vs_humans(judge, human, 2, np.array([both, one, [0, 0], one]))
    for estimate in (fewer.kappa, fewer.rho):
        assert estimate.value == pytest.approx(1.0) and (estimate.low, estimate.high, estimate.n) == (None, None, 2)
        assert str(estimate) == "1.00 n=2"  # no interval printed
    assert (fewer.exact.low, fewer.exact.high) == (1.0, 1.0)  # defined on every resample
    assert str(half.kappa) == "1.00 [1.00, 1.00] n=2"


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the example with missing values:
# four coders, twelve units, values 1-5. Published: nominal 0.743, ordinal 0.815, interval 0.849.
K2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_alpha_on_the_published_worked_example():
    units = [[coder[u] - 1 for coder in K2011 if coder[u] is not None] for u in range(12)]
    estimate = agreement.alpha_estimate(units, 5)
    assert estimate.value == pytest.approx(0.815, abs=5e-4)
    assert estimate.n == 11  # unit 12 has one value: not pairable
    counts = agreement.value_counts(units, 5)
    pairable = counts[counts.sum(1) >= 2]
    identity = np.arange(len(pairable))[None, :]
    assert agreement.alpha_resampled(pairable, 5, identity)[0] == pytest.approx(0.815, abs=5e-4)


def test_undefined_statistics_say_so_instead_of_inventing_a_number():
    same = np.zeros(10, dtype=np.int64)
    result = agreement.judge_vs_humans(same, same, 3)
    assert result.kappa.value is None and result.rho.value is None and result.exact.value == 1.0
    assert result.kappa.n == 10 and result.rho.n == 10
    assert agreement.judge_vs_humans(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 3).kappa.n == 0


# --- the alternative annotator test ---------------------------------------------------------------
# The procedure as Calderon, Reichart and Dror (2025) publish it, written out here from the paper and the
# authors' example code (annotator -> instance -> label, as they take it), to check the app's figure by figure.


def paper_alt_test(llm, humans_by_annotator, scoring, epsilon, q=0.05):
    def accuracy(pred, anns):
        return sum(1 for a in anns if a == pred) / len(anns)

    def neg_rmse(pred, anns):
        return -((sum((pred - a) ** 2 for a in anns) / len(anns)) ** 0.5)

    score = accuracy if scoring == "accuracy" else neg_rmse
    who = {}
    for h, anns in humans_by_annotator.items():
        for i in anns:
            who.setdefault(i, []).append(h)
    keep = {i for i, hs in who.items() if len(hs) >= 2 and i in llm}
    rows = {}
    for h, anns in humans_by_annotator.items():
        instances = [i for i in anns if i in keep]
        if len(instances) < 30:
            continue
        w_f, w_h = [], []
        for i in instances:
            others = [humans_by_annotator[o][i] for o in who[i] if o != h]
            human_score, llm_score = score(anns[i], others), score(llm[i], others)
            w_f.append(1 if llm_score >= human_score else 0)
            w_h.append(1 if human_score >= llm_score else 0)
        d = [a - b for a, b in zip(w_h, w_f, strict=True)]
        n = len(d)
        mean = sum(d) / n
        sd = (sum((x - mean) ** 2 for x in d) / (n - 1)) ** 0.5
        if sd == 0:  # the t statistic is +-inf (p 1 or 0), or 0/0: no p-value
            p = None if mean == epsilon else (0.0 if mean < epsilon else 1.0)
        else:
            p = float(t_dist.cdf((mean - epsilon) / (sd / n**0.5), n - 1))
        rows[h] = {"instances": n, "rho_f": sum(w_f) / n, "rho_h": sum(w_h) / n, "p": p}
    # Benjamini-Yekutieli step-up: the largest k with p_(k) <= k/m * q / (1 + 1/2 + ... + 1/m)
    m = len(rows)
    harmonic = sum(1 / k for k in range(1, m + 1))
    ranked = sorted((r["p"], h) for h, r in rows.items() if r["p"] is not None)
    cut = max((k for k, (p, _) in enumerate(ranked, 1) if p <= k / m * q / harmonic), default=0)
    for h in rows:
        rows[h]["rejected"] = h in {name for _, name in ranked[:cut]}
    omega = sum(r["rejected"] for r in rows.values()) / m if m else None
    rho = sum(r["rho_f"] for r in rows.values()) / m if m else None
    return omega, rho, rows


def by_annotator(humans):
    out = {}
    for item, labels in humans.items():
        for annotator, value in labels.items():
            out.setdefault(annotator, {})[item] = value
    return out


def assert_same_as_the_paper(ceiling, judge, humans, levels, scoring, epsilon):
    numbers = [float(level) for level in levels] if scoring == "neg_rmse" else list(range(len(levels)))
    omega, rho, rows = paper_alt_test(
        {i: numbers[v] for i, v in judge.items()},
        {a: {i: numbers[v] for i, v in anns.items()} for a, anns in by_annotator(humans).items()},
        scoring,
        epsilon,
    )
    assert ceiling.alignment == {"accuracy": "accuracy", "neg_rmse": "negative RMSE"}[scoring]
    assert ceiling.epsilon == epsilon and ceiling.q == 0.05
    assert ceiling.winning_rate == pytest.approx(omega) and ceiling.advantage_probability == pytest.approx(rho)
    assert [a.annotator for a in ceiling.annotators] == sorted(rows)
    for a in ceiling.annotators:
        want = rows[a.annotator]
        assert (a.instances, a.rejected) == (want["instances"], want["rejected"]), a
        assert (a.rho_f, a.rho_h) == (pytest.approx(want["rho_f"]), pytest.approx(want["rho_h"])), a
        assert a.p == (None if want["p"] is None else pytest.approx(want["p"], rel=1e-9, abs=1e-12)), a
    assert ceiling.verdict == (agreement.PASSES if omega >= 0.5 else agreement.FAILS)
    return rows


def noisy_people(n_items, annotators, levels, noise, seed, missing=0.0):
    """Each person labels the item's true level, off by one now and then; some labels missing."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, levels, n_items)
    humans = {}
    for i in range(n_items):
        labels = {}
        for j in range(annotators):
            if rng.random() < missing:
                continue
            shift = int(rng.random() < noise) * int(rng.choice([-1, 1]))
            labels[f"a{j}"] = int(np.clip(truth[i] + shift, 0, levels - 1))
        humans[i] = labels
    return truth, humans, rng


YSN = ("No", "To some extent", "Yes")
ONE_TO_TEN = tuple(str(n) for n in range(1, 11))


def test_a_worked_categorical_example_matches_the_paper_figure_by_figure():
    truth, humans, rng = noisy_people(48, 4, 3, 0.3, seed=21, missing=0.15)
    # a judge right about two times in three, else a random level; one item it did not judge
    judge = {i: int(t) if rng.random() < 0.67 else int(rng.integers(0, 3)) for i, t in enumerate(truth)}
    del judge[5]
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.15)
    rows = assert_same_as_the_paper(ceiling, judge, humans, YSN, "accuracy", 0.15)
    assert len(rows) == 4 and all(30 <= r["instances"] < 48 for r in rows.values())
    # p-values that tell the procedures apart: all four under 0.05, but only two under their BY cut-offs
    # (k/4 * 0.05 / H_4 = 0.006, 0.012, 0.018, 0.024), so the winning rate is 0.5, exactly the pass mark
    assert sorted(round(r["p"], 4) for r in rows.values()) == [0.0038, 0.0092, 0.0196, 0.0497]
    assert ceiling.winning_rate == 0.5 and ceiling.verdict == agreement.PASSES


def test_a_worked_numeric_example_matches_the_paper_figure_by_figure():
    truth, humans, rng = noisy_people(56, 5, 10, 0.5, seed=5, missing=0.2)
    judge = {i: int(np.clip(t + rng.choice([-2, -1, 0, 0, 0, 1]), 0, 9)) for i, t in enumerate(truth)}
    for epsilon in (0.1, 0.2):
        ceiling = agreement.alternative_annotator_test(judge, humans, ONE_TO_TEN, epsilon=epsilon)
        rows = assert_same_as_the_paper(ceiling, judge, humans, ONE_TO_TEN, "neg_rmse", epsilon)
        assert len(rows) == 5


def test_a_numeric_scale_with_uneven_steps_is_scored_on_its_numbers():
    levels = ("0", "1", "2", "10")
    assert agreement.scale_numbers(levels) == (0.0, 1.0, 2.0, 10.0)
    assert agreement.scale_numbers(YSN) is None and agreement.scale_numbers(("1", "2", "many")) is None
    truth, humans, rng = noisy_people(40, 3, 4, 0.4, seed=8)
    judge = {i: int(rng.integers(0, 4)) if rng.random() < 0.3 else int(t) for i, t in enumerate(truth)}
    ceiling = agreement.alternative_annotator_test(judge, humans, levels, epsilon=0.2)
    rows = assert_same_as_the_paper(ceiling, judge, humans, levels, "neg_rmse", 0.2)
    # on places 0-3 instead of the numbers, the figures would differ: the test is not blind to the numbers
    places = paper_alt_test(judge, by_annotator(humans), "neg_rmse", 0.2)[2]
    assert any(places[a]["p"] != pytest.approx(rows[a]["p"]) for a in rows)


def always_one_level_off(n_levels, n_items=40, annotators=3):
    """People who agree exactly on every item, and a judge one level above them (below at the top)."""
    truth = [i % n_levels for i in range(n_items)]
    humans = {i: {f"p{j}": t for j in range(annotators)} for i, t in enumerate(truth)}
    judge = {i: t + 1 if t < n_levels - 1 else t - 1 for i, t in enumerate(truth)}
    return judge, humans


@pytest.mark.parametrize("levels", [ONE_TO_TEN, YSN, ("1", "2", "3")])
def test_a_judge_always_one_level_off_fails_beside_people_who_agree(levels):
    judge, humans = always_one_level_off(len(levels))
    ceiling = agreement.alternative_annotator_test(judge, humans, levels, epsilon=0.2)
    assert ceiling.verdict == agreement.FAILS
    assert ceiling.winning_rate == 0.0 and ceiling.advantage_probability == 0.0 and ceiling.annotators_tested == 3
    assert all(a.rho_h == 1.0 and a.p == 1.0 and not a.rejected for a in ceiling.annotators)
    assert_same_as_the_paper(ceiling, judge, humans, levels, "accuracy" if levels == YSN else "neg_rmse", 0.2)


@pytest.mark.parametrize("levels", [ONE_TO_TEN, YSN])
def test_a_judge_that_gives_the_majority_label_passes(levels):
    k = len(levels)
    truth, humans, _ = noisy_people(60, 5, k, 0.35, seed=3)
    majority = {i: max(set(v := list(labels.values())), key=lambda x: (v.count(x), -x)) for i, labels in humans.items()}
    ceiling = agreement.alternative_annotator_test(majority, humans, levels, epsilon=0.2)
    assert ceiling.verdict == agreement.PASSES and ceiling.winning_rate >= 0.8
    assert ceiling.advantage_probability > 0.8
    assert_same_as_the_paper(ceiling, majority, humans, levels, "accuracy" if levels == YSN else "neg_rmse", 0.2)


def two_camps(judge_agrees_on):
    """Annotators x1, x2 always give Yes and y1, y2 always No; the judge gives Yes on the first
    `judge_agrees_on` of 30 items and To some extent on the rest. Left out, an x ties the judge where it
    says Yes and beats it elsewhere; a y loses to it where it says Yes and beats it elsewhere."""
    humans = {i: {"x1": 2, "x2": 2, "y1": 0, "y2": 0} for i in range(30)}
    judge = {i: 2 if i < judge_agrees_on else 1 for i in range(30)}
    return judge, humans


def test_the_judge_passes_at_a_winning_rate_of_exactly_one_half():
    judge, humans = two_camps(21)
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    wins = {a.annotator: a.rejected for a in ceiling.annotators}
    assert wins == {"x1": False, "x2": False, "y1": True, "y2": True}
    assert ceiling.winning_rate == 0.5 and ceiling.verdict == agreement.PASSES
    assert ceiling.advantage_probability == pytest.approx((0.7 + 0.7 + 0.7 + 0.7) / 4)
    assert_same_as_the_paper(ceiling, judge, humans, YSN, "accuracy", 0.2)
    judge, humans = two_camps(14)  # now it loses to everyone
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    assert ceiling.winning_rate == 0.0 and ceiling.verdict == agreement.FAILS


def test_benjamini_yekutieli_steps_up_with_the_harmonic_penalty():
    # m = 4: H = 25/12, cut-offs k/4 * 0.05 / H = 0.006, 0.012, 0.018, 0.024
    assert agreement.by_rejections([0.001, 0.01, 0.03, 0.04]) == [True, True, False, False]  # BH: all four
    assert agreement.by_rejections([0.04, 0.03, 0.01, 0.001]) == [False, False, True, True]
    # step-up: 0.007 misses its own cut-off but is rejected with 0.017 under the third one
    assert agreement.by_rejections([0.9, 0.017, 0.008, 0.007]) == [False, True, True, True]
    assert agreement.by_rejections([0.0061, 0.9, 0.9, 0.9]) == [False] * 4
    assert agreement.by_rejections([0.006, 0.9, 0.9, 0.9]) == [True, False, False, False]
    # a missing p-value counts in m and is never rejected: m = 2, H = 1.5, cut-offs 0.01667, 0.0333
    assert agreement.by_rejections([None, 0.02]) == [False, False]
    assert agreement.by_rejections([None, 0.016]) == [False, True]
    assert agreement.by_rejections([]) == []
    assert agreement.by_rejections([0.05]) == [True]  # at the cut-off, rejected (<=)


def test_fewer_than_30_instances_per_annotator_is_not_enough():
    truth, humans, _ = noisy_people(29, 3, 3, 0.3, seed=4)
    judge = {i: int(t) for i, t in enumerate(truth)}
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    assert ceiling.verdict == agreement.NOT_ENOUGH and ceiling.winning_rate is None
    assert ceiling.advantage_probability is None and ceiling.annotators == ()
    assert "a0 (29)" in ceiling.detail and "30" in ceiling.detail
    # instances with one person, or that the judge did not label, do not count towards the 30
    truth, humans, _ = noisy_people(40, 3, 3, 0.3, seed=4)
    judge = {i: int(t) for i, t in enumerate(truth)}
    for i in range(5):
        humans[i] = {"a0": humans[i]["a0"]}
    for i in range(5, 11):
        del judge[i]
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    assert ceiling.verdict == agreement.NOT_ENOUGH and "a0 (29), a1 (29), a2 (29)" in ceiling.detail
    del humans[4]
    judge[10] = int(truth[10])  # back to 30 for a1 and a2, a0 still 29 + 1
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    assert [a.annotator for a in ceiling.annotators] == ["a0", "a1", "a2"]
    assert [a.instances for a in ceiling.annotators] == [30, 30, 30]


def test_an_annotator_under_30_is_skipped_and_named():
    truth, humans, _ = noisy_people(40, 3, 3, 0.3, seed=6)
    for i in range(15):
        del humans[i]["a2"]
    judge = {i: int(t) for i, t in enumerate(truth)}
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    assert [a.annotator for a in ceiling.annotators] == ["a0", "a1"]
    assert "a2 (25)" in ceiling.detail
    assert_same_as_the_paper(ceiling, judge, humans, YSN, "accuracy", 0.2)


def test_two_annotators_give_a_result_with_a_caution():
    truth, humans, _ = noisy_people(50, 2, 3, 0.3, seed=2)
    judge = {i: int(t) for i, t in enumerate(truth)}
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    assert ceiling.verdict in (agreement.PASSES, agreement.FAILS) and ceiling.annotators_tested == 2
    assert "less reliable" in ceiling.detail and "3 or more" in ceiling.detail
    assert_same_as_the_paper(ceiling, judge, humans, YSN, "accuracy", 0.2)
    truth, humans, _ = noisy_people(50, 3, 3, 0.3, seed=2)
    ceiling = agreement.alternative_annotator_test({i: int(t) for i, t in enumerate(truth)}, humans, YSN, epsilon=0.2)
    assert "less reliable" not in ceiling.detail


def test_no_p_value_is_no_win_and_is_said():
    # epsilon 0 and every item a tie: d is 0 throughout, the t statistic 0/0
    humans = {i: {"a0": i % 3, "a1": i % 3, "a2": i % 3} for i in range(30)}
    judge = {i: i % 3 for i in range(30)}
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.0)
    assert [a.p for a in ceiling.annotators] == [None, None, None]
    assert ceiling.winning_rate == 0.0 and ceiling.verdict == agreement.FAILS and "no p-value" in ceiling.detail
    assert_same_as_the_paper(ceiling, judge, humans, YSN, "accuracy", 0.0)


def test_epsilon_comes_from_the_setting_and_bad_values_are_refused(settings):
    judge, humans = two_camps(21)
    settings.EVALUATION = {**settings.EVALUATION, "ALT_TEST_EPSILON": 0.1}
    assert agreement.alternative_annotator_test(judge, humans, YSN).epsilon == 0.1
    for bad in (-0.1, 1.0, float("nan"), "0.2"):
        with pytest.raises(ValueError, match="epsilon"):
            agreement.alternative_annotator_test(judge, humans, YSN, epsilon=bad)


def test_the_ceiling_as_a_dict_names_the_papers_figures():
    judge, humans = two_camps(21)
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    data = ceiling.as_dict()
    assert data["detail"] == ceiling.detail and data["detail"].startswith("the judge wins against 2 of 4")
    assert {k: data[k] for k in ("verdict", "winning_rate", "epsilon", "alignment", "q", "annotators_tested")} == {
        "verdict": "passes",
        "winning_rate": 0.5,
        "epsilon": 0.2,
        "alignment": "accuracy",
        "q": 0.05,
        "annotators_tested": 4,
    }
    assert data["advantage_probability"] == pytest.approx(0.7)
    x1 = data["annotators"][0]
    assert x1["annotator"] == "x1" and x1["instances"] == 30 and x1["by_rejected"] is False
    assert (x1["rho_f"], x1["rho_h"]) == (pytest.approx(0.7), 1.0) and x1["p"] == pytest.approx(
        t_dist.cdf((0.3 - 0.2) / (np.std([0] * 21 + [1] * 9, ddof=1) / 30**0.5), 29)
    )


def test_the_lower_median_is_the_lower_of_the_two_middle_values():
    for values in ([3, 1], [0, 2, 1, 3], [4, 4, 1, 2, 9, 0], [2], [5, 1, 3]):
        assert agreement.lower_median(values) == np.percentile(values, 50, method="lower")
    # the judge's value of an item with repeats 0 and 2 is 0; the people's of labels 1, 2, 2, 1 is 1
    result = agreement.dimension_agreement(
        "Tone", YSN, {1: [2, 0], 2: [0, 2, 2]}, {1: {"a": 1, "b": 2, "c": 2, "d": 1}, 2: {"a": 2}}, epsilon=0.2
    )
    assert result.judge_vs_humans.confusion == ((0, 0, 0), (1, 0, 0), (0, 0, 1))
    assert result.disagreements == ((1, 0, 1.0),)


def test_one_dimension_end_to_end():
    truth, humans, _ = noisy_people(60, 3, 3, 0.2, seed=9)
    judge = {i: [int(t), int(t), int(np.clip(t - 1, 0, 2))] for i, t in enumerate(truth)}
    result = agreement.dimension_agreement("Tone", ("Offensive", "Neutral", "Encouraging"), judge, humans)
    assert result.humans.n == 60 and 0.3 < result.humans.value < 1.0
    assert result.self_consistency.n == 60 and result.self_consistency.value < 1.0
    assert result.judge_vs_humans.kappa.n == 60
    assert all(j != h for _, j, h in result.disagreements)


def test_the_disagreements_are_the_ten_largest_gaps_on_items_both_labelled():
    humans = {i: {"a": i % 10, "b": i % 10} for i in range(30)}
    judge = {i: [(i * 7) % 10] for i in range(30)} | {99: [0]}  # item 99: judged, never labelled
    humans[50] = {"a": 1}  # labelled, never judged
    result = agreement.dimension_agreement("Score", ONE_TO_TEN, judge, humans, epsilon=0.2)
    gaps = [(i, (i * 7) % 10, float(i % 10)) for i in range(30) if (i * 7) % 10 != i % 10]
    gaps.sort(key=lambda t: (-abs(t[1] - t[2]), t[0]))
    assert result.disagreements == tuple(gaps[:10]) and result.judge_vs_humans.kappa.n == 30
    assert abs(result.disagreements[0][1] - result.disagreements[0][2]) == 6 and len(gaps) > 10
    empty = agreement.dimension_agreement("Tone", YSN, {}, {}, epsilon=0.2)
    assert empty.self_consistency is None and empty.humans is None and empty.ceiling.verdict == agreement.NOT_ENOUGH


def test_the_detail_line_says_what_was_tested_and_why_to_be_careful():
    truth, humans, _ = noisy_people(40, 3, 3, 0.3, seed=6)
    for i in range(15):
        del humans[i]["a2"]
    ceiling = agreement.alternative_annotator_test({i: int(t) for i, t in enumerate(truth)}, humans, YSN, epsilon=0.2)
    wins = sum(a.rejected for a in ceiling.annotators)
    assert ceiling.detail == (
        f"the judge wins against {wins} of 2 annotators tested (epsilon 0.2, accuracy, Benjamini-Yekutieli at "
        "q = 0.05); only 2 annotators tested: the test recommends 3 or more, as with fewer the judge is compared "
        "with one or two people rather than a consensus, and the result is less reliable; skipped, under 30 "
        "instances: a2 (25)"
    )
    humans = {i: {"a0": i % 3, "a1": i % 3, "a2": i % 3} for i in range(30)}
    ceiling = agreement.alternative_annotator_test({i: i % 3 for i in range(30)}, humans, YSN, epsilon=0.0)
    assert ceiling.detail == (
        "the judge wins against 0 of 3 annotators tested (epsilon 0, accuracy, Benjamini-Yekutieli at q = 0.05); "
        "no p-value (every difference equal to epsilon), not a win: a0, a1, a2"
    )
    ceiling = agreement.alternative_annotator_test({}, {}, YSN, epsilon=0.2)
    assert "(instances per annotator: none)" in ceiling.detail


# --- each figure as printed, and the edges of each statistic ------------------------------------------------


def test_an_estimate_prints_its_value_interval_and_n():
    estimate = agreement.Estimate(0.5, 0.25, 0.75, 12)
    assert estimate.as_dict() == {"value": 0.5, "low": 0.25, "high": 0.75, "n": 12}
    assert str(estimate) == "0.50 [0.25, 0.75] n=12"
    assert str(agreement.Estimate(0.5, 0.25, None, 12)) == "0.50 n=12"  # half an interval is none
    assert str(agreement.Estimate(0.5, None, 0.75, 12)) == "0.50 n=12"
    assert str(agreement.Estimate(None, None, None, 3)) == "- (n=3)"
    assert agreement.Estimate(None, None, None, 3).as_dict() == {"value": None, "low": None, "high": None, "n": 3}


def kripp(units, k):
    counts = np.zeros((len(units), k))
    for u, values in enumerate(units):
        for v in values:
            counts[u, v] += 1
    return k_alpha(value_counts=counts, value_domain=range(k), level_of_measurement="ordinal")


def test_alpha_at_its_edges_one_unit_two_levels_one_level_nothing_pairable():
    # one pairable unit with two different values: alpha is defined (0)
    one_unit = agreement.alpha_estimate([[0, 1], [2]], 3)
    assert (one_unit.value, one_unit.n) == (pytest.approx(kripp([[0, 1]], 3)), 1) and one_unit.value == 0.0
    # exactly two levels used: defined
    two_levels = [[0, 0], [1, 1], [0, 1], [1, 1, 0]]
    assert agreement.alpha_estimate(two_levels, 3).value == pytest.approx(kripp(two_levels, 3))
    assert agreement.alpha_estimate(two_levels, 3).value == pytest.approx(0.2)  # neither 0 nor 1
    # one level only: no variation, no alpha
    assert agreement.alpha_estimate([[1, 1], [1, 1, 1]], 3) == agreement.Estimate(None, None, None, 2)
    # nothing pairable: no alpha, on no units
    assert agreement.alpha_estimate([[1], [2]], 3) == agreement.Estimate(None, None, None, 0)
    assert agreement.alpha_estimate([], 3) == agreement.Estimate(None, None, None, 0)


def test_one_dimension_passes_its_name_levels_epsilon_and_two_raters_on():
    truth, humans, _ = noisy_people(40, 2, 3, 0.3, seed=12)  # exactly two annotators
    judge = {i: [int(t), int(np.clip(t + (i % 4 == 0), 0, 2))] for i, t in enumerate(truth)}  # exactly two repeats
    result = agreement.dimension_agreement("Tone", YSN, judge, humans, epsilon=0.1)
    assert (result.dimension, result.levels) == ("Tone", YSN)
    assert result.humans.value == pytest.approx(kripp([list(v.values()) for v in humans.values()], 3))
    assert result.self_consistency.value == pytest.approx(kripp(list(judge.values()), 3))
    assert result.humans.n == 40 and result.self_consistency.n == 40
    assert result.ceiling == agreement.alternative_annotator_test(
        {i: min(v) for i, v in judge.items()}, humans, YSN, epsilon=0.1
    )
    assert result.ceiling.epsilon == 0.1 and result.ceiling.annotators_tested == 2


def test_a_level_no_one_used_still_counts_in_kappa_and_the_confusion_matrix():
    # levels 0, 1 and 3 of 0-3: quadratic weights are on the places (3 is three steps from 0, not two)
    rng = np.random.default_rng(23)
    human = rng.choice([0, 1, 3], 200)
    judge = np.where(rng.random(200) < 0.6, human, rng.choice([0, 1, 3], 200))
    result = agreement.judge_vs_humans(judge, human, 4)
    assert result.kappa.value == pytest.approx(cohen_kappa_score(judge, human, labels=range(4), weights="quadratic"))
    assert result.kappa.value == pytest.approx(qwk_closed_form(judge, human))
    assert result.kappa.value != pytest.approx(cohen_kappa_score(judge, human, weights="quadratic"))
    table = np.zeros((4, 4), dtype=int)
    np.add.at(table, (human, judge), 1)  # rows: the people's level; columns: the judge's
    assert result.confusion == tuple(map(tuple, table.tolist())) and result.confusion[2] == (0, 0, 0, 0)


def test_no_items_give_empty_estimates_and_a_zero_matrix_the_size_of_the_scale():
    none = np.array([], dtype=np.int64)
    empty = agreement.Estimate(None, None, None, 0)
    assert agreement.judge_vs_humans(none, none, 3) == agreement.JudgeVsHumans(
        empty, empty, empty, empty, ((0, 0, 0), (0, 0, 0), (0, 0, 0))
    )
    assert agreement.qwk(none, none, 3) is None and agreement.spearman(none, none) is None
    same = np.ones(5, dtype=np.int64)
    assert agreement.qwk(same, same, 3) is None and agreement.spearman(same, same) is None  # no variation
    assert agreement.spearman(np.array([0, 1]), np.array([1, 0])) == pytest.approx(-1.0)  # two items suffice


def test_alpha_resamples_leave_out_units_with_one_value_and_any_resample_shape():
    # units with a single value are not pairable: Krippendorff's alpha ignores them, and so must the resamples
    units = [[0, 1], [2], [1, 1, 2], [0], [2, 2], [0, 0, 1]]
    counts = agreement.value_counts(units, 3)
    rng = np.random.default_rng(2)
    idx = np.vstack([rng.integers(0, len(units), (6, len(units))), np.zeros((1, len(units)), dtype=np.int64)])
    idx[-2] = [0, 2, 4, 5, 5, 0]  # neither of the last two rows draws the last unit
    resampled = agreement.alpha_resampled(counts, 3, idx)
    for r in range(len(idx)):
        assert resampled[r] == pytest.approx(
            k_alpha(value_counts=counts[idx[r]], value_domain=range(3), level_of_measurement="ordinal"), nan_ok=True
        ), r


def test_one_annotator_tested_is_named_in_the_singular_and_every_skipped_one_listed():
    # a0 labels all 40 items; a1 the first 20 and a2 the last 20, so only a0 reaches 30
    truth, humans, _ = noisy_people(40, 3, 3, 0.3, seed=14)
    for i in range(40):
        del humans[i]["a2" if i < 20 else "a1"]
    judge = {i: int(t) for i, t in enumerate(truth)}
    ceiling = agreement.alternative_annotator_test(judge, humans, YSN, epsilon=0.2)
    assert [a.annotator for a in ceiling.annotators] == ["a0"]
    wins = sum(a.rejected for a in ceiling.annotators)
    assert ceiling.detail == (
        f"the judge wins against {wins} of 1 annotators tested (epsilon 0.2, accuracy, Benjamini-Yekutieli at "
        "q = 0.05); only 1 annotator tested: the test recommends 3 or more, as with fewer the judge is compared "
        "with one or two people rather than a consensus, and the result is less reliable; skipped, under 30 "
        "instances: a1 (20), a2 (20)"
    )
    assert_same_as_the_paper(ceiling, judge, humans, YSN, "accuracy", 0.2)
