"""The "how many labels?" and "label next" statistics: the width curve, the stratified pick rule and the
per-dimension budget, each against the procedure written out here by hand (the same seeded generator drawn in the
same order, the interval widths from the formulas in plain Python, Neyman allocation by the judge's level step by
step) and on worked numbers. No database: the functions take plain values."""

import math
import statistics

import numpy as np
import pytest

from evaluation.judging import estimates

Z = statistics.NormalDist().inv_cdf(0.975)


# --- the procedures written out ---------------------------------------------------------------------------


def ladder(available: int) -> list[int]:
    """10, 20, 40, ... below what is labelled (at most 2560), then all of it; nothing below two labels."""
    if available < 2:
        return []
    sizes, size = [], 10
    while size < available and size <= 2560:
        sizes.append(size)
        size *= 2
    return [*sizes, available]


def people_width(y: list[float]) -> float:
    """The classical CLT interval's width: 2 z sd / sqrt(n), the sd dividing by n."""
    return 2 * Z * statistics.pstdev(y) / math.sqrt(len(y))


def corrected_width(y: list[float], f_lab: list[float], f_unl: list[float]) -> float:
    """PPI++ for a mean (Angelopoulos, Duchi and Zrnic 2024), as ppi_py computes it; with no unlabelled item, the
    people's own interval."""
    n, big_n = len(y), len(f_unl)
    if big_n == 0:
        return people_width(y)
    y_bar, f_bar = statistics.fmean(y), statistics.fmean(f_lab)
    covariance = sum((a - y_bar) * (b - f_bar) for a, b in zip(y, f_lab, strict=True)) / n
    pooled = statistics.variance(f_lab + f_unl)
    lam = 0.0 if pooled == 0 else min(1.0, max(0.0, covariance / ((1 + n / big_n) * pooled)))
    rectifier = [a - lam * b for a, b in zip(y, f_lab, strict=True)]
    se = math.sqrt(statistics.pvariance([lam * b for b in f_unl]) / big_n + statistics.pvariance(rectifier) / n)
    return 2 * Z * se


def share_scale(values) -> bool:
    """A label's 0/1 indicator rather than a scale's numbers."""
    return all(float(v) in (0.0, 1.0) for v in values)


def level_sd(ys: list[float], share: bool) -> float:
    """The sample sd of one level's people's values; a share's with one 0 and one 1 added (Agresti and Caffo's
    plus-two), so a level whose labels all agree keeps a spread."""
    return statistics.stdev(ys + [0.0, 1.0] if share else ys)


def stratified_by_hand(y: list[float], g_lab: list[int], g_unl: list[int], share: bool) -> tuple[float, float]:
    """(estimate, se) of the mean stratified by the judge's level (StratPPI with one stratum per level: each
    stratum's estimate is its people's mean). A level with under two labels joins the stratum below it (the
    lowest joins the one above): sum W_h mean_h, se^2 = sum W_h^2 sd_h^2 / n_h + sum W_h (mean_h - est)^2 / N."""
    levels = sorted(set(g_lab) | set(g_unl))
    groups: list[list[int]] = []
    for level in levels:
        if groups and sum(g_lab.count(v) for v in groups[-1]) < 2:
            groups[-1].append(level)
        else:
            groups.append([level])
    if len(groups) > 1 and sum(g_lab.count(v) for v in groups[-1]) < 2:
        last = groups.pop()
        groups[-1] += last
    big_n = len(g_lab) + len(g_unl)
    parts = []
    for group in groups:
        ys = [a for a, g in zip(y, g_lab, strict=True) if g in group]
        weight = sum(1 for g in g_lab + g_unl if g in group) / big_n
        parts.append((weight, statistics.fmean(ys), level_sd(ys, share) ** 2 / len(ys)))
    estimate = sum(w * m for w, m, _ in parts)
    variance = sum(w * w * v for w, _, v in parts) + sum(w * (m - estimate) ** 2 for w, m, _ in parts) / big_n
    return estimate, math.sqrt(variance)


