"""Corrected estimates of a rubric's scores: the judge's own mean, the people's, and the prediction-powered one.

Where every level of the judge's holds two labels (or all of its items), the corrected estimate is stratified by
the judge's level (stratified_mean: StratPPI with one stratum per level, valid when the labels are a random sample
within each level, as label next's picks are); otherwise it follows PPI++ (Angelopoulos, Duchi and Zrnic,
"PPI++: Efficient prediction-powered inference", 2024), the power-tuned form of prediction-powered inference (Angelopoulos, Bates, Fannjiang,
Jordan and Zrnic, "Prediction-powered inference", Science 382, 2023), for a mean, as the reference code
`ppi_py` computes it (`ppi_mean_pointestimate` and `ppi_mean_ci` with `lam=None`):

    theta_PP = lambda * mean(f(X_unlabelled)) + mean(Y - lambda * f(X_labelled))
    lambda   = Cov_n(Y, f(X_labelled)) / ((1 + n/N) * Var(f over all n + N items)), clipped to [0, 1]
    interval = theta_PP -/+ z_(1 - alpha/2) * sqrt(Var(lambda f(X_unlabelled)) / N + Var(Y - lambda f(X_labelled)) / n)

where Y are people's values on the n labelled items, f the judge's, N the judged items without people's labels
(Cov_n and the variances in the interval divide by n and N, the pooled variance by n + N - 1, as in ppi_py).
lambda = 0 is the people's own mean; lambda = 1 is plain PPI. The tuned lambda makes the interval (asymptotically)
never wider than the people-only one.

The people-only and judge-only intervals are the classical CLT (normal) intervals of a mean, the standard
deviation dividing by n (ppi_py's `classical_mean_ci`), for numeric scales and for shares alike: the corrected
interval with lambda = 0 is exactly the people-only one, so the two are compared like for like.

Where the doors' figures (dimension_estimates) would get an interval of no width, every value behind it being
equal (a label none of the labelled items carries gives a share of 0, lambda 0 and a standard error of 0), no
interval is shown as one: a share gets the Wilson score 95% interval of its k of n values (Wilson, "Probable
inference, the law of succession, and statistical inference", JASA 22, 1927), which has width for k = 0 and k = n,
and a mean gets no interval and a reason. A normal interval on fewer than FEW_LABELS labelled items says so.

The estimand is the mean for an integer scale (in the scale's own units) and, for a categorical scale, the share
of each label (the mean of a 0/1 indicator per label). The labelled items must be a random sample of each of the
judge's levels (stratified) or of the judged ones (PPI++), judged by the same judge configuration; nothing here can
check that, and docs/judging.md says so.
"""

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

Z_95 = 1.959963984540054
"""The standard normal's 97.5% quantile (scipy.stats.norm.ppf(0.975)): two-sided 95% intervals."""
MIN_LABELLED = 2
"""Fewer labelled items than this give no interval (a variance needs two): "not enough data"."""
FEW_LABELS = 30
"""Below this many labelled items a normal interval's method carries FEW_LABELS_NOTE (docs/judging.md's floor)."""
FEW_LABELS_NOTE = f"few labels (n<{FEW_LABELS}): the normal interval may be too narrow"
NO_WIDTH_NOTE = "every value equal, so the interval has no width: treat it with care"
SAME_VALUE = "every labelled value is the same: label more items"
"""The reason a mean whose labelled values are all equal has no interval."""
CLASSICAL, JUDGE_ONLY, PPI_PLUS_PLUS = "classical CLT", "judge only, CLT", "PPI++ (power-tuned)"
STRATIFIED = "PPI stratified by the judge's level"
COLLAPSED_NOTE = f"the judge's levels with fewer than {MIN_LABELLED} labels joined a neighbouring level"
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class MeanEstimate:
    """One estimate of a mean (or a share) with its 95% interval."""

    value: float | None
    """None where there is not enough data (see reason)."""
    low: float | None
    high: float | None
    n: int
    """Labelled items it rests on (judged items for the judge-only estimate)."""
    method: str
    """The procedure: CLASSICAL, JUDGE_ONLY or PPI_PLUS_PLUS, with any caveat."""
    se: float | None = None
    """The standard error the interval is built from (differences add the variances)."""
    lam: float | None = None
    """PPI++'s power-tuning parameter, in [0, 1]; None for the other methods."""
    unlabelled: int = 0
    """Judged items without people's labels the corrected estimate used (N)."""
    reason: str = ""
    """Why there is no value, or no interval, when there is none."""

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {"value": self.value, "low": self.low, "high": self.high}

    @property
    def notes(self) -> tuple[str, ...]:
        """The caveats the method carries after the procedure's name (each after a "; ")."""
        return tuple(self.method.split("; ")[1:])

    def __str__(self) -> str:
        if self.value is None:
            return f"not enough data ({self.reason})"
        if self.low is None or self.high is None:
            return f"{self.value:.3f} (no interval: {self.reason})"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def not_enough(n: int, method: str, reason: str) -> MeanEstimate:
    return MeanEstimate(None, None, None, n, method, reason=reason)


