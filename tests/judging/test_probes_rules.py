"""Judge bias probes, rule by rule, on values built here (no database, no judge): the slope and its p-value
against the least-squares formulas and Student's t, F and its p-value against the analysis-of-variance
formulas and the F distribution, the Benjamini-Yekutieli step-up written out by hand, the minimum numbers of
items and the reasons a probe cannot run, and the words of a finding."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from evaluation.judging import probes

# Twelve items: words, source, turn; a gap that grows with the words and falls with the turn.
WORDS = (12, 30, 45, 60, 18, 90, 75, 120, 33, 52, 100, 8)
SOURCES = ("A", "B", "C", "A", "B", "C", "A", "B", "C", "A", "B", "C")
TURNS = (6, 5, 4, 5, 2, 3, 4, 1, 6, 2, 3, 4)
GAP = (0, 0, 1, 1, 0, 2, 1, 2, 0, 1, 1, -1)


def traits(words=WORDS, sources=SOURCES, turns=TURNS):
    return {
        i: probes.ItemTraits(words=w, source=s, position=t)
        for i, (w, s, t) in enumerate(zip(words, sources, turns, strict=True))
    }


def gap_of(values=GAP):
    return dict(enumerate(values))


METHODS = {
    "length": "OLS slope (linregress)",
    "source": "one-way ANOVA (f_oneway)",
    "position": "OLS slope (linregress)",
}


def run(gaps, item_traits, **kwargs):
    """probes.bias_probes, with what holds for every table checked: three rows per dimension in order, each
    row's dimension, probe and method; a row that could not run has no numbers, no detail and no finding."""
    table = probes.bias_probes(gaps, item_traits, **kwargs)
    assert [(r.dimension, r.probe, r.method) for r in table.probes] == [
        (d, p, METHODS[p]) for d in gaps for p in ("length", "source", "position")
    ]
    for r in table.probes:
        if r.reason:
            assert (r.statistic, r.p, r.p_adjusted, r.finding, r.detail, r.groups) == (None, None, None, False, "", ())
        else:
            assert r.p is not None and r.p_adjusted is not None and r.detail
    assert table.tested == sum(1 for r in table.probes if not r.reason)
    return table


def by_probe(table, dimension=None):
    return {r.probe: r for r in table.probes if dimension is None or r.dimension == dimension}


