"""Agreement statistics for one rubric dimension: judge vs people, people vs people, judge vs itself, and
whether the judge can stand in for a rater. Point estimates come from scikit-learn (Cohen's kappa with
quadratic weights), scipy (Spearman's rho, t-tests, Benjamini-Yekutieli) and krippendorff (ordinal
alpha). Intervals are percentile bootstraps over items, seeded, with each statistic computed for all
resamples at once in numpy (tests check those against the libraries on the same resamples), so a
table of eight dimensions over thousands of items takes well under a second.

Values are places on the dimension's scale, 0 for the worst level (values.Scale).
"""

import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

# scipy, scikit-learn and krippendorff are imported where they are used: together they take longer to
# import than the rest of the app, and every process that loads the admin would pay for them.

RESAMPLES = 1000
SEED = 20250515
MIN_ANNOTATORS = 3
"""The alternative-annotator test asks for three or more annotators (Calderon et al., 2025) ..."""
MIN_ITEMS = 30
"""... and thirty or more items each annotator shares with the others."""
EPSILON = 0.1
"""How much worse than a person the judge may be per item and still count as a stand-in (the test's epsilon)."""
STAND_IN, CANNOT, NOT_ENOUGH = "can stand in for a rater", "cannot stand in for a rater", "not enough labels"

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap 95% interval and the number of items it rests on."""

    value: float | None
    """None where the statistic is undefined (no items, or no variation)."""
    low: float | None
    high: float | None
    n: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}

    def __str__(self) -> str:
        if self.value is None:
            return f"- (n={self.n})"
        interval = f" [{self.low:.2f}, {self.high:.2f}]" if self.low is not None and self.high is not None else ""
        return f"{self.value:.2f}{interval} n={self.n}"


@dataclass(frozen=True)
class Ceiling:
    """The alternative-annotator test: can the judge replace one of the annotators?"""

    verdict: str
    """STAND_IN, CANNOT or NOT_ENOUGH."""
    annotators: int
    """Annotators with MIN_ITEMS or more items shared with another annotator and judged."""
    winning_rate: float | None
    """The share of annotators the judge beats (within EPSILON, after the BY correction); >= 0.5 stands in."""
    items_needed: int | None
    """Items per annotator it would take to decide, from the observed differences (None: out of reach)."""
    annotators_needed: int
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "annotators": self.annotators,
            "winning_rate": self.winning_rate,
            "items_needed": self.items_needed,
            "annotators_needed": self.annotators_needed,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class JudgeVsHumans:
    kappa: Estimate
    """Cohen's kappa, quadratic weights."""
    rho: Estimate
    exact: Estimate
    within_one: Estimate
    confusion: tuple[tuple[int, ...], ...]
    """Rows: the people's level (worst first); columns: the judge's."""


@dataclass(frozen=True)
class DimensionAgreement:
    dimension: str
    levels: tuple[str, ...]
    judge_vs_humans: JudgeVsHumans
    humans: Estimate | None
    """Krippendorff's alpha (ordinal) between annotators; None with fewer than two."""
    self_consistency: Estimate | None
    """Krippendorff's alpha (ordinal) between the judge's repeats; None with one repeat."""
    ceiling: Ceiling
    disagreements: tuple[tuple[int, int, float], ...] = field(default=())
    """(item id, judge value, people's value), largest gap first."""


def _estimate(value: float | None, samples: NDArray[np.float64], n: int) -> Estimate:
    if value is None or not math.isfinite(value):
        return Estimate(None, None, None, n)
    finite = samples[np.isfinite(samples)]
    if finite.size < 0.5 * samples.size:
        return Estimate(float(value), None, None, n)
    low, high = np.percentile(finite, [2.5, 97.5])
    return Estimate(float(value), float(low), float(high), n)


