"""The gates' noise model against independent computations: statsmodels' OLS (a persona-by-batch cell-means
model, whose contrast is the batch-mean change), its paired t test, its Holm procedure, a simulation of the
gate's error rates, and the floor that keeps identical runs from making an interval of no width."""

import math
import random
import statistics

import numpy as np
import pytest
from scipy import stats
from statsmodels.formula.api import ols
from statsmodels.stats.multitest import multipletests

from evaluation.runs import noise
from evaluation.runs.noise import Labelled, Observation, dimension_test, family_test, floor_variance, holm, plan


def batch(values: dict[str, list[float]], seeds: dict[str, list[int]] | None = None) -> list[Observation]:
    return [
        Observation(p, v, None if seeds is None else (p, "t", seeds[p][i]))
        for p, vs in values.items()
        for i, v in enumerate(vs)
    ]


BASE = {"ace": [6.0, 4.0, 5.0], "bo": [7.0, 9.0], "cy": [3.0, 5.0, 4.0, 6.0]}
CAND = {"ace": [4.0, 3.0], "bo": [8.0], "cy": [2.0, 4.0, 3.0]}


def ols_contrast(base, cand):
    """statsmodels' OLS of a persona-by-batch cell-means model; its contrast is the batch-mean change."""
    import pandas as pd

    rows = [(p, arm, v) for arm, data in (("b", base), ("c", cand)) for p, vs in data.items() for v in vs]
    frame = pd.DataFrame(rows, columns=["persona", "arm", "y"])
    fit = ols("y ~ 0 + C(persona):C(arm)", frame).fit()
    names = list(fit.params.index)
    contrast = np.zeros(len(names))
    for p in base:
        contrast[names.index(f"C(persona)[{p}]:C(arm)[c]")] += 1 / len(base)
        contrast[names.index(f"C(persona)[{p}]:C(arm)[b]")] -= 1 / len(base)
    return fit, fit.t_test(contrast)


def test_with_one_spread_and_equal_runs_the_unpaired_change_is_the_cell_means_contrast_of_ols():
    """Every persona with the same runs and the same measured spread: Welch's SE and degrees of freedom are the
    pooled ones, i.e. ordinary least squares' (statsmodels)."""
    base = {"ace": [6.0, 4.0, 5.0], "bo": [7.0, 9.0, 8.0], "cy": [3.0, 5.0, 4.0]}
    cand = {"ace": [4.0, 3.0], "bo": [8.0, 7.0], "cy": [2.0, 3.0]}
    fit, ref = ols_contrast(base, cand)
    got = dimension_test("d", batch(base), batch(cand), family=1)
    assert got is not None and not got.paired and got.borrowed == 0
    assert got.delta == pytest.approx(float(ref.effect[0]), abs=1e-4)
    assert got.se == pytest.approx(float(ref.sd[0, 0]), abs=1e-4)
    assert got.df == int(fit.df_resid) == 9
    # 10 x 10 x 10 ways to deal these runs: enough to permute (the permutation test's own checks are below); with
    # fewer, the one-sided t test decides: half OLS's two-sided p
    assert got.test == "permutation" and got.delta < 0
    fewer = dimension_test("d", batch({p: v[:2] for p, v in base.items()}), batch(cand), family=1)
    _, ref_fewer = ols_contrast({p: v[:2] for p, v in base.items()}, cand)
    assert fewer.test == "t" and fewer.p_value == pytest.approx(float(ref_fewer.pvalue) / 2, rel=1e-6)
    # the interval at 1 - 2 * alpha (family of one): statsmodels' conf_int at that level
    low, high = ref.conf_int(alpha=2 * noise.ALPHA)[0]
    assert (got.low, got.high) == (pytest.approx(low, abs=1e-3), pytest.approx(high, abs=1e-3))
    # the minimum detectable drop: t quantiles at alpha/D and the power, times the standard error
    three = dimension_test("d", batch(base), batch(cand), family=3)
    q = stats.t.ppf(1 - noise.ALPHA / 3, 9) + stats.t.ppf(noise.POWER, 9)
    assert three.mdd == pytest.approx(q * got.se, abs=2e-3) and three.mdd > got.mdd