def _interval(value: float, se: float, n: int, method: str, **extra: float | int | None) -> MeanEstimate:
    return MeanEstimate(value, value - Z_95 * se, value + Z_95 * se, n, method, se=se, **extra)  # type: ignore[arg-type]


def classical_mean(y: FloatArray, *, method: str = CLASSICAL) -> MeanEstimate:
    """The mean with its CLT interval (ppi_py's classical_mean_ci: the standard deviation divides by n)."""
    y = np.asarray(y, dtype=np.float64)
    n = int(y.size)
    if n < MIN_LABELLED:
        return not_enough(n, method, f"{n} item(s); an interval needs at least {MIN_LABELLED}")
    se = float(y.std() / math.sqrt(n))
    if se == 0.0:
        method += f"; {NO_WIDTH_NOTE}"
    return _interval(float(y.mean()), se, n, method)


def wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval of a share of k in n (n >= 1): the p whose score test does not reject,
    (p + z^2/2n -/+ z sqrt(p(1 - p)/n + z^2/4n^2)) / (1 + z^2/n), p = k/n."""
    p, z2 = k / n, Z_95**2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z_95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def judge_only(f: FloatArray) -> MeanEstimate:
    """The judge's mean over every judged item with its CLT interval: as precise as the items are many, and
    biased by whatever the judge gets wrong, which no number of items fixes."""
    return classical_mean(f, method=JUDGE_ONLY)


def power_tuning(y: FloatArray, f_labelled: FloatArray, f_unlabelled: FloatArray) -> float:
    """PPI++'s lambda for a mean (ppi_py's _calc_lam_glm, one coordinate, clipped to [0, 1]). A judge that gave
    every item the same value carries no information: lambda 0."""
    n, big_n = y.size, f_unlabelled.size
    covariance = float(np.sum((y - y.mean()) * (f_labelled - f_labelled.mean())) / n)
    pooled = np.concatenate([f_labelled, f_unlabelled])
    # ppi_mean calls this with n >= 2 labelled and N >= 1 unlabelled items, so the pooled variance is defined
    variance = float(np.var(pooled, ddof=1))
    if variance == 0.0:
        return 0.0
    lam = covariance / ((1 + n / big_n) * variance)
    return float(min(1.0, max(0.0, lam)))


def ppi_mean(
    y: FloatArray, f_labelled: FloatArray, f_unlabelled: FloatArray, *, lam: float | None = None
) -> MeanEstimate:
    """The corrected (prediction-powered) mean: people's values y and the judge's f on the same labelled items,
    and the judge's values on the judged items without labels. lam=None tunes lambda (PPI++); a given lam is
    used as is (1: plain PPI, 0: the people's mean)."""
    y = np.asarray(y, dtype=np.float64)
    f_labelled = np.asarray(f_labelled, dtype=np.float64)
    f_unlabelled = np.asarray(f_unlabelled, dtype=np.float64)
    n, big_n = int(y.size), int(f_unlabelled.size)
    if f_labelled.size != n:
        raise ValueError(f"y has {n} values but f_labelled {f_labelled.size}: they must be the same items")
    if n < MIN_LABELLED:
        return not_enough(n, PPI_PLUS_PLUS, f"{n} labelled item(s); an interval needs at least {MIN_LABELLED}")
    if big_n == 0:
        people = classical_mean(y)
        return MeanEstimate(
            people.value,
            people.low,
            people.high,
            n,
            f"{CLASSICAL}: every judged item is labelled, so the people's mean is the estimate",
            se=people.se,
            lam=0.0,
        )
    if lam is None:
        lam = power_tuning(y, f_labelled, f_unlabelled)
    rectifier = y - lam * f_labelled
    value = float(lam * f_unlabelled.mean() + rectifier.mean())
    se = math.sqrt(float(np.var(lam * f_unlabelled)) / big_n + float(np.var(rectifier)) / n)
    method = PPI_PLUS_PLUS if se > 0.0 else f"{PPI_PLUS_PLUS}; {NO_WIDTH_NOTE}"
    return _interval(value, se, n, method, lam=lam, unlabelled=big_n)


def strata_of(levels: NDArray[np.int64], labelled: NDArray[np.int64]) -> list[tuple[int, ...]]:
    """The judge's levels grouped into strata of at least MIN_LABELLED labelled items each: a level with fewer
    joins the next level up (the last joins the one below), as a survey collapses strata too thin to estimate a
    variance (Cochran, "Sampling techniques", 1977, 5A.12). levels: the judge's level of every judged item;
    labelled: of the labelled ones. [] when fewer than MIN_LABELLED items are labelled."""
    counts = {int(v): int(np.sum(labelled == v)) for v in np.unique(levels)}
    strata: list[list[int]] = []
    held = 0
    for level in sorted(counts):
        if strata and held < MIN_LABELLED:
            strata[-1].append(level)
        else:
            strata.append([level])
            held = 0
        held += counts[level]
    if len(strata) > 1 and held < MIN_LABELLED:
        strata[-2].extend(strata.pop())
    return [tuple(s) for s in strata] if sum(counts.values()) >= MIN_LABELLED else []


def stratified_mean(
    y: FloatArray, g_labelled: NDArray[np.int64], g_unlabelled: NDArray[np.int64], *, share: bool = False
) -> MeanEstimate:
    """The corrected mean stratified by the judge's level: StratPPI (Fisch, Maynez, Hofer, Dhingra, Globerson and
    Cohen, "Stratified prediction-powered inference for hybrid language model evaluation", NeurIPS 2024) with the
    judge's levels as strata. Within one level the judge's value is one number, so each stratum's PPI estimate
    (with or without power tuning) is the people's mean there, and the estimate is the post-stratified mean

        theta = sum_h W_h * mean(Y_h),   W_h = N_h / N   (N_h judged items at level h, of N),
        Var   = sum_h W_h^2 * s_h^2 / n_h  +  sum_h W_h * (mean(Y_h) - theta)^2 / N

    (s_h the sample standard deviation of the n_h people's values at level h; the second term is the weights'
    own noise, as PPI counts the judge's mean over the N items). It needs the labelled items to be a random
    sample within each level only, which label next's picks are (they are drawn at random within a level, more
    from some levels than others) and a simple random sample is too; plain PPI++ needs the whole labelled set to
    be a random sample, and label next's picks bias it. Levels with fewer than two labels are collapsed into a
    neighbour (strata_of). y: people's values on the labelled items; g_*: the judge's level of each labelled
    and each unlabelled item."""
    y = np.asarray(y, dtype=np.float64)
    g_labelled = np.asarray(g_labelled, dtype=np.int64)
    g_unlabelled = np.asarray(g_unlabelled, dtype=np.int64)
    if g_labelled.size != y.size:
        raise ValueError(f"y has {y.size} values but g_labelled {g_labelled.size}: they must be the same items")
    if g_unlabelled.size == 0 and y.size >= MIN_LABELLED:
        return ppi_mean(y, np.zeros(y.size), np.zeros(0))  # every judged item labelled: the people's mean
    levels = np.concatenate([g_labelled, g_unlabelled])
    strata = strata_of(levels, g_labelled)
    if not strata:
        return not_enough(
            int(y.size), STRATIFIED, f"{y.size} labelled item(s); an interval needs at least {MIN_LABELLED}"
        )
    big_n = levels.size
    weights, means, variances = [], [], []
    for stratum in strata:
        members = np.isin(g_labelled, stratum)
        weights.append(float(np.isin(levels, stratum).sum()) / big_n)
        means.append(float(y[members].mean()))
        variances.append(level_spread(y[members], share=share) ** 2 / int(members.sum()))
    w, m = np.array(weights), np.array(means)
    value = float(np.sum(w * m))
    se = math.sqrt(float(np.sum(w**2 * np.array(variances))) + float(np.sum(w * (m - value) ** 2)) / big_n)
    method = STRATIFIED
    if len(strata) < int(np.unique(levels).size):
        method += f"; {COLLAPSED_NOTE}"
    if se == 0.0:
        method += f"; {NO_WIDTH_NOTE}"
    return _interval(value, se, int(y.size), method, unlabelled=int(g_unlabelled.size))


def level_spread(y: FloatArray, *, share: bool) -> float:
    """The sample standard deviation of one level's people's values; for a share, with one 0 and one 1 added
    (the plus-two rule of Agresti and Caffo, "Simple and effective confidence intervals for proportions and
    differences of proportions result from adding two successes and two failures", Am. Stat. 54, 2000): a level
    whose few labels all agree has a spread all the same, and an interval or an allocation that took it for 0
    would stop looking there (label next sends most labels where people disagree, so agreeing levels stay small)."""
    values = np.concatenate([y, [0.0, 1.0]]) if share else y
    return float(np.std(values, ddof=1))


def stratifiable(g_labelled: NDArray[np.int64], g_unlabelled: NDArray[np.int64]) -> bool:
    """Whether every level of the judge's holds enough labels to be a stratum of its own: at least MIN_LABELLED,
    or all of its judged items where it has fewer. Decided from where the labels are, never from their values."""
    held = Counter(g_labelled.tolist())
    judged = held + Counter(g_unlabelled.tolist())
    return bool(g_unlabelled.size) and all(held[level] >= min(MIN_LABELLED, n) for level, n in judged.items())


def is_share(values: FloatArray) -> bool:
    """Whether an estimand's scale values are a label's 0/1 indicator (see estimands)."""
    return bool(np.all((values == 0.0) | (values == 1.0)))


def corrected_mean(
    values: FloatArray, g_labelled: NDArray[np.int64], y_labelled: NDArray[np.int64], g_unlabelled: NDArray[np.int64]
) -> MeanEstimate:
    """The corrected estimate of an estimand (values: each scale place's value) from the judge's places on the
    labelled and unlabelled items and the people's places on the labelled ones: stratified by the judge's level
    where every level holds enough labels (valid for label next's picks and for a random sample alike), else
    PPI++ (valid for a random sample of the judged items only, as the pages say)."""
    y = values[y_labelled]
    if stratifiable(g_labelled, g_unlabelled):
        return stratified_mean(y, g_labelled, g_unlabelled, share=is_share(values))
    return ppi_mean(y, values[g_labelled], values[g_unlabelled])


def without_zero_width(estimate: MeanEstimate, values: FloatArray, *, share: bool) -> MeanEstimate:
    """The estimate, unless its interval has no width: then, where every value behind it is equal, a share's
    Wilson score interval of its k of n values (for the corrected estimate lambda is then 0: the people-only
    estimate), and for a mean, or values that differ, no interval and a reason. values: the people's labelled
    values (the judge's judged ones for the judge-only estimate)."""
    if estimate.value is None or estimate.low is None or estimate.low != estimate.high:
        return estimate
    base = "; ".join(note for note in estimate.method.split("; ") if note != NO_WIDTH_NOTE)
    equal = values.size > 0 and bool(np.all(values == values[0]))
    if share and equal:
        k, n = int(values.sum()), int(values.size)
        low, high = wilson(k, n)
        via = "; lambda 0, so the people-only estimate" if estimate.lam is not None else ""
        method = f"{base}{via}; every value is {values[0]:g}: Wilson score interval of {k} of {n}"
        return replace(estimate, low=low, high=high, se=None, method=method)
    reason = SAME_VALUE if equal else "the interval has no width: label more items"
    if estimate.method.startswith(JUDGE_ONLY):
        reason = "every judged value is the same: the judge told no item apart" if equal else reason
    return replace(estimate, low=None, high=None, se=None, method=base, reason=reason)


def few_labels(estimate: MeanEstimate) -> MeanEstimate:
    """A normal interval on fewer than FEW_LABELS labelled items says that it may be too narrow."""
    if estimate.low is None or estimate.se is None or estimate.n >= FEW_LABELS:
        return estimate
    return replace(estimate, method=f"{estimate.method}; {FEW_LABELS_NOTE}")


def difference(a: MeanEstimate, b: MeanEstimate) -> MeanEstimate:
    """a - b for two estimates from independent samples (two groups of items): the variances add."""
    if a.value is None or b.value is None or a.se is None or b.se is None:
        missing = a if a.value is None or a.se is None else b
        reason = missing.reason or "no interval"
        if missing.value is not None and "Wilson" in missing.method:
            reason = "every value of one side is equal (a Wilson interval): no standard error to add"
        return not_enough(min(a.n, b.n), f"difference of {a.method}", reason)
    se = math.sqrt(a.se**2 + b.se**2)
    return _interval(a.value - b.value, se, min(a.n, b.n), f"difference of {a.method}; variances added")


# --- per dimension: the three estimates of each estimand -----------------------------------------


@dataclass(frozen=True)
class EstimandRow:
    """The three estimates of one estimand of one dimension (its mean, or the share of one label)."""

    dimension: str
    estimand: str
    """"mean" for an integer scale, "share:<label>" for a categorical one."""
    judge_only: MeanEstimate
    people_only: MeanEstimate
    corrected: MeanEstimate
    all_people: tuple[float, int] | None
    """(the people's mean over every judged item, n) where every judged item has people's labels (--labelled
    hides some: this is the figure the corrected estimate tries to reach); else None."""

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.dimension,
            "estimand": self.estimand,
            "judge_only": self.judge_only.as_dict(),
            "people_only": {**self.people_only.as_dict(), "n": self.people_only.n},
            "corrected": self.corrected.as_dict(),
            "all_people": None if self.all_people is None else {"value": self.all_people[0], "n": self.all_people[1]},
        }


