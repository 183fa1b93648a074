"""Agreement statistics for one rubric dimension: judge vs people, people vs people, judge vs itself, and
whether the judge can stand in for a rater. Point estimates come from scikit-learn (Cohen's kappa with
quadratic weights), scipy (Spearman's rho, the alternative annotator test's t-tests) and krippendorff (ordinal
alpha). Intervals are percentile bootstraps over items, seeded, with each statistic computed for all
resamples at once in numpy (tests check those against the libraries on the same resamples), so a
table of eight dimensions over thousands of items takes well under a second.

Values are places on the dimension's scale, 0 for the worst level (values.Scale).
"""

import functools
import math
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

# scipy, scikit-learn and krippendorff are imported where they are used: together they take longer to
# import than the rest of the app, and every process that loads the admin would pay for them.

RESAMPLES = 1000
SEED = 20250515
ACCURACY, NEGATIVE_RMSE = "accuracy", "negative RMSE"
Q = 0.05
"""The false discovery rate the Benjamini-Yekutieli procedure controls across annotators."""
PASS_WINNING_RATE = 0.5
"""The judge passes when it wins against at least this share of the annotators tested."""
MIN_HUMANS_PER_INSTANCE = 2
"""An instance takes part when at least two people labelled it (and the judge did): one left out, one left."""
MIN_INSTANCES_PER_HUMAN = 30
"""An annotator is tested on thirty or more such instances (the t-test's normality); others are skipped."""
RECOMMENDED_ANNOTATORS = 3
"""The test works with two annotators, but with fewer than three it only asks which of two people the judge
is closer to: no consensus to represent, so the result says it is less reliable."""
PASSES, FAILS, NOT_ENOUGH = "passes", "fails", "not enough data"
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
class AnnotatorTest:
    """One annotator left out: on each instance, who is closer to the remaining annotators, the judge or this
    annotator?"""

    annotator: str
    instances: int
    """Instances this annotator labelled that the judge and at least one other annotator labelled too."""
    rho_f: float
    """The judge's advantage probability against this annotator: the share of instances where the judge's
    alignment with the others is at least the annotator's."""
    rho_h: float
    """The same for the annotator: the share where the annotator's alignment is at least the judge's."""
    p: float | None
    """One-sided t-test of mean(W_h - W_f) < epsilon; None where it gives no p-value (every difference equal to
    epsilon)."""
    rejected: bool
    """The Benjamini-Yekutieli procedure rejects this annotator's null at Q: the judge wins against them."""

    def as_dict(self) -> dict[str, object]:
        return {
            "annotator": self.annotator,
            "instances": self.instances,
            "rho_f": self.rho_f,
            "rho_h": self.rho_h,
            "p": self.p,
            "by_rejected": self.rejected,
        }


@dataclass(frozen=True)
class Ceiling:
    """The alternative annotator test (Calderon, Reichart and Dror, 2025): can the judge replace one of the
    annotators?"""

    verdict: str
    """PASSES (winning rate >= 0.5), FAILS, or NOT_ENOUGH (no annotator has enough instances; see detail)."""
    winning_rate: float | None
    """omega: the share of the annotators tested against whom the judge wins (BY-rejected); None if none was."""
    advantage_probability: float | None
    """rho: the judge's advantage probability rho_f averaged over the annotators tested."""
    epsilon: float
    """How much the annotators are handicapped for what the judge saves (cost, speed): a win needs
    P(annotator closer) - P(judge closer) < epsilon."""
    alignment: str
    """The alignment score: ACCURACY for categorical scales, NEGATIVE_RMSE for numeric ones."""
    q: float
    annotators: tuple[AnnotatorTest, ...]
    """The annotators tested, in the order of their names."""
    detail: str
    """What was tested and, for NOT_ENOUGH or with fewer than three annotators, why to be careful."""

    @property
    def annotators_tested(self) -> int:
        return len(self.annotators)

    def as_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "winning_rate": self.winning_rate,
            "advantage_probability": self.advantage_probability,
            "epsilon": self.epsilon,
            "alignment": self.alignment,
            "q": self.q,
            "annotators_tested": self.annotators_tested,
            "annotators": [a.as_dict() for a in self.annotators],
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
    adjudicated: int = 0
    """Items of judge_vs_humans whose people's value is an adjudicated label; the others' is the lower median of
    the raw labels. The people-vs-people alpha and the alternative annotator test use raw labels only."""


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