def welch_written_out(base, cand):
    """Each persona's variance from its two cells (sum of squares over n_B + n_C - 2), the change's variance
    sum_p (1/n_B + 1/n_C) s_p^2 / P^2, and Satterthwaite's degrees of freedom (sum a_p)^2 / sum a_p^2 / f_p."""
    terms = []
    for p in base:
        b, c = np.asarray(base[p]), np.asarray(cand[p])
        f = len(b) + len(c) - 2
        s2 = (((b - b.mean()) ** 2).sum() + ((c - c.mean()) ** 2).sum()) / f
        terms.append(((1 / len(b) + 1 / len(c)) * s2 / len(base) ** 2, f))
    var = sum(a for a, _ in terms)
    return math.sqrt(var), var**2 / sum(a * a / f for a, f in terms)


def test_unpaired_personas_keep_their_own_spread_with_satterthwaites_degrees_of_freedom():
    base = {"ace": [6.0, 4.0, 5.0], "bo": [7.0, 9.0], "cy": [3.0, 5.0, 4.0, 6.0]}
    cand = {"ace": [4.0, 3.0], "bo": [8.0], "cy": [2.0, 4.0, 3.0]}
    got = dimension_test("d", batch(base), batch(cand), family=1)
    se, df = welch_written_out(base, cand)
    assert got.se == pytest.approx(se, abs=1e-4) and got.df == pytest.approx(df, abs=0.05)
    # 1,050 ways to deal these runs: the permutation test decides (the next test checks it)
    assert got.test == "permutation"
    # here the spreads differ: OLS's pooled error and its 9 degrees of freedom are not what is used
    fit, ref = ols_contrast(base, cand)
    assert abs(got.se - float(ref.sd[0, 0])) > 0.05 and got.df < int(fit.df_resid)
    # the spread concentrated in one persona: the degrees of freedom fall towards 1, the test widens
    steady = {p: [5.0, 5.0] for p in "abcdefg"}
    lumpy = dimension_test("d", batch({**steady, "h": [2.0, 8.0]}), batch({p: [5.0] for p in "abcdefgh"}), family=1)
    even = dimension_test(
        "d", batch({p: [5.0, 7.0] for p in "abcdefgh"}), batch({p: [6.0] for p in "abcdefgh"}), family=1
    )
    assert even.df == 8 and lumpy.df < 2.5


def test_a_persona_without_repeats_borrows_the_pooled_spread_as_one_term():
    base = {"ace": [6.0, 4.0], "bo": [7.0, 9.0, 8.0], "cy": [3.0], "dee": [5.0]}
    cand = {"ace": [5.0], "bo": [8.0], "cy": [3.0], "dee": [4.0]}
    got = dimension_test("d", batch(base), batch(cand), family=1)
    assert got.borrowed == 2
    pooled = (2.0 + 2.0) / 3  # ace: SS 2 on 1 df; bo: SS 2 on 2 df (candidates are single runs)
    ace, bo = (1 / 2 + 1) * 2.0, (1 / 3 + 1) * 1.0
    lent = (1 + 1 + 1 + 1) * pooled  # cy and dee, one run a batch, share the pooled estimate: one term
    var = (ace + bo + lent) / 16
    df = (ace + bo + lent) ** 2 / (ace**2 / 1 + bo**2 / 2 + lent**2 / 3)
    assert got.se == pytest.approx(math.sqrt(var), abs=1e-4) and got.df == pytest.approx(df, abs=0.05)