def stratifiable_by_hand(g_lab: list[int], g_unl: list[int]) -> bool:
    """Some item unlabelled, and every level of the judge's holds two labels, or all of its items when it has fewer."""
    return bool(g_unl) and all(g_lab.count(v) >= min(2, g_lab.count(v) + g_unl.count(v)) for v in set(g_lab + g_unl))


def corrected_by_hand(values, g_lab: list[int], y_lab: list[int], g_unl: list[int]) -> float:
    """The corrected interval's width: stratified by the judge's level where every level holds at least two
    labels (or all of its items, when it has fewer), else PPI++ (corrected_width)."""
    y = [float(values[v]) for v in y_lab]
    if stratifiable_by_hand(g_lab, g_unl):
        return 2 * Z * stratified_by_hand(y, g_lab, g_unl, share_scale(values))[1]
    return corrected_width(y, [float(values[v]) for v in g_lab], [float(values[v]) for v in g_unl])


def percentile(xs: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    s = sorted(xs)
    rank = p / 100 * (len(s) - 1)
    below = math.floor(rank)
    above = min(below + 1, len(s) - 1)
    return s[below] + (s[above] - s[below]) * (rank - below)


def curve_by_hand(values, judged, people, *, draws, seed):
    """(labelled, median corrected width, its 10th and 90th percentiles, median people-only width) per size."""
    labelled = sorted(i for i in judged if i in people)
    rest = [v for i, v in judged.items() if i not in people]
    n = len(labelled)
    rng = np.random.default_rng(seed)
    out = []
    for size in ladder(n):
        widths, alone = [], []
        for _ in range(1 if size == n else draws):
            chosen = set(rng.choice(n, size=size, replace=False).tolist())
            y = [people[labelled[k]] for k in sorted(chosen)]
            g_lab = [judged[labelled[k]] for k in sorted(chosen)]
            g_unl = rest + [judged[labelled[k]] for k in range(n) if k not in chosen]
            widths.append(corrected_by_hand(values, g_lab, y, g_unl))
            alone.append(people_width([float(values[v]) for v in y]))
        out.append(
            (size, statistics.median(widths), percentile(widths, 10), percentile(widths, 90), statistics.median(alone))
        )
    return out


def label_next_by_hand(values, levels, judged, people, *, count, seed):
    """Neyman allocation by the judge's level: level h's share of (labels now + count) is N_h sd_h / sum N sd,
    sd_h the spread of the people's values among its labelled items (the judge's value is the same across a
    level, so lambda times it does not move that spread); a level with under two labels takes the largest sd
    seen, at least 0.5. Each next label goes to the level furthest below its share, the lower level on a tie;
    within a level, the first unlabelled item of a seeded permutation of its items (levels permuted in the
    order of their smallest item)."""
    members: dict[int, list[int]] = {}
    for item in sorted(judged):
        members.setdefault(judged[item], []).append(item)
    sd = {}
    for v, items in members.items():
        ys = [float(values[people[i]]) for i in items if i in people]
        sd[v] = level_sd(ys, share_scale(values)) if len(ys) >= 2 else None
    fallback = max([0.5] + [s for s in sd.values() if s is not None])
    weight = {v: len(items) * (fallback if sd[v] is None else sd[v]) for v, items in members.items()}
    have = {v: len([i for i in items if i in people]) for v, items in members.items()}
    total = sum(have.values()) + count
    weights = sum(weight.values())
    target = {v: total * weight[v] / weights if weights else 0.0 for v in members}
    rng = np.random.default_rng(seed)
    pools = {v: [i for i in rng.permutation(items).tolist() if i not in people] for v, items in members.items()}
    strata = [(levels[v], len(members[v]), have[v], sd[v], round(target[v], 1)) for v in sorted(members)]
    picked: list[int] = []
    while len(picked) < count:
        best = None
        for v in sorted(members):
            if pools[v] and (best is None or target[v] - have[v] > target[best] - have[best]):
                best = v
        if best is None:
            break
        picked.append(pools[best].pop(0))
        have[best] += 1
    return picked, strata


def assert_curve(points, expected):
    assert [p.labelled for p in points] == [e[0] for e in expected]
    for p, (_, median, low, high, alone) in zip(points, expected, strict=True):
        assert (p.corrected, p.corrected_low, p.corrected_high, p.people_only) == pytest.approx(
            (median, low, high, alone), rel=1e-9, abs=1e-12
        ), f"the point at {p.labelled} labels"


def assert_strata(strata, expected):
    assert [(s.level, s.judged, s.labelled) for s in strata] == [e[:3] for e in expected]
    for s, e in zip(strata, expected, strict=True):
        assert (s.residual_sd is None) == (e[3] is None), f"level {s.level}'s sd"
        if e[3] is not None:
            assert s.residual_sd == pytest.approx(e[3], rel=1e-9, abs=1e-12), f"level {s.level}'s sd"
        assert s.target == e[4], f"level {s.level}'s target"


def noisy(seed: int, items: int, labelled: int, places: int, miss: float) -> tuple[dict[int, int], dict[int, int]]:
    """A judge's places on a scale and people's on the first `labelled` items, off by one place at rate miss."""
    rng = np.random.default_rng(seed)
    judged = {i: int(v) for i, v in enumerate(rng.integers(0, places, size=items))}
    people = {}
    for i in range(labelled):
        off = int(rng.choice([-1, 1])) if rng.random() < miss else 0
        people[i] = min(places - 1, max(0, judged[i] + off))
    return judged, people


# --- the label counts tried ---------------------------------------------------------------------------------


def test_the_label_counts_double_from_ten_below_what_is_labelled_and_end_at_all_of_it():
    assert estimates.budget_sizes(0) == [] and estimates.budget_sizes(1) == []
    assert estimates.budget_sizes(2) == [2]
    assert estimates.budget_sizes(10) == [10]
    assert estimates.budget_sizes(11) == [10, 11]
    assert estimates.budget_sizes(200) == [10, 20, 40, 80, 160, 200]
    assert estimates.budget_sizes(2560) == [10, 20, 40, 80, 160, 320, 640, 1280, 2560]
    assert estimates.budget_sizes(2561) == [10, 20, 40, 80, 160, 320, 640, 1280, 2560, 2561]
    assert estimates.budget_sizes(9000)[-2:] == [2560, 9000]
    for available in (*range(0, 50), 81, 160, 161, 639, 640, 641, 5000):
        assert estimates.budget_sizes(available) == ladder(available), available


# --- the width curve ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "seed", "items", "labelled", "places", "draws"),
    [
        ([0.0, 1.0], 3, 130, 45, 2, 7),  # a share, labels from four sizes
        ([1.0, 2.0, 3.0, 4.0, 5.0], 8, 300, 90, 5, 12),  # a 1-5 scale
        ([0.0, 0.0, 1.0], 11, 60, 23, 3, 5),  # one label's share: two places count 0
    ],
)
def test_the_width_curve_is_the_seeded_subsampling_done_by_hand(values, seed, items, labelled, places, draws):
    judged, people = noisy(seed, items, labelled, places, miss=0.3)
    values = np.array(values)
    points = estimates.budget_curve(values, judged, people, draws=draws, seed=seed + 1)
    assert_curve(points, curve_by_hand(values, judged, people, draws=draws, seed=seed + 1))
    # the last point is the full estimate, one draw: its percentiles are its median
    last = points[-1]
    assert last.corrected_low == last.corrected == last.corrected_high
    # the seed and the draws are used: another seed gives other widths, as do other draws
    assert points != estimates.budget_curve(values, judged, people, draws=draws, seed=seed + 2)
    assert points != estimates.budget_curve(values, judged, people, draws=draws + 1, seed=seed + 1)