def notes_of(rows: "Iterable[EstimandRow] | Iterable[DifferenceRow]") -> list[str]:
    """Each caveat the rows' estimates carry (their methods' notes), once, in the order met."""
    seen: dict[str, None] = {}
    for row in rows:
        for found in (row.judge_only, *_shown(row)):
            seen.update(dict.fromkeys(found.notes))
    return list(seen)


def _shown(row: "EstimandRow | DifferenceRow") -> tuple[MeanEstimate, ...]:
    if isinstance(row, EstimandRow):
        return (row.people_only, row.corrected)
    return (row.a, row.b, row.corrected)


def estimands(levels: tuple[str, ...], integer: bool) -> list[tuple[str, FloatArray]]:
    """(name, the value of each place on the scale): the mean of an integer scale in its own units; for a
    categorical one, each label's share (0/1 indicators), the scale's first label (the best) first."""
    if integer:
        return [("mean", np.array([float(level) for level in levels]))]
    k = len(levels)
    return [(f"share:{levels[i]}", (np.arange(k) == i).astype(np.float64)) for i in reversed(range(k))]


def dimension_estimates(
    dimension: str,
    levels: tuple[str, ...],
    integer: bool,
    judged: dict[int, int],
    people: dict[int, int],
    keep: set[int] | frozenset[int] | None = None,
) -> list[EstimandRow]:
    """judged: item -> the judge's place on the scale (0 = worst level); people: item -> the people's place.
    keep: the labelled items whose labels count (None: all); the others count as unlabelled."""
    items = sorted(judged)
    labelled = [i for i in items if i in people and (keep is None or i in keep)]
    chosen = set(labelled)
    unlabelled = [i for i in items if i not in chosen]
    everyone = bool(items) and all(i in people for i in items)
    f_all = np.array([judged[i] for i in items], dtype=np.int64)
    f_lab = np.array([judged[i] for i in labelled], dtype=np.int64)
    f_unl = np.array([judged[i] for i in unlabelled], dtype=np.int64)
    y_lab = np.array([people[i] for i in labelled], dtype=np.int64)
    y_all = np.array([people[i] for i in items if i in people], dtype=np.int64)
    rows = []
    for name, value in estimands(levels, integer):
        lo, hi = float(value.min()), float(value.max())
        share = not integer
        y = value[y_lab]
        rows.append(
            EstimandRow(
                dimension=dimension,
                estimand=name,
                judge_only=on_scale(without_zero_width(judge_only(value[f_all]), value[f_all], share=share), lo, hi),
                people_only=few_labels(on_scale(without_zero_width(classical_mean(y), y, share=share), lo, hi)),
                corrected=few_labels(
                    on_scale(without_zero_width(corrected_mean(value, f_lab, y_lab, f_unl), y, share=share), lo, hi)
                ),
                all_people=(float(value[y_all].mean()), int(y_all.size)) if everyone else None,
            )
        )
    return rows