def test_paired_runs_are_compared_pair_by_pair_with_the_spread_of_the_differences():
    seeds = {"ace": [1, 2], "bo": [11], "cy": [21, 22]}
    base = {"ace": [6.0, 4.0], "bo": [7.0], "cy": [3.0, 5.0]}
    cand = {"ace": [5.0, 2.0], "bo": [7.0], "cy": [1.0, 4.0]}
    got = dimension_test("d", batch(base, seeds), batch(cand, seeds), family=1)
    assert got.paired and got.pairs == 5
    per_persona = [statistics.fmean([c - b for b, c in zip(base[p], cand[p], strict=True)]) for p in base]
    ref = stats.ttest_1samp(per_persona, 0.0, alternative="less")
    assert got.delta == pytest.approx(statistics.fmean(per_persona), abs=1e-4) and got.df == 2
    assert got.p_value == pytest.approx(float(ref.pvalue), rel=1e-6)
    # another seed for one run: no longer every run has its partner, so the comparison is unpaired
    other = dict(seeds, bo=[12])
    assert not dimension_test("d", batch(base, seeds), batch(cand, other), family=1).paired


def test_identical_runs_are_no_evidence_of_zero_spread():
    # item 2 of the issue: two runs that score the same made the interval [4, 4]
    same = {p: [4.0, 4.0] for p in ("ace", "bo", "cy", "dee")}
    got = dimension_test("d", batch(same), batch({p: [3.0] for p in same}), family=1)
    assert got.floored and got.variance == pytest.approx(floor_variance(), abs=1e-4) == pytest.approx(1 / 12, abs=1e-4)
    assert got.high > got.delta > got.low and got.high - got.low > 0.5
    # one point of resolution: the floor is its rounding variance; half a point, a quarter of it
    assert floor_variance(0.5) == pytest.approx(1 / 48)
    # a spread above the floor is used as measured
    wide = dimension_test("d", batch(BASE), batch(CAND), family=1)
    assert not wide.floored and wide.variance > floor_variance()


def test_holm_matches_statsmodels_and_a_missing_p_value_rejects_nothing():
    def adjusted(ps):  # Holm's adjusted p-values, written out: max over j <= i of (m - j + 1) p_(j)
        order = sorted(range(len(ps)), key=lambda i: ps[i])
        out, running = [0.0] * len(ps), 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
            out[i] = running
        return out

    rng = random.Random(4)
    for n in range(300):
        ps = [rng.random() ** 3 for _ in range(rng.randint(1, 7))]
        assert holm(ps, 0.05) == [a <= 0.05 for a in adjusted(ps)]
        if n < 5:  # and statsmodels' (slow to call on a busy machine: a few cases)
            assert holm(ps, 0.05) == list(multipletests(ps, alpha=0.05, method="holm")[0])
    assert holm([0.001, None, 0.02], 0.05) == [True, False, True]
    assert holm([0.0125, 0.0167], 0.05) == [True, True]  # 0.0125 <= 0.05/3? no: family of 2 -> 0.025, then 0.05
    assert holm([0.026, 0.03], 0.05) == [False, False]


def test_the_family_is_tested_together_and_only_drops_count():
    base = {d: batch({p: [5.0, 6.0, 5.0] for p in "abcdefgh"}) for d in ("x", "y", "z")}
    cand = {
        "x": batch({p: [2.0, 3.0] for p in "abcdefgh"}),  # a clear drop
        "y": batch({p: [8.0, 9.0] for p in "abcdefgh"}),  # a clear rise: not a regression
        "z": batch({p: [5.0, 6.0] for p in "abcdefgh"}),
    }
    tests = {t.dimension: t for t in family_test(base, cand)}
    assert tests["x"].significant and not tests["y"].significant and not tests["z"].significant
    assert {t.mdd for t in tests.values()} == {tests["x"].mdd}  # one family level: alpha / 3


