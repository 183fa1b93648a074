"""The corrected estimate stratified by the judge's level: against StratPPI done with ppi_py level by level and the
post-stratified variance written out, its collapsing of thin levels, the rule that picks it over PPI++, and its
coverage on label next's picks (no simple random sample of the judged items: more from some levels than others)."""

import math
import statistics

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from evaluation.judging import estimates
from tests.judging.test_estimates_budget import stratified_by_hand

Z = statistics.NormalDist().inv_cdf(0.975)


def _levels(seed: int, items: int, labelled: int, places: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The judge's places of `items` items, people's values (numbers) on the first `labelled` of them."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, places, size=items)
    y = g[:labelled] + rng.normal(scale=0.5 + 0.3 * g[:labelled], size=labelled)
    return y, g[:labelled], g[labelled:]


@pytest.mark.parametrize(("seed", "places"), [(0, 2), (1, 3), (2, 5)])
def test_each_level_is_plain_ppi_by_ppi_py_and_the_levels_combine_by_their_share_of_the_judged_items(seed, places):
    y, g_lab, g_unl = _levels(seed, 400, 90, places)
    ours = estimates.stratified_mean(y, g_lab, g_unl)
    everything = np.concatenate([g_lab, g_unl])
    # StratPPI (Fisch et al. 2024): PPI within each stratum, weighted by its share; within a level the judge says
    # one number, so plain PPI there (ppi_py, lam=1) is the people's mean of that level
    parts = []
    for level in np.unique(everything):
        here = g_lab == level
        f = np.full(int(here.sum()), float(level))
        f_unl = np.full(int((g_unl == level).sum()), float(level))
        point = float(ppi_mean_pointestimate(y[here], f, f_unl, lam=1)[0])
        assert point == pytest.approx(float(y[here].mean()), abs=1e-12)
        parts.append((float((everything == level).mean()), point, statistics.variance(y[here].tolist()) / here.sum()))
    value = sum(w * m for w, m, _ in parts)
    variance = sum(w * w * v for w, _, v in parts) + sum(w * (m - value) ** 2 for w, m, _ in parts) / everything.size
    assert ours.value == pytest.approx(value, abs=1e-12)
    assert (ours.low, ours.high) == pytest.approx((value - Z * math.sqrt(variance), value + Z * math.sqrt(variance)))
    assert (ours.n, ours.unlabelled, ours.method, ours.lam) == (90, 310, estimates.STRATIFIED, None)
    assert (ours.value, ours.se) == pytest.approx(stratified_by_hand(y.tolist(), g_lab.tolist(), g_unl.tolist(), False))


def test_a_worked_example():
    # level 0: 6 judged, people (0, 0, 1) on three; level 1: 4 judged, people (1, 1) on two; N = 10
    y = np.array([0.0, 0.0, 1.0, 1.0, 1.0])
    g_lab, g_unl = np.array([0, 0, 0, 1, 1]), np.array([0, 0, 0, 1, 1])
    # a mean: W = (0.6, 0.4), means (1/3, 1); estimate 0.6/3 + 0.4 = 0.6
    # se^2 = 0.36 x (1/3)/3 + 0.16 x 0/2 + (0.6 x (1/3 - 0.6)^2 + 0.4 x (1 - 0.6)^2) / 10 = 0.04 + 0.0106667
    mean = estimates.stratified_mean(y, g_lab, g_unl)
    assert mean.value == pytest.approx(0.6) and mean.se == pytest.approx(math.sqrt(0.04 + 0.0106667), rel=1e-5)
    # a share: each level's spread with a 0 and a 1 added: level 0 (0, 0, 1, 0, 1) var 0.3, level 1 (1, 1, 0, 1)
    # var 0.25; se^2 = 0.36 x 0.3/3 + 0.16 x 0.25/2 + 0.0106667
    share = estimates.stratified_mean(y, g_lab, g_unl, share=True)
    assert share.value == pytest.approx(0.6)
    assert share.se == pytest.approx(math.sqrt(0.036 + 0.02 + 0.0106667), rel=1e-5)


def test_a_level_with_fewer_than_two_labels_joins_a_neighbour_and_says_so():
    y = np.array([0.0, 1.0, 1.0, 2.0, 2.0, 3.0])
    g_lab, g_unl = np.array([0, 0, 1, 1, 2, 3]), np.array([0, 1, 2, 2, 3])
    strata = estimates.strata_of(np.concatenate([g_lab, g_unl]), g_lab)
    # 0 holds 2: its own; 1 holds 2: its own; 2 holds 1, 3 holds 1: together they hold 2
    assert strata == [(0,), (1,), (2, 3)]
    ours = estimates.stratified_mean(y, g_lab, g_unl)
    assert ours.method == f"{estimates.STRATIFIED}; {estimates.COLLAPSED_NOTE}"
    assert (ours.value, ours.se) == pytest.approx(stratified_by_hand(y.tolist(), g_lab.tolist(), g_unl.tolist(), False))
    # the last level alone with one label joins the stratum below it
    assert estimates.strata_of(np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 1, 1, 2])) == [(0,), (1, 2)]
    # the first level with one label takes the next ones in until they hold two
    assert estimates.strata_of(np.array([0, 1, 2, 2, 2]), np.array([0, 1, 2, 2])) == [(0, 1), (2,)]
    assert estimates.strata_of(np.array([0, 1, 2, 2]), np.array([0, 1, 2])) == [(0, 1, 2)]
    assert estimates.strata_of(np.array([0, 1, 2]), np.array([0])) == []
    assert estimates.strata_of(np.array([0, 0, 1]), np.array([0, 0])) == [(0, 1)]  # two labels are enough
    one = estimates.stratified_mean(np.array([1.0]), np.array([0]), np.array([1]))
    assert (one.value, one.n, one.method) == (None, 1, estimates.STRATIFIED) and "at least 2" in one.reason
    # two labels, nothing unlabelled: the people's mean, said so
    both = estimates.stratified_mean(np.array([0.0, 1.0]), np.array([0, 1]), np.array([], dtype=np.int64))
    assert both.method.startswith(estimates.CLASSICAL) and both.value == 0.5
    # every level's labels equal and the levels alike: no width, said so
    flat = estimates.stratified_mean(np.array([1.0, 1.0, 1.0, 1.0]), np.array([0, 0, 1, 1]), np.array([0, 1]))
    assert flat.se == 0.0 and flat.method == f"{estimates.STRATIFIED}; {estimates.NO_WIDTH_NOTE}"
    # every judged item labelled: the people's own mean and interval
    everyone = estimates.stratified_mean(y, g_lab, np.array([], dtype=np.int64))
    people = estimates.classical_mean(y)
    assert (everyone.value, everyone.low, everyone.high) == (people.value, people.low, people.high)
    assert everyone.method.startswith(estimates.CLASSICAL) and everyone.unlabelled == 0
    with pytest.raises(ValueError, match="same items"):
        estimates.stratified_mean(y, g_lab[:3], g_unl)


