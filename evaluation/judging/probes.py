"""Judge bias probes: does the judge's gap to people grow with the response's length, differ with its source,
or grow with its position in the conversation?

For one judge configuration and each rubric dimension, the gap of an item is the judge's value minus the
people's (each the lower median on the scale's places, 0 for the worst level, as on the judge card), on the
items with both. Three probes per dimension:

- length: ordinary least squares of the gap on the words of what was judged (scipy.stats.linregress), the
  slope and its two-sided t-test;
- source: one-way analysis of variance of the gap across the items' sources (scipy.stats.f_oneway), over the
  sources with MIN_GROUP_ITEMS or more items, when there are two or more of them;
- position: ordinary least squares of the gap on the judged turn's number in the conversation (linregress).

Every p-value of every probe and dimension is adjusted together by the Benjamini-Yekutieli procedure
(Benjamini and Yekutieli, 2001; scipy.stats.false_discovery_control(method="by")), which holds the false
discovery rate at Q under any dependence between the tests: the probes share their items, and the dimensions
their annotators. Only a probe whose adjusted p-value is at most Q is a finding. A probe that cannot run says
why, takes no part in the adjustment, and is never a finding.
"""

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from evaluation.judging.agreement import lower_median

Q = 0.05
"""The false discovery rate the Benjamini-Yekutieli procedure holds across all probes and dimensions."""
MIN_ITEMS = 10
"""A probe runs on ten or more items with both the judge's value and people's: with fewer, the regression's
t-test has under eight degrees of freedom and one odd item decides it."""
MIN_GROUP_ITEMS = 2
"""A source takes part in the analysis of variance with two or more items (a group of one has no spread)."""
MIN_GROUPS = 2
LENGTH, SOURCE, POSITION = "length", "source", "position"
PROBES = (LENGTH, SOURCE, POSITION)
OLS, ANOVA = "OLS slope (linregress)", "one-way ANOVA (f_oneway)"


@dataclass(frozen=True)
class ItemTraits:
    """What a probe regresses the gap on, for one judged item."""

    words: int
    """Words (whitespace-separated) of what was judged: the candidate response, or the tutor's turns of a
    whole conversation."""
    source: str
    """Who wrote it: the candidate's name (a tutor model) for a response, the transcript's source for a whole
    conversation."""
    position: int | None
    """The judged turn's number in the conversation, counting from 1 (a candidate follows the conversation so
    far); None for a whole conversation, which has no position in one."""


def item_traits(
    *, unit: str, key: str, response: str, source: str, messages: Sequence[Mapping[str, str]]
) -> ItemTraits:
    """unit: the rubric's ("response" or "session"); key, response: the item's; source, messages: its
    transcript's."""
    if unit == "response":
        return ItemTraits(len(response.split()), key or source, len(messages) + 1)
    tutor = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "tutor")
    return ItemTraits(len(tutor.split()), source, None)


@dataclass(frozen=True)
class ProbeResult:
    """One probe on one dimension."""

    dimension: str
    probe: str
    """LENGTH, SOURCE or POSITION."""
    method: str
    """OLS (the gap on words or on the turn's number) or ANOVA (the gap across sources)."""
    n: int
    """Items the probe ran on (for SOURCE, those in the sources that took part)."""
    statistic: float | None
    """OLS: the slope, in levels per word or per turn; ANOVA: F. None where the probe could not run."""
    p: float | None
    """Two-sided p-value of the slope's t-test, or of F; None where the probe could not run."""
    p_adjusted: float | None
    """p adjusted by Benjamini-Yekutieli together with every other probe's that ran."""
    finding: bool
    """p_adjusted <= Q: the judge's gap to people depends on this trait."""
    reason: str
    """Why the probe could not run; "" when it ran."""
    detail: str = ""
    """What it measured, in words (direction and size), whether or not it is a finding."""
    groups: tuple[tuple[str, int, float], ...] = ()
    """SOURCE: (source, items, mean gap) for each source that took part, largest mean gap first."""