def test_one_run_against_a_baseline_is_a_prediction_interval_from_the_baselines_spread():
    base = {p: [5.0, 7.0] for p in ("ace", "bo")}
    got = dimension_test("d", batch(base), batch({"ace": [6.0], "bo": [6.0]}), family=1)
    # s^2 = 2 (each pair differs by 2), df 2; SE^2 = 2/4 * 2 * (1/2 + 1/1)
    assert got.df == 2 and got.se == pytest.approx(math.sqrt(2 / 4 * 2 * 1.5), abs=1e-4)
    # no repeats anywhere: no spread, no test, no detectable drop
    blind = dimension_test("d", batch({"ace": [5.0]}), batch({"ace": [3.0]}), family=1)
    assert blind.mdd is None and blind.p_value is None and blind.df == 0


def mdd_written_out(s2, k, k_base=2, personas=8, level=noise.ALPHA):
    """SE^2 = s^2 / P^2 * P * (1/k_base + 1/k), df = P (k_base - 1) + P (k - 1)."""
    df = personas * (k_base - 1) + personas * (k - 1)
    se = math.sqrt(s2 / personas**2 * personas * (1 / k_base + 1 / k))
    return (stats.t.ppf(1 - level, df) + stats.t.ppf(noise.POWER, df)) * se


def upper(s2, df, confidence=0.8):
    """The upper one-sided confidence bound of a variance s2 on df degrees of freedom: df s2 / chi2_(1 - c)(df)."""
    return df * s2 / stats.chi2.ppf(1 - confidence, df)


def test_the_plan_is_the_fewest_runs_whose_detectable_drop_is_the_threshold():
    """The planner plans for the spread's upper 80% bound (8 personas x 1 df: 1.74 x the measured variance)."""
    found = plan({"d": batch({p: [5.0, 6.0] for p in "abcdefgh"})}, threshold=1.0)  # s^2 = 0.5
    s2 = upper(0.5, 8)
    assert s2 == pytest.approx(0.5 * 1.741, abs=1e-3)
    k = found.runs_per_persona
    assert k is not None and k > 1 and found.baseline_runs_per_persona is None
    assert mdd_written_out(s2, k) <= 1.0 < mdd_written_out(s2, k - 1)
    assert mdd_written_out(0.5, k - 1) <= 1.0  # on the estimate alone, fewer runs would have been planned
    assert found.detects["d"] == pytest.approx(mdd_written_out(s2, k), abs=0.01)
    assert found.detects_at_one["d"] == pytest.approx(mdd_written_out(s2, 1), abs=0.01)
    assert found.spread["d"] == pytest.approx(math.sqrt(0.5), abs=1e-3)  # the spread shown is the one measured
    # a baseline this noisy (s^2 = 4.5) keeps the drop above 1 whatever the batch: a new baseline of k runs each
    noisy = plan({"d": batch({p: [4.0, 7.0] for p in "abcdefgh"})}, threshold=1.0)
    assert mdd_written_out(upper(4.5, 8), 10_000) > 1.0
    fresh = noisy.baseline_runs_per_persona
    assert fresh is not None and fresh == noisy.runs_per_persona
    big = upper(4.5, 8)
    assert mdd_written_out(big, fresh, k_base=fresh) <= 1.0 < mdd_written_out(big, fresh - 1, k_base=fresh - 1)
    quiet = plan({"d": batch({p: [5.0, 5.5, 5.0, 5.5] for p in "abcdefgh"})}, threshold=1.0)
    assert quiet.runs_per_persona == 1 and quiet.baseline_runs_per_persona is None
    assert plan({"d": batch({"a": [5.0]})}, threshold=1.0) is None


def labelled_runs(rng, n, judge_shift, people_shift, base=6.0):
    """n labelled runs: people's values around base + people_shift, the judge's the same plus its own error
    (a bias of judge_shift and noise), both rounded to whole points as labels and scores are."""
    people = np.clip(np.rint(base + people_shift + rng.normal(0, 1.0, n)), 1, 10)
    judge = np.clip(np.rint(people + judge_shift + rng.normal(0, 0.7, n)), 1, 10)
    return [Labelled(float(f), float(y)) for f, y in zip(judge, people, strict=True)]