def scale_numbers(levels: tuple[str, ...]) -> tuple[float, ...] | None:
    """The number each level stands for when every level is written as a number (an integer scale such as 1-10:
    a numeric scale, scored by negative RMSE on these numbers, so uneven steps count as they are); None when a
    level is a word (a categorical scale such as Yes / To some extent / No, scored by accuracy)."""
    if not levels or not all(_NUMBER.fullmatch(level.strip()) for level in levels):
        return None
    return tuple(float(level) for level in levels)


_NUMBER = re.compile(r"[-+]?\d+(\.\d+)?")


def _accuracy(prediction: float, others: list[float]) -> float:
    return sum(1.0 for other in others if other == prediction) / len(others)


def _negative_rmse(prediction: float, others: list[float]) -> float:
    return -math.sqrt(sum((prediction - other) ** 2 for other in others) / len(others))


def by_rejections(p_values: list[float | None], q: float = Q) -> list[bool]:
    """The Benjamini-Yekutieli step-up procedure: with the m p-values sorted, reject the k smallest for the
    largest k with p_(k) <= k / m * q / H_m (H_m = 1 + 1/2 + ... + 1/m). A missing p-value counts in m and is
    never rejected."""
    m = len(p_values)
    harmonic = sum(1.0 / i for i in range(1, m + 1))
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    largest = 0
    for rank, (p, _) in enumerate(present, start=1):
        if p <= rank / m * q / harmonic:
            largest = rank
    rejected = [False] * m
    for _, i in present[:largest]:
        rejected[i] = True
    return rejected