def ols(x, y):
    """Slope b = Sxy / Sxx; t = b / se(b), se(b)^2 = (SSE / (n - 2)) / Sxx; two-sided p from Student's t
    with n - 2 degrees of freedom."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    sxx = ((x - x.mean()) ** 2).sum()
    b = ((x - x.mean()) * (y - y.mean())).sum() / sxx
    a = y.mean() - b * x.mean()
    sse = ((y - a - b * x) ** 2).sum()
    t = b / math.sqrt(sse / (n - 2) / sxx)
    return b, 2 * stats.t.sf(abs(t), n - 2)


def anova(groups):
    """F = (between-group sum of squares / (k - 1)) / (within-group sum of squares / (n - k)); p from the F
    distribution with k - 1 and n - k degrees of freedom."""
    values = np.concatenate([np.asarray(g, float) for g in groups])
    n, k, grand = len(values), len(groups), values.mean()
    between = sum(len(g) * (np.mean(g) - grand) ** 2 for g in groups)
    within = sum(((np.asarray(g, float) - np.mean(g)) ** 2).sum() for g in groups)
    f = (between / (k - 1)) / (within / (n - k))
    return f, stats.f.sf(f, k - 1, n - k)


def by_adjusted(p):
    """Benjamini-Yekutieli: p_(i) * m * c(m) / i over the sorted p, then the running minimum from the
    largest down, at most 1; c(m) = 1 + 1/2 + ... + 1/m."""
    m = len(p)
    c = sum(1 / i for i in range(1, m + 1))
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * m * c / rank)
        out[i] = running
    return out


# -- the slope -----------------------------------------------------------------------------------------------


def test_the_length_and_position_slopes_and_p_values_follow_the_least_squares_formulas():
    table = run({"tone": gap_of()}, traits())
    r = by_probe(table)
    b, p = ols(WORDS, GAP)
    length = r["length"]
    assert (length.dimension, length.probe, length.method, length.n, length.reason) == (
        "tone",
        "length",
        "OLS slope (linregress)",
        12,
        "",
    )
    assert length.statistic == pytest.approx(b, rel=1e-12) and b > 0
    assert length.p == pytest.approx(p, rel=1e-9)
    assert length.groups == ()
    assert length.detail == (
        f"judge minus people rises by {b * 100:.2f} levels per 100 words "
        "(the judge rates longer items higher than people do)"
    )
    # the worked numbers: 2.17 levels per 100 words, p about 0.0001
    assert f"{b * 100:.2f}" == "2.17" and 0.0001 < p < 0.00012

    b, p = ols(TURNS, GAP)
    position = r["position"]
    assert (position.method, position.n, position.reason) == ("OLS slope (linregress)", 12, "")
    assert position.statistic == pytest.approx(b, rel=1e-12) and b < 0
    assert position.p == pytest.approx(p, rel=1e-9)
    assert position.detail == (
        f"judge minus people falls by {abs(b):.2f} levels per turn (the judge rates later turns lower than people do)"
    )
    assert f"{b:.2f}" == "-0.28" and 0.08 < p < 0.1


def test_a_gap_that_falls_with_length_and_rises_with_the_turn_is_worded_the_other_way():
    falling = tuple(-g for g in GAP)
    r = by_probe(run({"tone": gap_of(falling)}, traits()))
    b, _ = ols(WORDS, falling)
    assert r["length"].detail == (
        f"judge minus people falls by {abs(b) * 100:.2f} levels per 100 words "
        "(the judge rates longer items lower than people do)"
    )
    b, _ = ols(TURNS, falling)
    assert r["position"].detail == (
        f"judge minus people rises by {b:.2f} levels per turn (the judge rates later turns higher than people do)"
    )


def test_a_slope_of_exactly_zero_says_so():
    # a gap symmetric about the middle of evenly spaced lengths: the least-squares slope is exactly 0
    gap = (0, 1, 2, 3, 4, 4, 3, 2, 1, 0)
    words = tuple(10 * (i + 1) for i in range(10))
    r = by_probe(run({"tone": gap_of(gap)}, traits(words, SOURCES[:10], TURNS[:10])))
    assert r["length"].statistic == 0.0 and r["length"].p == pytest.approx(1.0)
    assert r["length"].detail == "judge minus people does not change with it (slope 0)"
    assert not r["length"].finding


def test_a_regression_reads_only_the_items_with_a_position():
    # an item without a position (a whole conversation among responses) is left out of the position probe only
    turns = (None,) + TURNS[1:]
    r = by_probe(run({"tone": gap_of()}, traits(turns=turns)))
    assert r["length"].n == 12 and r["position"].n == 11
    b, p = ols(TURNS[1:], GAP[1:])
    assert r["position"].statistic == pytest.approx(b, rel=1e-12)
    assert r["position"].p == pytest.approx(p, rel=1e-9)


# -- the analysis of variance ------------------------------------------------------------------------------


def test_the_source_probe_follows_the_analysis_of_variance_formulas():
    r = by_probe(run({"tone": gap_of()}, traits()))["source"]
    groups = {s: [g for g, t in zip(GAP, SOURCES, strict=True) if t == s] for s in "ABC"}
    f, p = anova(list(groups.values()))
    assert (r.probe, r.method, r.n, r.reason) == ("source", "one-way ANOVA (f_oneway)", 12, "")
    assert r.statistic == pytest.approx(f, rel=1e-12)
    assert r.p == pytest.approx(p, rel=1e-9)
    means = {s: sum(v) / len(v) for s, v in groups.items()}
    assert r.groups == tuple(sorted(((s, 4, means[s]) for s in "ABC"), key=lambda g: -g[2]))
    top, bottom = r.groups[0], r.groups[-1]
    assert r.detail == (
        f"judge minus people averages {top[2]:+.2f} levels on {top[0]} and {bottom[2]:+.2f} on {bottom[0]} (3 sources)"
    )
    # the worked numbers: A and B average +0.75, C +0.50
    assert [(s, n, round(m, 2)) for s, n, m in r.groups] == [("A", 4, 0.75), ("B", 4, 0.75), ("C", 4, 0.5)]
    assert r.detail == "judge minus people averages +0.75 levels on A and +0.50 on C (3 sources)"


def test_sources_are_listed_largest_mean_gap_first_ties_by_name():
    sources = ("Zed", "Amy", "Kit") * 4
    gap = (1, 1, -1, 0, 1, -1, 1, 0, -1, 0, 0, 0)  # Zed +0.50, Amy +0.50, Kit -0.75
    r = by_probe(run({"tone": gap_of(gap)}, traits(sources=sources)))["source"]
    assert [(s, n, m) for s, n, m in r.groups] == [("Amy", 4, 0.5), ("Zed", 4, 0.5), ("Kit", 4, -0.75)]
    assert r.detail == "judge minus people averages +0.50 levels on Amy and -0.75 on Kit (3 sources)"


def test_sources_of_one_item_are_left_out_and_named_and_two_items_are_enough():
    # two sources of 5 items, one of 2 (kept: MIN_GROUP_ITEMS), two of 1 (left out)
    sources = ("A",) * 5 + ("B",) * 5 + ("Pair", "Pair", "Solo", "Lone")
    gap = (1, 1, 2, 1, 0, 0, 0, -1, 0, 1, 2, 2, 5, -5)
    words = tuple(range(10, 24))
    turns = tuple(range(2, 16))
    r = by_probe(run({"tone": gap_of(gap)}, traits(words, sources, turns)))["source"]
    f, p = anova([gap[:5], gap[5:10], gap[10:12]])
    assert (r.n, r.reason) == (12, "")
    assert r.statistic == pytest.approx(f, rel=1e-12) and r.p == pytest.approx(p, rel=1e-9)
    assert [g[:2] for g in r.groups] == [("Pair", 2), ("A", 5), ("B", 5)]
    assert (
        r.detail
        == "judge minus people averages +2.00 levels on Pair and +0.00 on B (3 sources); left out, under 2 items: Lone, Solo"
    )


def test_two_sources_are_enough_to_compare():
    sources = ("A", "B") * 5
    gap = (1, 0, 1, 0, 2, 0, 1, -1, 1, 0)
    r = by_probe(run({"tone": gap_of(gap)}, traits(WORDS[:10], sources, TURNS[:10])))["source"]
    f, p = anova([gap[0::2], gap[1::2]])
    assert (r.n, r.reason) == (10, "") and r.statistic == pytest.approx(f, rel=1e-12)
    assert r.p == pytest.approx(p, rel=1e-9)
    assert r.detail == "judge minus people averages +1.20 levels on A and -0.20 on B (2 sources)"


def test_sources_each_constant_within_but_not_between_give_an_infinite_f_and_a_finding():
    sources = ("A", "B") * 6
    gap = (1, 0) * 6
    r = by_probe(run({"tone": gap_of(gap)}, traits(sources=sources)))["source"]
    assert r.statistic == math.inf and r.p == 0.0 and r.p_adjusted == 0.0 and r.finding and not r.reason
    # JSON has no infinity: the table as a dict gives F as null, and the rest as it is
    table = run({"tone": gap_of(gap)}, traits(sources=sources))
    row = json.loads(json.dumps(table.as_dict(), allow_nan=False))["probes"][1]
    assert (row["probe"], row["statistic"], row["p"], row["finding"]) == ("source", None, 0.0, True)


# -- the minimum numbers and the reasons ---------------------------------------------------------------------


def test_ten_items_run_and_nine_do_not_with_the_count_in_words():
    ten = run({"tone": gap_of(GAP[:10])}, traits())
    assert all(not r.reason and r.p is not None for r in ten.probes) and ten.tested == 3
    nine = run({"tone": gap_of(GAP[:9])}, traits())
    for r in nine.probes:
        assert r.reason == "9 items with both the judge's value and people's: the probe needs 10", r.probe
        assert (r.n, r.statistic, r.p, r.p_adjusted, r.finding, r.detail, r.groups) == (
            9,
            None,
            None,
            None,
            False,
            "",
            (),
        )
    assert [r.method for r in nine.probes] == [
        "OLS slope (linregress)",
        "one-way ANOVA (f_oneway)",
        "OLS slope (linregress)",
    ]
    assert nine.tested == 0 and nine.findings == ()
    one = by_probe(run({"tone": {0: 1}}, traits()))
    assert {r.reason for r in one.values()} == {"1 item with both the judge's value and people's: the probe needs 10"}
    none = by_probe(run({"tone": {}}, traits()))
    assert {r.reason for r in none.values()} == {"0 items with both the judge's value and people's: the probe needs 10"}
    assert {r.n for r in none.values()} == {0}


def test_a_probe_with_nothing_to_vary_says_why():
    constant = traits(words=(30,) * 12, sources=("Alpha",) * 12, turns=(4,) * 12)
    r = by_probe(run({"tone": gap_of()}, constant))
    assert (r["length"].reason, r["length"].n) == ("every item is 30 words long: nothing to regress on", 12)
    assert (r["source"].reason, r["source"].n) == ("one source (Alpha) with 2+ items: nothing to compare", 12)
    assert (r["position"].reason, r["position"].n) == ("every item is turn 4: nothing to regress on", 12)
    assert all(p.p is None and not p.finding for p in r.values())

    for value, words in ((1, "+1"), (-2, "-2"), (0, "+0")):
        flat = by_probe(run({"tone": gap_of((value,) * 12)}, traits()))
        assert {p.reason for p in flat.values()} == {f"the gap is {words} on every item: it cannot vary with anything"}
        assert {p.n for p in flat.values()} == {12}


def test_a_source_probe_short_of_sources_or_items_says_why_and_names_those_left_out():
    singles = traits(sources=tuple(f"s{i:02d}" for i in range(12)))
    r = by_probe(run({"tone": gap_of()}, singles))["source"]
    names = ", ".join(f"s{i:02d}" for i in range(12))
    assert r.reason == f"no source with 2+ items: nothing to compare; left out, under 2 items: {names}"
    assert (r.n, r.p) == (0, None)

    one_pair = traits(sources=("A", "A") + tuple(f"s{i:02d}" for i in range(10)))
    r = by_probe(run({"tone": gap_of()}, one_pair))["source"]
    assert r.reason.startswith("one source (A) with 2+ items: nothing to compare; left out, under 2 items: s00, s01")
    assert r.n == 2

    # 11 items, but only 9 in sources of two or more: too few, and the one-item sources named
    short = traits(sources=("A",) * 5 + ("B",) * 4 + ("X", "Y", "Z"))
    r = by_probe(run({"tone": gap_of(GAP[:11])}, short))["source"]
    assert r.reason == (
        "9 items with both the judge's value and people's: the probe needs 10; left out, under 2 items: X, Y"
    )
    assert (r.n, r.p, r.finding) == (9, None, False)

    # the same gap on every item of the sources that take part
    r = by_probe(run({"tone": gap_of((1,) * 11 + (3,))}, traits(sources=("A", "B") * 5 + ("X", "Y"))))
    assert r["source"].reason == "the gap is +1 on every item: it cannot vary with anything"
    assert r["source"].n == 10 and r["length"].p is not None


def test_whole_conversations_have_no_position_and_the_other_probes_still_run():
    table = run({"tone": gap_of()}, traits(turns=(None,) * 12))
    r = by_probe(table)
    assert r["position"].reason == "the rubric judges whole conversations: no item has a position in one"
    assert (r["position"].n, r["position"].p_adjusted, r["position"].method) == (0, None, "OLS slope (linregress)")
    assert r["length"].p is not None and r["source"].p is not None and table.tested == 2
    # with no items at all, too few items is the reason, not the rubric's unit
    empty = by_probe(run({"tone": {}}, {}))
    assert empty["position"].reason.startswith("0 items")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_lengths_too_large_for_floating_point_give_no_p_value_and_no_finding():
    huge = traits(words=tuple(10**307 * (i + 1) for i in range(12)))
    table = run({"tone": gap_of()}, huge)
    r = by_probe(table)["length"]
    assert (r.reason, r.n, r.p, r.statistic, r.finding) == ("the regression gave no p-value", 12, None, None, False)
    assert table.tested == 2


# -- the adjustment and the findings --------------------------------------------------------------------


def test_every_p_value_is_adjusted_together_by_benjamini_yekutieli():
    strong = GAP
    weak = (1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 0, 1)
    noisy = (0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 0)
    dims = {"strong": gap_of(strong), "weak": gap_of(weak), "few": gap_of(GAP[:5]), "noisy": gap_of(noisy)}
    table = run(dims, traits())
    assert [(r.dimension, r.probe) for r in table.probes] == [
        (d, p) for d in ("strong", "weak", "few", "noisy") for p in ("length", "source", "position")
    ]
    ran = [r for r in table.probes if r.dimension != "few"]
    expected_p = []
    for r in ran:
        gap = {"strong": strong, "weak": weak, "noisy": noisy}[r.dimension]
        if r.probe == "source":
            expected_p.append(anova([[g for g, s in zip(gap, SOURCES, strict=True) if s == t] for t in "ABC"])[1])
        else:
            expected_p.append(ols(WORDS if r.probe == "length" else TURNS, gap)[1])
    adjusted = by_adjusted(expected_p)
    assert table.tested == 9 and table.q == 0.05
    for r, p, a in zip(ran, expected_p, adjusted, strict=True):
        assert r.p == pytest.approx(p, rel=1e-9), (r.dimension, r.probe)
        assert r.p_adjusted == pytest.approx(a, rel=1e-9), (r.dimension, r.probe)
        assert r.finding == (a <= 0.05), (r.dimension, r.probe)
    assert all(r.p_adjusted is None and not r.finding for r in table.probes if r.dimension == "few")
    findings = [(r.dimension, r.probe) for r in table.findings]
    assert findings == [(r.dimension, r.probe) for r, a in zip(ran, adjusted, strict=True) if a <= 0.05]
    # the worked numbers: the strong length probe survives the adjustment, nothing of the other dimensions does
    assert ("strong", "length") in findings and not any(d != "strong" for d, _ in findings)
    assert any(r.p < 0.05 and not r.finding for r in ran), "a raw p under 0.05 that the adjustment removes"


def test_a_finding_is_an_adjusted_p_value_at_most_q():
    first = run({"tone": gap_of()}, traits())
    length = by_probe(first)["length"]
    at = run({"tone": gap_of()}, traits(), q=length.p_adjusted)
    assert by_probe(at)["length"].finding and at.q == length.p_adjusted
    below = run({"tone": gap_of()}, traits(), q=length.p_adjusted * 0.999)
    assert not by_probe(below)["length"].finding and below.findings == ()


def test_the_table_as_a_dict():
    table = run({"tone": gap_of()}, traits(), q=0.1)
    d = table.as_dict()
    assert set(d) == {"q", "tested", "probes"} and (d["q"], d["tested"]) == (0.1, 3)
    source = by_probe(table)["source"]
    assert d["probes"][1] == {
        "dimension": "tone",
        "probe": "source",
        "method": "one-way ANOVA (f_oneway)",
        "n": 12,
        "statistic": source.statistic,
        "p": source.p,
        "p_adjusted": source.p_adjusted,
        "finding": source.finding,
        "reason": "",
        "detail": source.detail,
        "groups": [{"source": s, "n": n, "mean_gap": m} for s, n, m in source.groups],
    }
    assert [p["probe"] for p in d["probes"]] == ["length", "source", "position"]
    assert d["probes"][0]["groups"] == []


# -- the gap and the traits --------------------------------------------------------------------------------


def test_the_gap_is_the_judges_lower_median_minus_the_peoples_on_items_with_both():
    judge = {1: [2, 0, 1, 2], 2: [1], 3: [0, 2], 4: [], 5: [2]}
    humans = {1: {"ann": 0, "ben": 1}, 2: {"ann": 2, "ben": 0, "cy": 1}, 3: {"ann": 1}, 4: {"ann": 1}, 6: {"ann": 0}}
    humans[5] = {}

    def lower(values):
        return int(np.percentile(values, 50, method="lower"))

    assert probes.gaps(judge, humans) == {
        1: lower([2, 0, 1, 2]) - lower([0, 1]),
        2: lower([1]) - lower([2, 0, 1]),
        3: lower([0, 2]) - lower([1]),
    }
    assert probes.gaps(judge, humans) == {1: 1, 2: 0, 3: -1}


def test_item_traits_count_the_judged_words_and_the_turn():
    history = [
        {"role": "tutor", "content": "What is 3 x 4?"},
        {"role": "student", "content": "It is 7."},
        {"role": "tutor"},
        {"role": "tutor", "content": "Count  again."},
    ]
    response = probes.item_traits(
        unit="response", key="GPT4", response=" Not quite:  try again ", source="s", messages=history
    )
    assert response == probes.ItemTraits(words=4, source="GPT4", position=5)
    unnamed = probes.item_traits(unit="response", key="", response="Yes", source="mathia", messages=[])
    assert unnamed == probes.ItemTraits(words=1, source="mathia", position=1)
    session = probes.item_traits(unit="session", key="k", response="ignored here", source="mathia", messages=history)
    assert session == probes.ItemTraits(words=7, source="mathia", position=None)