def test_the_correction_is_ppi_on_each_side_and_its_tuning_never_widens_the_interval():
    """With one persona and a fixed lambda, the corrected change is ppi_py's prediction-powered mean of the batch
    minus the baseline's (its point estimate, written by ppi_py); the variance is the formula written out; the
    tuned lambda's interval is no wider than lambda 0 (people alone) or 1 (plain PPI)."""
    from ppi_py import ppi_mean_pointestimate

    rng = np.random.default_rng(3)
    base_f, cand_f = [5.0, 6.0, 7.0, 6.0, 5.0, 6.0, 8.0, 6.0], [4.0, 5.0, 5.0, 6.0, 4.0, 5.0, 6.0, 5.0]
    base_l, cand_l = labelled_runs(rng, 5, 0.0, 0.0), labelled_runs(rng, 5, 1.0, -1.0)
    test = dimension_test("d", batch({"p": base_f}), batch({"p": cand_f}), family=1)
    for lam in (0.0, 0.4, 1.0):
        sides = []
        for f_all, lab in ((base_f, base_l), (cand_f, cand_l)):
            y, f = np.array([x.people for x in lab]), np.array([x.judge for x in lab])
            sides.append(float(ppi_mean_pointestimate(y, f, np.array(f_all), lam=lam)[0]))
        # our change at this lambda: lambda * (the judge's change over all runs) + the rectifiers' difference
        y_b, f_b = np.array([x.people for x in base_l]), np.array([x.judge for x in base_l])
        y_c, f_c = np.array([x.people for x in cand_l]), np.array([x.judge for x in cand_l])
        ours = lam * test.delta + (y_c - lam * f_c).mean() - (y_b - lam * f_b).mean()
        assert ours == pytest.approx(sides[1] - sides[0], abs=1e-9)
    delta, se, df, lam = noise.corrected_change(test.delta, test.se, test.df, (base_l, cand_l), floor_variance())
    y_b, f_b = np.array([x.people for x in base_l]), np.array([x.judge for x in base_l])
    y_c, f_c = np.array([x.people for x in cand_l]), np.array([x.judge for x in cand_l])

    def variance(at):
        rb, rc = y_b - at * f_b, y_c - at * f_c
        return at**2 * test.se**2 + max(rb.var(ddof=1), 1 / 12) / 5 + max(rc.var(ddof=1), 1 / 12) / 5

    assert 0 <= lam <= 1 and se == pytest.approx(math.sqrt(variance(lam)), rel=1e-9)
    assert delta == pytest.approx(lam * test.delta + (y_c - lam * f_c).mean() - (y_b - lam * f_b).mean(), abs=1e-9)
    assert variance(lam) <= min(variance(0.0), variance(1.0)) + 1e-12
    assert variance(lam) <= min(variance(x) for x in np.linspace(0, 1, 101)) + 1e-9  # the minimum over [0, 1]
    # too few labelled runs on a side: no correction
    assert noise.corrected_change(test.delta, test.se, test.df, (base_l[:2], cand_l), floor_variance()) is None
    corrected = dimension_test("d", batch({"p": base_f}), batch({"p": cand_f}), family=1, labels=(base_l, cand_l))
    assert corrected.labelled == (5, 5) and corrected.lam == pytest.approx(lam, abs=1e-3)
    assert corrected.delta == pytest.approx(delta, abs=1e-4) and corrected.se == pytest.approx(se, abs=1e-4)