def test_the_width_curve_on_defaults_draws_forty_times_with_seed_zero():
    judged, people = noisy(21, 200, 50, 3, miss=0.25)
    values = np.array([1.0, 2.0, 3.0])
    points = estimates.budget_curve(values, judged, people)
    assert_curve(points, curve_by_hand(values, judged, people, draws=40, seed=0))


def test_the_width_curve_with_every_item_labelled_ends_at_the_people_interval():
    judged, people = noisy(4, 35, 35, 3, miss=0.4)
    values = np.array([0.0, 1.0, 2.0])
    points = estimates.budget_curve(values, judged, people, draws=6, seed=9)
    assert_curve(points, curve_by_hand(values, judged, people, draws=6, seed=9))
    assert [p.labelled for p in points] == [10, 20, 35]
    # no unlabelled item is left at 35: the corrected interval is the people's own
    y = [values[people[i]] for i in sorted(people)]
    assert points[-1].corrected == pytest.approx(people_width(y)) == points[-1].people_only


def test_the_width_curve_counts_only_judged_items_with_labels_and_needs_two():
    values = np.array([0.0, 1.0])
    judged = {i: i % 2 for i in range(30)}
    # item 100 is labelled but was never judged: it is not a labelled item of this curve
    people = {0: 0, 1: 0, 100: 1}
    points = estimates.budget_curve(values, judged, people, draws=5, seed=1)
    assert_curve(points, curve_by_hand(values, judged, {0: 0, 1: 0}, draws=5, seed=1))
    assert [p.labelled for p in points] == [2]
    assert estimates.budget_curve(values, judged, {0: 0, 100: 1}, draws=5, seed=1) == []
    assert estimates.budget_curve(values, judged, {}, draws=5, seed=1) == []