def alternative_annotator_test(
    judge: dict[int, int],
    humans: dict[int, dict[str, int]],
    levels: tuple[str, ...],
    *,
    epsilon: float | None = None,
) -> Ceiling:
    """The alternative annotator test as published (Calderon, Reichart and Dror, 2025, and the authors' code).

    judge: item -> the judge's place on the scale; humans: item -> annotator -> place; levels: the scale's
    levels, worst first. Instances with two or more annotators that the judge labelled take part. For each
    annotator j with MIN_INSTANCES_PER_HUMAN or more of them, on each instance: S = the alignment score
    (accuracy, or negative RMSE on the levels' numbers) with the other annotators' labels, W_f = [S(judge) >=
    S(j)], W_h = [S(j) >= S(judge)], d = W_h - W_f; p_j is a one-sided t-test of mean(d) < epsilon, rho_f_j the
    mean of W_f. Benjamini-Yekutieli at Q across the p_j; the winning rate omega is the share rejected, and the
    judge passes when omega >= 0.5. epsilon defaults to the ALT_TEST_EPSILON setting."""
    from scipy import stats

    if epsilon is None:
        from evaluation.conf import setting

        epsilon = float(setting("ALT_TEST_EPSILON"))
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and 0 <= epsilon < 1):
        raise ValueError(f"epsilon must be a number from 0 to below 1, not {epsilon!r}")
    numbers = scale_numbers(levels)
    if numbers is None:
        alignment, score = ACCURACY, _accuracy
        value = [float(place) for place in range(len(levels))]
    else:
        alignment, score = NEGATIVE_RMSE, _negative_rmse
        value = list(numbers)

    kept = {item: labels for item, labels in humans.items() if item in judge and len(labels) >= MIN_HUMANS_PER_INSTANCE}
    instances: dict[str, list[int]] = {}
    for item, labels in kept.items():
        for annotator in labels:
            instances.setdefault(annotator, []).append(item)
    everyone = sorted({a for labels in humans.values() for a in labels})
    tested = [a for a in everyone if len(instances.get(a, [])) >= MIN_INSTANCES_PER_HUMAN]
    skipped = [f"{a} ({len(instances.get(a, []))})" for a in everyone if a not in tested]

    def verdict(v: str, rows: tuple[AnnotatorTest, ...], omega: float | None, rho: float | None, detail: str):
        return Ceiling(v, omega, rho, epsilon, alignment, Q, rows, detail)

    if not tested:
        return verdict(
            NOT_ENOUGH,
            (),
            None,
            None,
            f"no annotator has {MIN_INSTANCES_PER_HUMAN}+ instances that the judge and another annotator also "
            f"labelled (instances per annotator: {', '.join(skipped) or 'none'}); the t-test needs "
            f"{MIN_INSTANCES_PER_HUMAN}, 50-100 are usually enough",
        )

    measured: list[tuple[str, int, float, float, float | None]] = []
    for annotator in tested:
        w_f, w_h = [], []
        for item in instances[annotator]:
            others = [value[v] for a, v in kept[item].items() if a != annotator]
            human_score = score(value[kept[item][annotator]], others)
            judge_score = score(value[judge[item]], others)
            w_f.append(1 if judge_score >= human_score else 0)
            w_h.append(1 if human_score >= judge_score else 0)
        d = [h - f for h, f in zip(w_h, w_f, strict=True)]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # scipy warns on constant d: its inf statistic and 0/1 p stand
            p = float(stats.ttest_1samp(d, epsilon, alternative="less").pvalue)
        measured.append((annotator, len(d), sum(w_f) / len(d), sum(w_h) / len(d), p if math.isfinite(p) else None))
    rejected = by_rejections([m[4] for m in measured], Q)
    rows = tuple(
        AnnotatorTest(a, n, rho_f, rho_h, p, r) for (a, n, rho_f, rho_h, p), r in zip(measured, rejected, strict=True)
    )
    omega = sum(rejected) / len(rows)
    rho = sum(row.rho_f for row in rows) / len(rows)
    detail = (
        f"the judge wins against {sum(rejected)} of {len(rows)} annotators tested (epsilon {epsilon:g}, "
        f"{alignment}, Benjamini-Yekutieli at q = {Q:g})"
    )
    if len(rows) < RECOMMENDED_ANNOTATORS:
        detail += (
            f"; only {len(rows)} annotator{'s' if len(rows) != 1 else ''} tested: the test recommends "
            f"{RECOMMENDED_ANNOTATORS} or more, as with fewer the judge is compared with one or two people rather "
            "than a consensus, and the result is less reliable"
        )
    if skipped:
        detail += f"; skipped, under {MIN_INSTANCES_PER_HUMAN} instances: {', '.join(skipped)}"
    missing = [row.annotator for row in rows if row.p is None]
    if missing:
        detail += f"; no p-value (every difference equal to epsilon), not a win: {', '.join(missing)}"
    return verdict(PASSES if omega >= PASS_WINNING_RATE else FAILS, rows, omega, rho, detail)


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
    epsilon: float | None = None,
    settled: dict[int, int] | None = None,
) -> DimensionAgreement:
    """judge: item -> values over repeats; humans: item -> annotator -> value; epsilon: the alternative
    annotator test's (default: the ALT_TEST_EPSILON setting); settled: item -> an adjudicated value, which
    stands for the people's value against the judge (never as one more annotator)."""
    k = len(levels)
    settled = settled or {}
    judged = {item: lower_median(values) for item, values in judge.items() if values}
    shared = sorted(set(judged) & ({i for i, labels in humans.items() if labels} | set(settled)))
    a = np.array([judged[i] for i in shared], dtype=np.int64)
    b = np.array(
        [settled[i] if i in settled else lower_median(list(humans[i].values())) for i in shared], dtype=np.int64
    )
    annotators = {x for labels in humans.values() for x in labels}
    repeats = max((len(v) for v in judge.values()), default=0)
    gaps = sorted(zip(shared, a.tolist(), b.tolist(), strict=True), key=lambda t: (-abs(t[1] - t[2]), t[0]))
    return DimensionAgreement(
        dimension=name,
        levels=levels,
        judge_vs_humans=judge_vs_humans(a, b, k),
        humans=alpha_estimate([list(v.values()) for v in humans.values()], k) if len(annotators) >= 2 else None,
        self_consistency=alpha_estimate(list(judge.values()), k) if repeats >= 2 else None,
        ceiling=alternative_annotator_test(judged, humans, levels, epsilon=epsilon),
        disagreements=tuple((i, j, float(h)) for i, j, h in gaps[:worst] if j != h),
        adjudicated=sum(1 for i in shared if i in settled),
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