def test_a_judge_kinder_to_the_new_tutor_is_caught_by_peoples_labels():
    """People see a drop of 1.5 while the judge, kinder to the new tutor by 1.2, sees 0.3. Judge alone, the gate
    misses it and its interval rarely covers the people's change; with 12 labelled runs a side, the corrected
    interval covers it about 95% of the time (simulation, 300 batches) and the gate flags it."""
    rng = np.random.default_rng(21)
    personas, trials = 8, 300
    covered = {"judge": 0, "corrected": 0}
    flagged = {"judge": 0, "corrected": 0}
    for _ in range(trials):
        means = rng.uniform(5, 7, personas)
        base = batch({f"p{p}": list(np.clip(np.rint(means[p] + rng.normal(0, 1, 3)), 1, 10)) for p in range(personas)})
        # the judge's view of the new tutor: people's -1.5 plus its kindness +1.2
        cand = batch(
            {f"p{p}": list(np.clip(np.rint(means[p] - 0.3 + rng.normal(0, 1, 3)), 1, 10)) for p in range(personas)}
        )
        labels = (labelled_runs(rng, 12, 0.0, 0.0), labelled_runs(rng, 12, 1.2, -1.5))
        for name, extra in (("judge", {}), ("corrected", {"labels": {"d": labels}})):
            (test,) = family_test({"d": base}, {"d": cand}, **extra)
            half = stats.t.ppf(0.975, test.df) * test.se
            covered[name] += abs(test.delta - (-1.5)) <= half
            flagged[name] += test.significant
    assert covered["corrected"] / trials >= 0.9 and covered["judge"] / trials <= 0.3
    assert flagged["corrected"] / trials >= 0.8 and flagged["judge"] / trials <= 0.3


def exact_permutation_p(base, cand):
    """Every way to deal each persona's runs between the batches (as many to the candidate as it had), written
    out with itertools: the share of deals whose batch-mean change is at most the observed one."""
    import itertools

    personas = list(base)
    observed = statistics.fmean(statistics.fmean(cand[p]) - statistics.fmean(base[p]) for p in personas)
    deals = []
    for p in personas:
        values = base[p] + cand[p]
        options = []
        for chosen in itertools.combinations(range(len(values)), len(cand[p])):
            c = [values[i] for i in chosen]
            b = [values[i] for i in range(len(values)) if i not in chosen]
            options.append(statistics.fmean(c) - statistics.fmean(b))
        deals.append(options)
    changes = [statistics.fmean(combo) for combo in itertools.product(*deals)]
    return sum(1 for c in changes if c <= observed + 1e-9) / len(changes)


def test_the_permutation_p_is_the_exact_one_within_its_draws_and_scipys_for_one_persona():
    """Unpaired: against every deal enumerated (3^8 = 6,561 for one candidate run and two baseline runs of 8
    personas, the bench's k=1 case), within 4 standard errors of 9,999 draws; for one persona, scipy's exact
    permutation_test. Paired: against every sign enumerated."""
    rng = np.random.default_rng(5)
    for _ in range(3):
        base = {f"p{i}": [float(x) for x in rng.integers(3, 9, 2)] for i in range(8)}
        cand = {f"p{i}": [float(rng.integers(2, 8))] for i in range(8)}
        got = dimension_test("d", batch(base), batch(cand), family=1)
        exact = exact_permutation_p(base, cand)
        assert got.test == "permutation"
        assert abs(got.p_value - exact) <= 4 * math.sqrt(exact * (1 - exact) / noise.PERMUTATIONS) + 2e-4
    one_b, one_c = [5.0, 6.0, 7.0, 5.0, 6.0, 8.0, 6.0], [4.0, 5.0, 5.0, 6.0, 4.0, 5.0]  # C(13, 6) = 1,716 deals
    ref = stats.permutation_test(
        (one_c, one_b),
        lambda c, b: np.mean(c) - np.mean(b),
        permutation_type="independent",
        alternative="less",
        n_resamples=np.inf,
    )
    got = noise.permutation_p([(one_b, one_c)], statistics.fmean(one_c) - statistics.fmean(one_b))
    assert abs(got - float(ref.pvalue)) <= 4 * math.sqrt(ref.pvalue * (1 - ref.pvalue) / noise.PERMUTATIONS) + 2e-4
    # paired: 10 pairs, 2^10 signs
    diffs = [[-1.0, -2.0, 0.0, -1.0, 1.0], [-1.0, 0.0, -2.0, -1.0, -1.0]]
    observed = statistics.fmean(statistics.fmean(d) for d in diffs)
    import itertools

    flat = [x for d in diffs for x in d]
    every = [
        statistics.fmean(
            statistics.fmean(s * x for s, x in zip(signs[i * 5 : i * 5 + 5], d, strict=True))
            for i, d in enumerate(diffs)
        )
        for signs in itertools.product((-1, 1), repeat=len(flat))
    ]
    exact = sum(1 for e in every if e <= observed + 1e-9) / len(every)
    got = noise.sign_flip_p(diffs, observed)
    assert abs(got - exact) <= 4 * math.sqrt(exact * (1 - exact) / noise.PERMUTATIONS) + 2e-4