@dataclass(frozen=True)
class ProbeTable:
    """Every probe of one judge configuration, dimension by dimension in the rubric's order."""

    q: float
    tested: int
    """How many p-values were adjusted together (the probes that ran)."""
    probes: tuple[ProbeResult, ...]

    @property
    def findings(self) -> tuple[ProbeResult, ...]:
        return tuple(p for p in self.probes if p.finding)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: an infinite F (every source constant within itself but not between) is null, as JSON has
        no infinity; its p (0) and the detail still say what was found."""
        return {
            "q": self.q,
            "tested": self.tested,
            "probes": [
                {
                    "dimension": p.dimension,
                    "probe": p.probe,
                    "method": p.method,
                    "n": p.n,
                    "statistic": p.statistic if p.statistic is not None and math.isfinite(p.statistic) else None,
                    "p": p.p,
                    "p_adjusted": p.p_adjusted,
                    "finding": p.finding,
                    "reason": p.reason,
                    "detail": p.detail,
                    "groups": [{"source": s, "n": n, "mean_gap": m} for s, n, m in p.groups],
                }
                for p in self.probes
            ],
        }


def gaps(judge: Mapping[int, Sequence[int]], humans: Mapping[int, Mapping[str, int]]) -> dict[int, int]:
    """item -> the judge's lower median over repeats minus the people's lower median, on the items with both."""
    return {
        item: lower_median(list(values)) - lower_median(list(humans[item].values()))
        for item, values in judge.items()
        if values and humans.get(item)
    }


def _unrun(dimension: str, probe: str, method: str, n: int, reason: str) -> ProbeResult:
    return ProbeResult(dimension, probe, method, n, None, None, None, False, reason)


def _too_few(n: int) -> str:
    return f"{n} item{'s' if n != 1 else ''} with both the judge's value and people's: the probe needs {MIN_ITEMS}"


def _same_gap(values: list[int]) -> str | None:
    if len(set(values)) == 1:
        return f"the gap is {values[0]:+d} on every item: it cannot vary with anything"
    return None


def _regression(dimension: str, probe: str, gap: dict[int, int], trait: dict[int, int | None]) -> ProbeResult:
    from scipy import stats

    if probe == POSITION and gap and all(trait.get(i) is None for i in gap):
        return _unrun(dimension, probe, OLS, 0, "the rubric judges whole conversations: no item has a position in one")
    items = sorted(i for i in gap if trait.get(i) is not None)
    if len(items) < MIN_ITEMS:
        return _unrun(dimension, probe, OLS, len(items), _too_few(len(items)))
    x = [float(trait[i]) for i in items]  # type: ignore[arg-type]
    y = [gap[i] for i in items]
    if len(set(x)) == 1:
        what = f"{x[0]:g} words long" if probe == LENGTH else f"turn {x[0]:g}"
        return _unrun(dimension, probe, OLS, len(items), f"every item is {what}: nothing to regress on")
    same = _same_gap(y)
    if same:
        return _unrun(dimension, probe, OLS, len(items), same)
    fit = stats.linregress(x, y)
    slope, p = float(fit.slope), float(fit.pvalue)
    per, scale = ("100 words", 100.0) if probe == LENGTH else ("turn", 1.0)
    trend = "rises" if slope > 0 else "falls"
    later = "longer items" if probe == LENGTH else "later turns"
    side = "higher" if slope > 0 else "lower"
    detail = (
        f"judge minus people {trend} by {abs(slope) * scale:.2f} levels per {per} "
        f"(the judge rates {later} {side} than people do)"
        if slope != 0
        else "judge minus people does not change with it (slope 0)"
    )
    return ProbeResult(dimension, probe, OLS, len(items), slope, p, None, False, "", detail)


def _anova(dimension: str, gap: dict[int, int], source: dict[int, str]) -> ProbeResult:
    from scipy import stats

    if len(gap) < MIN_ITEMS:
        return _unrun(dimension, SOURCE, ANOVA, len(gap), _too_few(len(gap)))
    by_source: dict[str, list[int]] = {}
    for item in sorted(gap):
        by_source.setdefault(source[item], []).append(gap[item])
    kept = {s: v for s, v in by_source.items() if len(v) >= MIN_GROUP_ITEMS}
    small = sorted(s for s in by_source if s not in kept)
    left_out = f"; left out, under {MIN_GROUP_ITEMS} items: {', '.join(small)}" if small else ""
    n = sum(len(v) for v in kept.values())
    if len(kept) < MIN_GROUPS:
        found = f"one source ({next(iter(kept))})" if kept else "no source"
        return _unrun(
            dimension,
            SOURCE,
            ANOVA,
            n,
            f"{found} with {MIN_GROUP_ITEMS}+ items: nothing to compare{left_out}",
        )
    if n < MIN_ITEMS:
        return _unrun(dimension, SOURCE, ANOVA, n, _too_few(n) + left_out)
    same = _same_gap([g for v in kept.values() for g in v])
    if same:
        return _unrun(dimension, SOURCE, ANOVA, n, same)
    with warnings.catch_warnings():
        # every source constant within itself but not between: F is infinite and p 0, as it should be
        warnings.simplefilter("ignore")
        result = stats.f_oneway(*kept.values())
    f, p = float(result.statistic), float(result.pvalue)
    groups = tuple(sorted(((s, len(v), sum(v) / len(v)) for s, v in kept.items()), key=lambda g: (-g[2], g[0])))
    (top, _, high), (bottom, _, low) = groups[0], groups[-1]
    detail = (
        f"judge minus people averages {high:+.2f} levels on {top} and {low:+.2f} on {bottom} "
        f"({len(groups)} sources){left_out}"
    )
    return ProbeResult(dimension, SOURCE, ANOVA, n, f, p, None, False, "", detail, groups)


_NO_P = {OLS: "the regression gave no p-value", ANOVA: "the analysis of variance gave no p-value"}


def _no_p_value(result: ProbeResult) -> ProbeResult:
    """A probe whose p-value is not a number (values beyond floating point) could not run."""
    if result.p is None or math.isfinite(result.p):
        return result
    return _unrun(result.dimension, result.probe, result.method, result.n, _NO_P[result.method])


def bias_probes(
    gaps_by_dimension: Mapping[str, Mapping[int, int]], traits: Mapping[int, ItemTraits], *, q: float = Q
) -> ProbeTable:
    """gaps_by_dimension: dimension -> item -> gap (see gaps), in the rubric's order; traits: item -> its
    ItemTraits (every item with a gap). Runs the three probes per dimension, then adjusts every p-value
    together (Benjamini-Yekutieli) and marks the findings: adjusted p <= q."""
    from scipy import stats

    results: list[ProbeResult] = []
    for dimension, gap in gaps_by_dimension.items():
        gap = dict(gap)
        results += map(
            _no_p_value,
            (
                _regression(dimension, LENGTH, gap, {i: traits[i].words for i in gap}),
                _anova(dimension, gap, {i: traits[i].source for i in gap}),
                _regression(dimension, POSITION, gap, {i: traits[i].position for i in gap}),
            ),
        )
    ran = [i for i, r in enumerate(results) if r.p is not None]
    if ran:
        adjusted = stats.false_discovery_control([results[i].p for i in ran], method="by")
        for i, p_adjusted in zip(ran, adjusted, strict=True):
            results[i] = replace(results[i], p_adjusted=float(p_adjusted), finding=bool(p_adjusted <= q))
    return ProbeTable(q, len(ran), tuple(results))