def test_a_worked_width_with_two_labels_and_two_unlabelled_items():
    values = np.array([0.0, 1.0])
    judged = {1: 0, 2: 1, 3: 0, 4: 1}
    people = {1: 0, 2: 1}
    (point,) = estimates.budget_curve(values, judged, people, draws=3, seed=0)
    # y = (0, 1), f = (0, 1), f_unlabelled = (0, 1): Cov_n = 1/4, pooled variance 1/3, 1 + n/N = 2, so
    # lambda = (1/4) / (2/3) = 3/8; se^2 = Var(3/8 f_unl)/2 + Var(y - 3/8 f)/2 = (9/256 + 25/256)/2 = 17/256
    assert point.labelled == 2
    assert point.corrected == pytest.approx(2 * Z * math.sqrt(17 / 256))
    assert point.people_only == pytest.approx(2 * Z * 0.5 / math.sqrt(2))


# --- label next ---------------------------------------------------------------------------------------------


def test_label_next_on_worked_numbers():
    values = np.array([1.0, 2.0, 3.0])
    levels = ("1", "2", "3")
    # level 0: 20 judged, 4 labelled with people (1, 1, 2, 2): sd = stdev = 0.5774
    # level 1: 10 judged, 1 labelled: no sd yet, so the largest seen (0.5774, above 0.5)
    # level 2: 5 judged, 3 labelled, people all 3: sd 0
    judged = {i: 0 for i in range(20)} | {i: 1 for i in range(20, 30)} | {i: 2 for i in range(30, 35)}
    people = {0: 0, 1: 0, 2: 1, 3: 1, 20: 1, 30: 2, 31: 2, 32: 2}
    picked, strata = estimates.label_next(values, levels, judged, people, count=6, seed=2)
    sd = statistics.stdev([1, 1, 2, 2])
    # weights 20 sd, 10 sd, 0; total 8 labels + 6: targets 14 x 2/3 = 9.33, 14 x 1/3 = 4.67, 0
    assert_strata(strata, [("1", 20, 4, sd, 9.3), ("2", 10, 1, None, 4.7), ("3", 5, 3, 0.0, 0.0)])
    # below target by 5.33 and 3.67: level 0, 0 (3.33 < 3.67), 1, 0 (3.33 > 2.67), 1 (2.33 < 2.67), 0
    assert [judged[i] for i in picked] == [0, 0, 1, 0, 1, 0]
    assert len(set(picked)) == 6 and not set(picked) & set(people)
    assert picked == label_next_by_hand(values, levels, judged, people, count=6, seed=2)[0]