def on_scale(estimate: MeanEstimate, lo: float, hi: float) -> MeanEstimate:
    """The estimate and its interval clipped to what the estimand can be (a share to [0, 1], a mean to the
    scale's ends): a normal interval may reach past them, and a share of -0.008 claims a precision it lacks.
    The truth lies inside, so clipping keeps the interval's coverage; the method says when it happened."""
    if estimate.value is None or estimate.low is None or estimate.high is None:
        return estimate
    clipped = replace(
        estimate,
        value=min(max(estimate.value, lo), hi),
        low=min(max(estimate.low, lo), hi),
        high=min(max(estimate.high, lo), hi),
    )
    if (clipped.value, clipped.low, clipped.high) == (estimate.value, estimate.low, estimate.high):
        return estimate
    return replace(clipped, method=f"{estimate.method}; clipped to [{lo:g}, {hi:g}]")


# --- how many labels? --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetPoint:
    """The interval widths with `labelled` people's labels, over `draws` seeded subsamples of the labelled items
    (the rest count as unlabelled)."""

    labelled: int
    corrected: float
    """The median width of the corrected 95% interval."""
    corrected_low: float
    corrected_high: float
    """The 10th and 90th percentiles of that width over the subsamples."""
    people_only: float
    """The median width of the people-only interval on the same subsamples."""