def test_permutation_p_values_at_their_edges():
    """Ties count as at least as extreme, the p-value is (1 + hits) / (1 + draws): all runs equal gives exactly 1;
    a flip test's draws are +-1, so two equal differences reach -0.5 or below only when both flip (a quarter)."""
    assert noise.permutation_p([([5.0, 5.0, 5.0], [5.0])], 0.0) == 1.0
    assert noise.sign_flip_p([[0.0, 0.0]], 0.0) == 1.0
    quarter = noise.sign_flip_p([[1.0, 1.0]], -0.5)
    assert abs(quarter - 0.25) <= 4 * math.sqrt(0.25 * 0.75 / noise.PERMUTATIONS)
    # the lone low run is the candidate's in one deal of four: a p of a quarter, within the draws' error
    fourth = noise.permutation_p([([5.0, 5.0, 5.0], [1.0])], 1.0 - 5.0)
    assert abs(fourth - 0.25) <= 4 * math.sqrt(0.25 * 0.75 / noise.PERMUTATIONS)


def test_the_family_passes_its_level_power_and_resolution_on():
    base = {d: batch({p: [5.0, 6.0, 5.0] for p in "abcdefgh"}) for d in ("x", "y")}
    cand = {d: batch({p: [4.0, 5.0, 4.5] for p in "abcdefgh"}) for d in ("x", "y")}
    loose = {t.dimension: t for t in family_test(base, cand, alpha=0.2, power=0.5, resolution=0.5)}
    strict = {t.dimension: t for t in family_test(base, cand)}
    assert loose["x"].mdd < strict["x"].mdd and loose["x"].low > strict["x"].low  # alpha / 2 and power 0.5
    tiny = {t.dimension: t for t in family_test(base, cand, alpha=1e-9)}
    assert not tiny["x"].significant and strict["x"].significant


def test_the_plan_lends_the_pooled_spread_to_personas_without_repeats_at_its_upper_bound():
    """Personas with one baseline run plan with the pooled spread, raised to its upper bound as every other."""
    base = batch({**{p: [5.0, 6.0] for p in "abcd"}, **{p: [5.0] for p in "efgh"}})
    found = plan({"d": base}, threshold=1.0)
    f = 4  # the pooled spread's degrees of freedom: 4 personas x 1
    s2 = upper(0.5, f)
    # at k runs: personas a-d own (s2, 1 + k - 1 df), e-h borrow (s2, with 1 + k - 1 each as well)
    k = found.runs_per_persona
    se = math.sqrt(sum((1 / n + 1 / k) * s2 for n in [2] * 4 + [1] * 4) / 64)
    df = 4 * (1 + k - 1) + 4 * (k - 1)
    expected = (stats.t.ppf(1 - noise.ALPHA, df) + stats.t.ppf(noise.POWER, df)) * se
    assert found.detects["d"] == pytest.approx(expected, abs=0.01)