def test_a_tie_goes_to_the_lower_level_and_unexplored_levels_share_alike():
    values = np.array([0.0, 1.0])
    judged = {i: 0 for i in range(10)} | {i: 1 for i in range(10, 20)}
    one, strata = estimates.label_next(values, ("No", "Yes"), judged, {}, count=1, seed=0)
    assert [judged[i] for i in one] == [0]
    assert [(s.level, s.judged, s.labelled, s.residual_sd, s.target) for s in strata] == [
        ("No", 10, 0, None, 0.5),
        ("Yes", 10, 0, None, 0.5),
    ]
    four, _ = estimates.label_next(values, ("No", "Yes"), judged, {}, count=4, seed=0)
    assert [judged[i] for i in four] == [0, 1, 0, 1]
    assert four[:1] == one


def test_an_unexplored_level_takes_the_largest_spread_seen_but_at_least_one_half():
    values = np.array([0.0, 1.0, 2.0, 3.0])
    levels = ("a", "b", "c", "d")
    judged = {i: 0 for i in range(12)} | {i: 3 for i in range(12, 24)}
    # level "a" spreads less than one half (people 0 x 7 and 1: sd 0.354); level "d" has no label: 0.5
    people = {i: 0 for i in range(7)} | {7: 1}
    picked, strata = estimates.label_next(values, levels, judged, people, count=4, seed=5)
    sd = statistics.stdev([0] * 7 + [1])
    # weights 12 sd and 12 x 0.5; 8 labels + 4: targets 12 sd / (sd + 0.5) = 4.97 and 7.03
    assert_strata(strata, [("a", 12, 8, sd, 5.0), ("d", 12, 0, None, 7.0)])
    assert [judged[i] for i in picked] == [3, 3, 3, 3]
    assert picked == label_next_by_hand(values, levels, judged, people, count=4, seed=5)[0]
    # level "a" spreads more than one half (people 0, 0, 0, 1, 1, 1, 1, 1: sd 0.518): "d" takes that spread, and
    # the two levels share the 12 labels alike
    people = {i: 0 for i in range(3)} | {i: 1 for i in range(3, 8)}
    picked, strata = estimates.label_next(values, levels, judged, people, count=4, seed=5)
    sd = statistics.stdev([0] * 3 + [1] * 5)
    assert sd > 0.5
    assert_strata(strata, [("a", 12, 8, sd, 6.0), ("d", 12, 0, None, 6.0)])
    assert picked == label_next_by_hand(values, levels, judged, people, count=4, seed=5)[0]


def test_label_next_stops_when_every_item_is_labelled_and_with_no_spread_fills_the_fewest_labelled():
    values = np.array([1.0, 2.0])  # a scale's mean: labels that agree have no spread
    judged = {i: 0 for i in range(6)} | {i: 1 for i in range(6, 10)}
    people = {0: 0, 1: 0, 2: 0, 6: 1, 7: 1}
    # every sd 0: no weight anywhere, every target 0, so the level with the fewest labels goes first
    picked, strata = estimates.label_next(values, ("No", "Yes"), judged, people, count=10, seed=4)
    assert_strata(strata, [("No", 6, 3, 0.0, 0.0), ("Yes", 4, 2, 0.0, 0.0)])
    assert [judged[i] for i in picked] == [1, 0, 1, 0, 0]  # 2 v 3: Yes; 3 v 3: No; 3 v 4: Yes; then only No
    assert sorted(picked) == [3, 4, 5, 8, 9]
    assert picked == label_next_by_hand(values, ("No", "Yes"), judged, people, count=10, seed=4)[0]
    assert estimates.label_next(values, ("No", "Yes"), judged, people | dict.fromkeys(range(10), 0)) == (
        [],
        [
            estimates.Stratum("No", 6, 6, 0.0, 0.0),
            estimates.Stratum("Yes", 4, 4, 0.0, 0.0),
        ],
    )