def budget_sizes(available: int) -> list[int]:
    """Label counts to try: a doubling ladder from 10 up to what is labelled, and all of it."""
    sizes = [s for s in (10, 20, 40, 80, 160, 320, 640, 1280, 2560) if s < available]
    return [*sizes, available] if available >= MIN_LABELLED else []


def budget_curve(
    values: FloatArray,
    judged: dict[int, int],
    people: dict[int, int],
    *,
    draws: int = 40,
    seed: int = 0,
) -> list[BudgetPoint]:
    """The corrected interval's width against the number of labelled items, by subsampling the labelled items
    (seeded): what a labelling budget buys on these data. values: each scale place's value (see estimands)."""
    labelled = sorted(i for i in judged if i in people)
    rng = np.random.default_rng(seed)
    y_lab_all = np.array([people[i] for i in labelled], dtype=np.int64)
    y = values[y_lab_all]
    g_lab_all = np.array([judged[i] for i in labelled], dtype=np.int64)
    g_rest = np.array([judged[i] for i in judged if i not in people], dtype=np.int64)
    out = []
    for size in budget_sizes(len(labelled)):
        widths, people_widths = [], []
        for _ in range(1 if size == len(labelled) else draws):
            picked = np.zeros(len(labelled), dtype=bool)
            picked[rng.choice(len(labelled), size=size, replace=False)] = True
            rest = np.concatenate([g_rest, g_lab_all[~picked]])
            corrected = corrected_mean(values, g_lab_all[picked], y_lab_all[picked], rest)
            alone = classical_mean(y[picked])
            widths.append(corrected.width if corrected.width is not None else math.nan)
            people_widths.append(alone.width if alone.width is not None else math.nan)
        w = np.array(widths)
        out.append(
            BudgetPoint(
                labelled=size,
                corrected=float(np.nanmedian(w)),
                corrected_low=float(np.nanpercentile(w, 10)),
                corrected_high=float(np.nanpercentile(w, 90)),
                people_only=float(np.nanmedian(people_widths)),
            )
        )
    return out