def test_the_stratified_estimate_is_used_where_every_level_holds_two_labels_else_ppi_plus_plus():
    values = np.array([0.0, 1.0, 2.0])
    y_places = np.array([0, 1, 1, 2, 2, 2])
    # two labels on each level: stratified
    g_lab, g_unl = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 2, 2])
    assert estimates.stratifiable(g_lab, g_unl)
    assert estimates.corrected_mean(values, g_lab, y_places, g_unl).method == estimates.STRATIFIED
    # level 2 holds one label of its three judged items: PPI++ (it assumes a random sample of the judged items)
    g_lab = np.array([0, 0, 1, 1, 1, 2])
    assert not estimates.stratifiable(g_lab, g_unl)
    got = estimates.corrected_mean(values, g_lab, y_places, g_unl)
    y, f, f_unl = values[y_places], values[g_lab], values[g_unl]
    low, high = ppi_mean_ci(y, f, f_unl, alpha=0.05)
    assert got.method == estimates.PPI_PLUS_PLUS and (got.low, got.high) == pytest.approx((low[0], high[0]))
    # a level whose only judged item is labelled has all it can: stratified (that level joins a neighbour)
    g_lab, g_unl = np.array([0, 0, 1, 1, 1, 2]), np.array([0, 1])
    assert estimates.stratifiable(g_lab, g_unl)
    assert estimates.COLLAPSED_NOTE in estimates.corrected_mean(values, g_lab, y_places, g_unl).method
    # nothing unlabelled: the people's mean (dimension_estimates says so), never a stratified one
    assert not estimates.stratifiable(g_lab, np.array([], dtype=np.int64))
    # a share's levels get the plus-two spread: wider than the plain one on the same labels
    share = np.array([0.0, 0.0, 1.0])
    g_lab, g_unl = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 2, 2])
    plus_two = estimates.corrected_mean(share, g_lab, np.array([0, 0, 2, 2, 2, 2]), g_unl)
    plain = estimates.stratified_mean(share[np.array([0, 0, 2, 2, 2, 2])], g_lab, g_unl)
    assert plus_two.se > plain.se > 0.0


def _population(rng: np.random.Generator, items: int) -> tuple[dict[int, int], dict[int, int]]:
    """bench/queues.py's population: the judge's level, then people's level given it (close agreement on the best
    level, a wide spread elsewhere)."""
    judged = rng.choice(3, size=items, p=(0.3, 0.3, 0.4))
    given = ((0.5, 0.25, 0.25), (1 / 3, 1 / 3, 1 / 3), (0.0, 0.05, 0.95))
    people = np.array([rng.choice(3, p=given[f]) for f in judged])
    return dict(enumerate(judged.tolist())), dict(enumerate(people.tolist()))


def test_on_label_nexts_picks_the_interval_covers_as_it_says_where_the_peoples_own_mean_does_not():
    truth = 0.3 * 0.25 + 0.3 / 3 + 0.4 * 0.95  # the population's share of people's best level
    values = np.array([0.0, 0.0, 1.0])
    hits = {"stratified": 0, "people's mean": 0}
    seeds = 300
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        judged, truth_of = _population(rng, 1000)
        start = rng.choice(1000, size=30, replace=False).tolist()
        people = {i: truth_of[i] for i in start}
        picked, _ = estimates.label_next(values, ("No", "Somewhat", "Yes"), judged, people, count=100, seed=seed)
        labelled = sorted([*start, *picked])
        rest = [i for i in judged if i not in set(labelled)]
        g_lab = np.array([judged[i] for i in labelled])
        y = np.array([truth_of[i] for i in labelled])
        g_unl = np.array([judged[i] for i in rest])
        for name, got in (
            ("stratified", estimates.corrected_mean(values, g_lab, y, g_unl)),
            ("people's mean", estimates.classical_mean(values[y])),
        ):
            hits[name] += int(got.low <= truth <= got.high)
    # 300 intervals: a 95% one covers 285 on average, 277 or more 95% of the time
    assert hits["stratified"] / seeds >= 0.92, hits
    # the picks are no simple random sample: the people's own mean over them misses (about 81% here)
    assert hits["people's mean"] / seeds < 0.88, hits