@pytest.mark.parametrize(("seed", "count"), [(0, 10), (1, 25), (2, 3), (3, 60)])
def test_label_next_is_the_rule_written_out(seed, count):
    values = np.array([0.0, 0.5, 1.0, 3.0])
    judged, people = noisy(seed, 150, 40, 4, miss=0.5)
    # the judge's levels out of order in the items, a level people never labelled, and a label on an item
    # the judge did not judge (it counts nowhere)
    judged = {(149 - i if i % 3 else i): v for i, v in judged.items()} | {200: 3, 201: 3, 202: 3}
    people = people | {500: 1}
    levels = ("w", "x", "y", "z")
    picked, strata = estimates.label_next(values, levels, judged, people, count=count, seed=seed)
    expected, expected_strata = label_next_by_hand(values, levels, judged, people, count=count, seed=seed)
    assert picked == expected
    assert_strata(strata, expected_strata)
    assert len(picked) == min(count, sum(1 for i in judged if i not in people))


def test_label_next_on_defaults_picks_ten_with_seed_zero():
    values = np.array([0.0, 1.0, 2.0])
    judged, people = noisy(7, 90, 20, 3, miss=0.3)
    picked, strata = estimates.label_next(values, ("a", "b", "c"), judged, people)
    expected, expected_strata = label_next_by_hand(values, ("a", "b", "c"), judged, people, count=10, seed=0)
    assert picked == expected and len(picked) == 10
    assert_strata(strata, expected_strata)


# --- per dimension ----------------------------------------------------------------------------------------------


def _table(data: list[estimates.DimensionData], keep: frozenset[int] | None, rows=None) -> estimates.EstimateTable:
    return estimates.EstimateTable(
        rubric="r",
        rubric_version=1,
        configuration="c",
        configuration_id=1,
        selection="all judged items",
        items=0,
        labelled=0,
        labelled_of=0,
        rows=estimates.table_rows(data, keep) if rows is None else rows,
        data=tuple(data),
        keep=keep,
    )


def _values(d: estimates.DimensionData) -> dict[str, np.ndarray]:
    """Each estimand's value of each place, written out: the scale's numbers, or a 0/1 indicator per label."""
    if d.integer:
        return {"mean": np.array([float(level) for level in d.levels])}
    return {
        f"share:{label}": np.array([float(k == j) for k in range(len(d.levels))]) for j, label in enumerate(d.levels)
    }


def _widest(d: estimates.DimensionData, people: dict[int, int]) -> str:
    """The estimand with the widest corrected interval on these labels (the scale's best label first on a tie)."""
    labelled = sorted(i for i in d.judged if i in people)
    best, widest = "", -1.0
    names = list(_values(d)) if d.integer else list(reversed(list(_values(d))))
    for name in names:
        v = _values(d)[name]
        width = corrected_by_hand(
            v,
            [d.judged[i] for i in labelled],
            [people[i] for i in labelled],
            [x for i, x in d.judged.items() if i not in people],
        )
        if width > widest:
            best, widest = name, width
    return best