@dataclass(frozen=True)
class Stratum:
    """The judged items the judge put at one level, for the "label next" rule."""

    level: str
    judged: int
    labelled: int
    residual_sd: float | None
    """The standard deviation of people minus lambda times judge among its labelled items; None below two."""
    target: float
    """Its share of the labels under Neyman allocation (judged x residual sd), in items, for the next budget."""


def label_next(
    values: FloatArray,
    levels: tuple[str, ...],
    judged: dict[int, int],
    people: dict[int, int],
    *,
    count: int = 10,
    seed: int = 0,
) -> tuple[list[int], list[Stratum]]:
    """Which unlabelled items to label next, to narrow this estimand's corrected interval most: stratified by the
    judge's level, with Neyman allocation. The corrected interval's width is driven by the spread of people minus
    lambda times the judge; within the judge's level h the judge's value is one number, so that spread is the
    spread sd_h of people's values alone (whatever lambda is), and a sample allocated in proportion
    to N_h x sd_h (N_h judged items at level h) minimises the variance of a stratified mean. A level with fewer
    than two labelled items has no sd yet: it gets the largest sd seen (at least 0.5), so unexplored levels are
    sampled first, leaning to caution. Each next label goes to the level furthest below its target; within a
    level, items are drawn at random (seeded), as the estimate needs a random sample."""
    rng = np.random.default_rng(seed)
    by_level: dict[int, list[int]] = {}
    for item, v in sorted(judged.items()):
        by_level.setdefault(v, []).append(item)
    sds: dict[int, float | None] = {}
    for v, items in by_level.items():
        residual = np.array([values[people[i]] for i in items if i in people], dtype=np.float64)
        sds[v] = level_spread(residual, share=is_share(values)) if residual.size >= 2 else None
    known = [s for s in sds.values() if s is not None]
    fallback = max([0.5, *known])
    spread = {v: fallback if sd is None else sd for v, sd in sds.items()}
    weight = {v: len(items) * spread[v] for v, items in by_level.items()}
    labelled_now = {v: sum(1 for i in items if i in people) for v, items in by_level.items()}
    total = sum(labelled_now.values()) + count
    weights_sum = sum(weight.values()) or 1.0
    targets = {v: total * weight[v] / weights_sum for v in by_level}
    pools = {v: [i for i in rng.permutation(items).tolist() if i not in people] for v, items in by_level.items()}
    have = dict(labelled_now)
    picked: list[int] = []
    # until the count is reached or every level's unlabelled items are taken
    while len(picked) < count and any(pools.values()):
        open_levels = [v for v in by_level if pools[v]]
        v = max(open_levels, key=lambda level: (targets[level] - have[level], -level))
        picked.append(int(pools[v].pop(0)))
        have[v] += 1
    strata = [
        Stratum(levels[v], len(by_level[v]), labelled_now[v], sds[v], round(targets[v], 1)) for v in sorted(by_level)
    ]
    return picked, strata