@functools.lru_cache(maxsize=8)
def resample_indices(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> IntArray:
    """(resamples, n) item indices drawn with replacement, the same for the same n and seed (kept for
    the next dimension of the same table; read-only)."""
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    idx.setflags(write=False)
    return idx


# --- judge vs people ----------------------------------------------------------------------------


def qwk(a: IntArray, b: IntArray, k: int) -> float | None:
    """Cohen's kappa with quadratic weights over the scale's k levels (scikit-learn)."""
    from sklearn.metrics import cohen_kappa_score

    if len(a) == 0:
        return None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(a, b, labels=list(range(k)), weights="quadratic")
    return float(value) if math.isfinite(value) else None


def spearman(a: IntArray, b: IntArray) -> float | None:
    """Spearman's rho (scipy)."""
    from scipy import stats

    if len(a) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = stats.spearmanr(a, b).statistic
    return float(value) if math.isfinite(value) else None


def contingency(a: IntArray, b: IntArray, k: int, idx: IntArray) -> NDArray[np.float64]:
    """(resamples, k, k): how many items of each resample have a == i and b == j. Every statistic of a
    resample below is read from this table, so each costs O(k^2) per resample, not O(n)."""
    rows = idx.shape[0]
    cell = (a * k + b).astype(np.int32)  # one gather of each item's cell, not two of its values
    offsets = (np.arange(rows, dtype=np.int32) * (k * k))[:, None]
    return np.bincount((cell[idx] + offsets).ravel(), minlength=rows * k * k).reshape(rows, k, k).astype(float)


def _qwk_of(observed: NDArray[np.float64]) -> NDArray[np.float64]:
    """Quadratic-weighted kappa: 1 - sum(W*O) / sum(W*E), E from the margins."""
    k = observed.shape[1]
    n = observed.sum((1, 2))
    expected = observed.sum(2)[:, :, None] * observed.sum(1)[:, None, :] / n[:, None, None]
    levels = np.arange(k)
    weights = (levels[:, None] - levels[None, :]) ** 2
    with np.errstate(all="ignore"):
        return 1.0 - (weights * observed).sum((1, 2)) / (weights * expected).sum((1, 2))


def _mean_ranks(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """The average rank (ties share their mean rank, as scipy.stats.rankdata) of each level, from its count."""
    return np.cumsum(counts, axis=1) - counts + (counts + 1) / 2.0


def _spearman_of(observed: NDArray[np.float64]) -> NDArray[np.float64]:
    """Pearson's r of the ranks, with every item of a level sharing that level's mean rank."""
    n = observed.sum((1, 2))[:, None]
    rows, cols = observed.sum(2), observed.sum(1)
    ra = _mean_ranks(rows) - (n + 1) / 2
    rb = _mean_ranks(cols) - (n + 1) / 2
    covariance = (observed * ra[:, :, None] * rb[:, None, :]).sum((1, 2))
    with np.errstate(all="ignore"):
        return covariance / np.sqrt((rows * ra * ra).sum(1) * (cols * rb * rb).sum(1))


def _within_of(observed: NDArray[np.float64], steps: int) -> NDArray[np.float64]:
    k = observed.shape[1]
    levels = np.arange(k)
    near = np.abs(levels[:, None] - levels[None, :]) <= steps
    return (observed * near).sum((1, 2)) / observed.sum((1, 2))


def qwk_resampled(a: IntArray, b: IntArray, k: int, idx: IntArray) -> NDArray[np.float64]:
    """Quadratic-weighted kappa of every resample at once."""
    return _qwk_of(contingency(a, b, k, idx))


def spearman_resampled(a: IntArray, b: IntArray, k: int, idx: IntArray) -> NDArray[np.float64]:
    """Spearman's rho of every resample at once."""
    return _spearman_of(contingency(a, b, k, idx))


def judge_vs_humans(judge: IntArray, human: IntArray, k: int, idx: IntArray | None = None) -> JudgeVsHumans:
    """judge[i] and human[i] are the judge's and the people's value of item i."""
    from sklearn.metrics import confusion_matrix

    n = len(judge)
    if n == 0:
        empty = Estimate(None, None, None, 0)
        return JudgeVsHumans(empty, empty, empty, empty, tuple(tuple(0 for _ in range(k)) for _ in range(k)))
    idx = resample_indices(n) if idx is None else idx
    observed = contingency(judge, human, k, idx)
    gap = np.abs(judge - human)
    return JudgeVsHumans(
        kappa=_estimate(qwk(judge, human, k), _qwk_of(observed), n),
        rho=_estimate(spearman(judge, human), _spearman_of(observed), n),
        exact=_estimate(float(np.mean(gap == 0)), _within_of(observed, 0), n),
        within_one=_estimate(float(np.mean(gap <= 1)), _within_of(observed, 1), n),
        confusion=tuple(tuple(int(c) for c in row) for row in confusion_matrix(human, judge, labels=list(range(k)))),
    )


# --- Krippendorff's alpha ------------------------------------------------------------------------


def value_counts(units: list[list[int]], k: int) -> NDArray[np.float64]:
    """(units, k): how many coders gave each level to each unit."""
    counts = np.zeros((len(units), k))
    for u, values in enumerate(units):
        for v in values:
            counts[u, v] += 1
    return counts


def alpha(counts: NDArray[np.float64], k: int) -> float | None:
    """Krippendorff's alpha, ordinal, over the units with two or more values (the krippendorff package)."""
    import krippendorff

    pairable = counts[counts.sum(1) >= 2]
    if len(pairable) == 0 or np.count_nonzero(pairable.sum(0)) < 2:
        return None
    value = krippendorff.alpha(value_counts=pairable, value_domain=list(range(k)), level_of_measurement="ordinal")
    return float(value) if math.isfinite(value) else None


def alpha_resampled(counts: NDArray[np.float64], k: int, idx: IntArray) -> NDArray[np.float64]:
    """Ordinal alpha of every resample of units at once, from each unit's coincidences."""
    m = counts.sum(1)
    with np.errstate(all="ignore"):
        per_unit = (counts[:, :, None] * counts[:, None, :] - counts[:, :, None] * np.eye(k)) / (m - 1)[:, None, None]
    per_unit[m < 2] = 0.0
    rows, n = idx.shape
    weights = np.bincount((np.arange(rows)[:, None] * n + idx).ravel(), minlength=rows * n).reshape(rows, n)
    coincidences = (weights @ per_unit.reshape(n, k * k)).reshape(rows, k, k)
    marginal = coincidences.sum(2)
    total = marginal.sum(1)
    cumulative = np.cumsum(marginal, axis=1)
    delta = (cumulative[:, None, :] - cumulative[:, :, None] + (marginal[:, :, None] - marginal[:, None, :]) / 2) ** 2
    observed = (coincidences * delta).sum((1, 2))
    expected = (marginal[:, :, None] * marginal[:, None, :] * delta).sum((1, 2))
    with np.errstate(all="ignore"):
        return 1.0 - (total - 1) * observed / expected


def alpha_estimate(units: list[list[int]], k: int) -> Estimate:
    counts = value_counts(units, k)
    pairable = counts[counts.sum(1) >= 2]
    n = len(pairable)
    if n == 0:
        return Estimate(None, None, None, 0)
    return _estimate(alpha(pairable, k), alpha_resampled(pairable, k, resample_indices(n)), n)


# --- the human ceiling -------------------------------------------------------------------------


def alternative_annotator_test(
    judge: dict[int, int], humans: dict[int, dict[str, int]], k: int, *, epsilon: float = EPSILON
) -> Ceiling:
    """Leave one annotator out: on the items annotator j shares with others, is the judge's closeness
    to the others (1 - |gap| / (k - 1), averaged over them) at least annotator j's, less epsilon?
    A one-sided t-test per annotator, Benjamini-Yekutieli across them; the judge stands in when it wins
    for at least half of the annotators (Calderon, Reichart and Dror, 2025)."""
    annotators = sorted({a for labels in humans.values() for a in labels})
    items = [i for i in humans if i in judge]
    column = {a: c for c, a in enumerate(annotators)}
    table = np.full((len(items), len(annotators)), np.nan)  # items x annotators, nan where unlabelled
    for row, item in enumerate(items):
        for annotator, value in humans[item].items():
            table[row, column[annotator]] = value
    verdicts = np.array([judge[i] for i in items], dtype=float)
    present = ~np.isnan(table)
    diffs: dict[str, NDArray[np.float64]] = {}
    for c, held_out in enumerate(annotators):
        others = present.copy()
        others[:, c] = False
        count = others.sum(1)
        use = present[:, c] & (count > 0)
        if use.sum() < 2:
            continue
        rest = np.where(others, table, 0.0)[use]
        theirs = table[use, c][:, None]
        mine = verdicts[use][:, None]
        mask = others[use]
        # closeness to the others, 1 - |gap| / (k - 1) averaged over them: the judge's less annotator c's
        gap_human = (np.abs(theirs - rest) * mask).sum(1)
        gap_judge = (np.abs(mine - rest) * mask).sum(1)
        diffs[held_out] = (gap_human - gap_judge) / ((k - 1) * count[use])
    qualified = {a: d for a, d in diffs.items() if len(d) >= MIN_ITEMS}
    needed = _items_needed(list(diffs.values()), epsilon)
    if len(qualified) < MIN_ANNOTATORS:
        have = max((len(d) for d in diffs.values()), default=0)
        return Ceiling(
            NOT_ENOUGH,
            len(qualified),
            None,
            needed,
            MIN_ANNOTATORS - len(qualified),
            f"needs {MIN_ANNOTATORS} annotators with {MIN_ITEMS}+ shared, judged items each; "
            f"{len(qualified)} have that (most shared items: {have})",
        )
    from scipy import stats

    p_values = []
    for d in qualified.values():
        shifted = d + epsilon
        if np.allclose(shifted, shifted[0]):
            p_values.append(0.0 if shifted[0] > 0 else 1.0)
        else:
            p_values.append(float(stats.ttest_1samp(shifted, 0.0, alternative="greater").pvalue))
    adjusted = stats.false_discovery_control(p_values, method="by")
    wins = int(np.sum(adjusted < 0.05))
    rate = wins / len(qualified)
    verdict = STAND_IN if rate >= 0.5 else CANNOT
    return Ceiling(
        verdict,
        len(qualified),
        rate,
        None if verdict == STAND_IN else needed,
        0,
        f"the judge beats {wins} of {len(qualified)} annotators within epsilon={epsilon} (BY-corrected, alpha 0.05)"
        + (
            "; at the observed difference no number of items would change that"
            if verdict == CANNOT and needed is None
            else ""
        ),
    )


def _items_needed(diffs: list[NDArray[np.float64]], epsilon: float, power: float = 0.8) -> int | None:
    """Items per annotator for a one-sided t-test at 0.05 to detect the observed mean(d) + epsilon with this
    power; None when the judge is observed worse than a person by more than epsilon (no n would do)."""
    from scipy import stats

    if not diffs:
        return MIN_ITEMS
    pooled = np.concatenate(diffs)
    effect = float(pooled.mean()) + epsilon
    spread = float(pooled.std(ddof=1)) if len(pooled) > 1 else 0.0
    if effect <= 0:
        return None
    if spread == 0:
        return MIN_ITEMS
    z = stats.norm.ppf(0.95) + stats.norm.ppf(power)
    return max(MIN_ITEMS, math.ceil((z * spread / effect) ** 2))


# --- one dimension -----------------------------------------------------------------------------


def lower_median(values: list[int]) -> int:
    """The lower median: a value someone actually gave, so it stays on the scale."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


def dimension_agreement(
    name: str,
    levels: tuple[str, ...],
    judge: dict[int, list[int]],
    humans: dict[int, dict[str, int]],
    *,
    worst: int = 10,
) -> DimensionAgreement:
    """judge: item -> values over repeats; humans: item -> annotator -> value."""
    k = len(levels)
    judged = {item: lower_median(values) for item, values in judge.items() if values}
    shared = sorted(set(judged) & {i for i, labels in humans.items() if labels})
    a = np.array([judged[i] for i in shared], dtype=np.int64)
    b = np.array([lower_median(list(humans[i].values())) for i in shared], dtype=np.int64)
    annotators = {x for labels in humans.values() for x in labels}
    repeats = max((len(v) for v in judge.values()), default=0)
    gaps = sorted(zip(shared, a.tolist(), b.tolist(), strict=True), key=lambda t: (-abs(t[1] - t[2]), t[0]))
    return DimensionAgreement(
        dimension=name,
        levels=levels,
        judge_vs_humans=judge_vs_humans(a, b, k),
        humans=alpha_estimate([list(v.values()) for v in humans.values()], k) if len(annotators) >= 2 else None,
        self_consistency=alpha_estimate(list(judge.values()), k) if repeats >= 2 else None,
        ceiling=alternative_annotator_test(judged, humans, k),
        disagreements=tuple((i, j, float(h)) for i, j, h in gaps[:worst] if j != h),
    )


@dataclass(frozen=True)
class CanaryShift:
    """One dimension's agreement with people on the canary set, under the previous and this configuration."""

    dimension: str
    before: JudgeVsHumans
    after: JudgeVsHumans


@dataclass(frozen=True)
class CanaryChange:
    """How a new judge configuration moved agreement on the canary set: a drift of the judge, told apart
    from a drift of the agent, because the canary's items and labels did not change."""

    canary: str
    previous: str
    """The previous configuration's key."""
    items: int
    shifts: tuple[CanaryShift, ...]


@dataclass(frozen=True)
class AgreementTable:
    """Everything the judge card, the API and `manage.py agreement` show for one judge configuration."""

    rubric: str
    rubric_version: int
    configuration: str
    configuration_id: int
    items: int
    """Items this configuration judged."""
    repeats: int
    rows: tuple[DimensionAgreement, ...]
    canary: CanaryChange | None = None