@pytest.mark.parametrize("keep", [None, "half"])
def test_each_dimension_gets_its_widest_estimands_curve_and_next_items_widest_first(keep):
    j1, p1 = noisy(31, 120, 60, 3, miss=0.15)  # a good judge on a categorical scale
    j2, p2 = noisy(32, 120, 60, 5, miss=0.6)  # a poor one on a 1-5 scale: wider
    j3, p3 = noisy(33, 40, 1, 3, miss=0.0)  # one label: no curve
    j4, p4 = noisy(36, 50, 6, 3, miss=0.5)  # six labels (three kept): a curve of one point, the widest
    data = [
        estimates.DimensionData("good", ("No", "To some extent", "Yes"), False, j1, p1),
        estimates.DimensionData("poor", ("1", "2", "3", "4", "5"), True, j2, p2),
        estimates.DimensionData("one label", ("No", "To some extent", "Yes"), False, j3, p3),
        estimates.DimensionData("few", ("1", "2", "3"), True, j4, p4),
    ]
    kept = None if keep is None else frozenset(range(0, 60, 2))
    budgets = estimates.budget(_table(data, kept), draws=6, seed=3, count=7)
    # no curve first, then by the width with every label, widest first
    assert [b.dimension for b in budgets] == ["one label", "few", "poor", "good"]
    assert [len(b.points) for b in budgets] == ([0, 1, 4, 4] if kept is None else [0, 1, 3, 3])
    for b in budgets:
        d = next(x for x in data if x.name == b.dimension)
        people = d.people if kept is None else {i: v for i, v in d.people.items() if i in kept}
        if b.dimension == "one label":
            assert b.points == () and b.estimand == "share:Yes"
        else:
            assert b.estimand == _widest(d, people)
            assert_curve(b.points, curve_by_hand(_values(d)[b.estimand], d.judged, people, draws=6, seed=3))
        picked, strata = label_next_by_hand(_values(d)[b.estimand], d.levels, d.judged, people, count=7, seed=3)
        assert list(b.next_items) == picked and len(picked) == 7
        assert_strata(b.strata, strata)
    last = [b.points[-1].corrected for b in budgets[1:]]
    assert last == sorted(last, reverse=True) and len(set(last)) == 3
    assert budgets[2].points[-1].labelled == (60 if kept is None else 30)


def test_the_budget_defaults_and_a_dimension_without_rows():
    judged, people = noisy(41, 150, 45, 3, miss=0.3)
    data = [
        estimates.DimensionData("missing", ("No", "Yes"), False, {1: 0}, {1: 0}),
        estimates.DimensionData("d", ("No", "To some extent", "Yes"), False, judged, people),
    ]
    rows = estimates.table_rows(data[1:], None)
    (b,) = estimates.budget(_table(data, None, rows=rows))
    assert b.dimension == "d" and b.estimand == _widest(data[1], people)
    values = _values(data[1])[b.estimand]
    assert_curve(b.points, curve_by_hand(values, judged, people, draws=40, seed=0))
    picked, strata = label_next_by_hand(values, data[1].levels, judged, people, count=10, seed=0)
    assert list(b.next_items) == picked
    assert_strata(b.strata, strata)
    assert estimates.budget(_table([], None)) == []


def test_a_share_whose_labels_agree_keeps_a_spread_so_label_next_still_samples_its_level():
    values = np.array([0.0, 1.0])
    judged = {i: 0 for i in range(6)} | {i: 1 for i in range(6, 10)}
    people = {0: 0, 1: 0, 2: 0, 6: 1, 7: 1}
    picked, strata = estimates.label_next(values, ("No", "Yes"), judged, people, count=2, seed=4)
    # plus two: No's (0, 0, 0) spread as (0, 0, 0, 0, 1), Yes's (1, 1) as (1, 1, 0, 1)
    no, yes = statistics.stdev([0, 0, 0, 0, 1]), statistics.stdev([1, 1, 0, 1])
    assert (no, yes) == pytest.approx((math.sqrt(0.2), 0.5))
    # weights 6 x 0.447 = 2.68 and 4 x 0.5 = 2; 5 labels + 2: targets 4.01 and 2.99; below them by 1.01 and 0.99,
    # then 0.01 and 0.99 (with sd 0 on both, as for a scale's mean, every target would be 0: Yes, the fewer, first)
    assert_strata(strata, [("No", 6, 3, no, 4.0), ("Yes", 4, 2, yes, 3.0)])
    assert [judged[i] for i in picked] == [0, 1]
    assert picked == label_next_by_hand(values, ("No", "Yes"), judged, people, count=2, seed=4)[0]