# --- what the reads fill in ---------------------------------------------------------------------------
# selectors.estimate_table reads the database into these (within one rubric version and one judge
# configuration); every door (command, API, judge card, comparison page) asks the selectors for them.

GROUPINGS = ("source", "candidate", "group")
"""What a selection or a comparison is by: the transcript's source, the candidate's name (a tutor model or an
agent: Item.key), or a run group (conversations of runs, source "run")."""


@dataclass(frozen=True)
class Selection:
    """Which judged items count: every one, or those of one source, candidate or run group."""

    source: str | None = None
    candidate: str | None = None
    group: str | None = None

    def describe(self) -> str:
        parts = [f"{name} {value!r}" for name, value in self.__dict__.items() if value is not None]
        return ", ".join(parts) or "all judged items"


EVERYTHING = Selection()
"""Every judged item."""


@dataclass(frozen=True)
class DimensionData:
    """One dimension's values under the configuration's rubric version: places on its scale, 0 = worst."""

    name: str
    levels: tuple[str, ...]
    """Worst first."""
    integer: bool
    judged: dict[int, int]
    """item -> the lower median of the judge's repeats."""
    people: dict[int, int]
    """item -> the people's value (judged items only): the adjudicated label where there is one, else the lower
    median of the people's labels."""
    adjudicated: frozenset[int] = frozenset()
    """The items of people whose value is an adjudicated label."""


@dataclass(frozen=True)
class EstimateTable:
    """The three estimates of every estimand of every dimension, for one judge configuration and selection."""

    rubric: str
    rubric_version: int
    configuration: str
    configuration_id: int
    selection: str
    items: int
    """Judged items in the selection."""
    labelled: int
    """Judged items whose people's labels count (after --labelled)."""
    labelled_of: int
    """Judged items with people's labels before any were hidden."""
    rows: tuple[EstimandRow, ...]
    data: tuple[DimensionData, ...] = ()
    keep: frozenset[int] | None = None
    """The labelled items kept by a labelling budget (None: every labelled item)."""
    adjudicated: int = 0
    """Of the labelled items counted, those whose people's value is an adjudicated label on some dimension (the
    others' is the lower median of the raw labels)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "rubric": self.rubric,
            "adjudicated": self.adjudicated,
            "people_value": PEOPLE_VALUE,
            "dimensions": [row.as_dict() for row in self.rows],
        }


PEOPLE_VALUE = "the adjudicated label where one was set, else the lower median of the people's raw labels"
"""What a labelled item's people's value is, in every estimate and in the judge-vs-people agreement."""


@dataclass(frozen=True)
class DifferenceRow:
    """The corrected estimates of one estimand in two groups, and their difference (a minus b)."""

    dimension: str
    estimand: str
    a: MeanEstimate
    b: MeanEstimate
    corrected: MeanEstimate
    judge_only: MeanEstimate
    """The judges' difference, for contrast: a bias shared by both groups cancels, a bias that differs does not."""

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.dimension,
            "estimand": self.estimand,
            "a": self.a.as_dict(),
            "b": self.b.as_dict(),
            "difference": self.corrected.as_dict(),
            "judge_only_difference": self.judge_only.as_dict(),
        }


def labelled_subset(data: list[DimensionData] | tuple[DimensionData, ...], labelled: int, seed: int) -> frozenset[int]:
    """`labelled` of the items people labelled (on any dimension), drawn at random with the seed."""
    items = sorted({i for d in data for i in d.people})
    if labelled > len(items):
        labelled = len(items)
    picked = np.random.default_rng(seed).choice(len(items), size=labelled, replace=False)
    return frozenset(items[int(k)] for k in picked)


def table_rows(
    data: list[DimensionData] | tuple[DimensionData, ...], keep: frozenset[int] | None
) -> tuple[EstimandRow, ...]:
    """Every estimand of every dimension, in the rubric's order."""
    return tuple(r for d in data for r in dimension_estimates(d.name, d.levels, d.integer, d.judged, d.people, keep))


def differences(a: EstimateTable, b: EstimateTable) -> list[DifferenceRow]:
    """The corrected difference a minus b of each estimand between two groups of items: the difference of two
    PPI++ estimates from independent samples, their variances added; and the judges' difference beside it."""
    return [
        DifferenceRow(
            x.dimension,
            x.estimand,
            x.corrected,
            y.corrected,
            difference(x.corrected, y.corrected),
            difference(x.judge_only, y.judge_only),
        )
        for x, y in zip(a.rows, b.rows, strict=True)
    ]


@dataclass(frozen=True)
class Budget:
    """How many labels: one estimand's corrected interval width against the number of labelled items, and the
    items to label next."""

    dimension: str
    estimand: str
    points: tuple[BudgetPoint, ...]
    next_items: tuple[int, ...]
    strata: tuple[Stratum, ...]
    rule: str = "stratified by the judge's level, Neyman allocation (judged items x spread of people - lambda judge)"

    def as_dict(self) -> dict[str, object]:
        return {
            "dimension": self.dimension,
            "estimand": self.estimand,
            "points": [
                {
                    "labelled": p.labelled,
                    "corrected": p.corrected,
                    "corrected_low": p.corrected_low,
                    "corrected_high": p.corrected_high,
                    "people_only": p.people_only,
                }
                for p in self.points
            ],
            "label_next": list(self.next_items),
            "rule": self.rule,
        }


def budget(table: EstimateTable, *, draws: int = 40, seed: int = 0, count: int = 10) -> list[Budget]:
    """For each dimension, its estimand with the widest corrected interval: the width curve by subsampling the
    labelled items, and the unlabelled items whose labels would narrow that interval most. The widest first."""
    out = []
    for d in table.data:
        rows = [r for r in table.rows if r.dimension == d.name]
        if not rows:
            continue
        widest = max(rows, key=lambda r: r.corrected.width if r.corrected.width is not None else math.inf)
        values = dict(estimands(d.levels, d.integer))[widest.estimand]
        people = d.people if table.keep is None else {i: v for i, v in d.people.items() if i in table.keep}
        points = budget_curve(values, d.judged, people, draws=draws, seed=seed)
        picked, strata = label_next(values, d.levels, d.judged, people, count=count, seed=seed)
        out.append(Budget(d.name, widest.estimand, tuple(points), tuple(picked), tuple(strata)))
    return sorted(out, key=lambda b: -(b.points[-1].corrected if b.points else math.inf))
