"""The gates' noise model: what a comparison of a candidate batch with a baseline batch can tell.

One function (`family_test`) computes every interval, test and minimum detectable drop the tutoring gate
shows, at every door (CLI, API, dashboard, comparison files), and `plan` answers the planner's question
(how many runs per persona detect a drop of the threshold's size) from the same formulas.

The unit of replication is a run. For a dimension d, persona p has baseline runs B_p (n_Bp of them) and
candidate runs C_p (n_Cp). The primary comparison, one per dimension, is the batch mean's change

    Delta_d = (1/P) * sum_p (mean C_p - mean B_p)        over the P personas both batches measured.

Unpaired (the usual case: another seed): each persona keeps its own spread (personas do not share one: a
steady persona and an erratic one differ by a factor of ten in the offline judge's scores), and the degrees of
freedom are Welch-Satterthwaite's, so a spread that comes from a few personas is trusted as little as it
deserves:
    s_p^2 = persona p's run-to-run variance, from both batches: sum over its two cells of sum (x - cell mean)^2,
            divided by f_p = n_Bp + n_Cp - 2; taken as max(s_p^2, FLOOR)
            A persona with one run in each batch (f_p = 0) borrows the variance pooled over the personas that
            have repeats (sum of their sums of squares over the sum of their f_p), with that pooled f; the
            report counts such personas.
    c_p   = (1/n_Bp + 1/n_Cp) / P^2
    SE^2  = sum_p c_p s_p^2
    df    = SE^4 / sum_p (c_p s_p^2)^2 / f_p                (Satterthwaite 1946, Welch 1947)
    With one candidate run per persona (1/n_Cp = 1) this is a prediction interval for a new run from the
    baseline's spread; with k >= 2 the candidate's own repeats add to each f_p. When every persona has the same
    runs and spread, SE is the pooled (ordinary least squares) one and df is the pooled sum of f_p; when the
    spread is concentrated in a few personas, df falls towards their number and the test widens (with the
    pooled df, a baseline of 2 runs whose spread came from one or two personas made 20% false alarms at k=1).

Paired (every candidate run has a baseline run of the same persona, topic and seed: the simulator's rolls
and the tutor's seeded calls are the same, so the persona's and the rolls' share of the spread cancels):
    D_p   = mean over p's pairs of (C - B);  Delta = mean_p D_p
    SE^2  = max(var_p(D_p), 2 * FLOOR / m) / P,  df = P - 1     (m: the fewest pairs of a persona)

Identical runs are not evidence of zero spread: the variance is never taken below FLOOR, the variance of
rounding to the judge's whole-point scale (resolution^2 / 12, Sheppard's correction), so two runs that
happen to score the same do not make an interval of no width.

Each dimension is tested one-sided (H0: no drop). The judge's scores are whole points, and with the offline
judge most personas score the same run after run while a few jump by 2-4 points now and then: a t test then
cries wolf (13% false alarms at one run per persona in bench/gate_power.py, with Welch's df). So the p-value
comes from a permutation test wherever there are LEAST_ARRANGEMENTS ways or more to deal the runs: unpaired,
each persona's runs are dealt again between the batches (stratified by persona; under no change they are
exchangeable); paired, each pair's difference gets a random sign. PERMUTATIONS random draws, p = (1 + draws at
least as extreme) / (1 + draws) (Phipson and Smyth 2010), exact in level whatever the scores' distribution.
With fewer arrangements (one persona, a handful of runs) the permutation test could never reach alpha / D, and
Student's t on df decides; so it does for a change corrected by people's labels. The family of the rubric's
dimensions is controlled with Holm's step-down procedure (Holm 1979) at alpha (0.05 by default), so the gate's
false-alarm rate over all its comparisons is at most alpha. Per-persona rows are diagnostics and decide
nothing. The interval [low, high] is the t interval on df.

The minimum detectable drop of a dimension, at Holm's strictest level alpha/D and the chosen power:
    MDD = (t_(1 - alpha/D, f) + t_(power, f)) * SE
with f the pooled degrees of freedom (sum of f_p; paired, P - 1): the power of the permutation test follows
the spread of the change, which SE measures, not how few personas carry it (Welch's df would call batches
blind that the permutation test sees through).
When some dimension's MDD exceeds the threshold and no drop was significant, the comparison is
inconclusive: the batch could not have seen a drop of the threshold's size.

A run's score comes from one judge call, so the judge's own call-to-call noise is inside the run-to-run
variance; a judge's systematic error common to both batches cancels in Delta. An error that differs between
the batches (a judge kinder to one tutor's manner than people are) does not cancel; where people labelled runs
of both batches (at least LEAST_LABELLED each), the change is corrected as prediction-powered inference does
(Angelopoulos et al. 2023; PPI++'s power tuning, Angelopoulos, Duchi and Zrnic 2024), with y people's value
and f the judge's on the labelled runs of batch b (n_b of them):
    Delta_PP = lambda * Delta + mean_C(y - lambda f) - mean_B(y - lambda f)
    SE_PP^2  = lambda^2 SE^2 + sum_b var_b(y - lambda f) / n_b         (each var at least FLOOR)
    lambda   = sum_b cov_b(y, f) / n_b / (SE^2 + sum_b var_b(f) / n_b), clipped to [0, 1]
    df       = Satterthwaite's over the three terms (df, n_C - 1, n_B - 1)
lambda minimises SE_PP^2, so the corrected interval is never wider than the people-only one (lambda 0: the
people's own change) nor than plain PPI's (lambda 1). The labelled runs must be a random sample of each
batch's runs; the covariance between Delta and the labelled runs' mean is left out, as PPI's formulas leave
it out (they take the labelled items apart from the rest).

References: E. Miller, "Adding Error Bars to Evals: A Statistical Approach to Language Model Evaluations"
(arXiv:2411.00640, 2024), sections on clustered standard errors, paired differences and power analysis;
S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6 (1979).
"""

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# scipy is imported where it is used: it takes longer to import than the rest of the app.

ALPHA = 0.05
"""The gate's family-wise false-alarm rate over all its dimensions."""
POWER = 0.8
"""The chance of seeing a drop of the threshold's size that the gate (and the planner) aim for."""
RESOLUTION = 1.0
"""The judge's scale moves in whole points."""
LEAST_ARRANGEMENTS = 1000
"""Below this many ways to deal the runs between the batches, a permutation test cannot reach alpha / D (its
smallest p-value is 1 / arrangements): the t test decides."""
PERMUTATIONS = 9999
"""Random draws of a permutation test: its p-value moves by at most 1e-4 a draw, well under alpha / 5."""
TIES = 1e-9
"""A drawn change within this of the observed one counts as at least as large (floating-point sums)."""
LEAST_LABELLED = 3
"""The fewest people-labelled runs a batch needs before its judge's error is corrected in the change."""
PLAN_CONFIDENCE = 0.8
"""The planner plans for the spread's upper 80% confidence bound, not its estimate: a baseline of a few runs
per persona underestimates a spread made of rare jumps, and a batch planned on the estimate alone came out
inconclusive (its own spread larger) in 81 of 100 trials of bench/gate_power.py."""
MAX_PLANNED_RUNS = 20
"""The most runs per persona a start takes (start_input's range); the planner looks no further."""


def floor_variance(resolution: float = RESOLUTION) -> float:
    """The least run-to-run variance taken: that of rounding to the scale's resolution (Sheppard)."""
    return resolution * resolution / 12


@dataclass(frozen=True)
class Observation:
    """One run's score on one dimension: its persona (the cluster) and its pairing key (persona, topic, seed)."""

    persona: str
    value: float
    pair: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Labelled:
    """A run people labelled, on one dimension: the judge's value and the people's."""

    judge: float
    people: float


@dataclass(frozen=True)
class DimensionTest:
    """One dimension's batch-mean change, its standard error and what it can tell."""

    dimension: str
    delta: float
    """Candidate minus baseline, averaged over personas (negative: a drop)."""
    se: float
    df: float
    """Degrees of freedom: P - 1 paired; Welch-Satterthwaite's unpaired (not a whole number)."""
    personas: int
    paired: bool
    pairs: int
    variance: float
    """The run-to-run (or, paired, the difference) variance used, after the floor."""
    floored: bool
    """The measured variance (unpaired: some persona's) was below the floor and the floor was used."""
    p_value: float | None
    """One-sided: the chance of a drop at least this large with no real change (None: no spread estimate)."""
    test: str
    """How p_value was found: "permutation" (unpaired, stratified by persona), "sign-flip" (paired) or "t"
    (Student's, Welch-Satterthwaite's df: too few arrangements to permute, or a change corrected by labels)."""
    mdd: float | None
    """The minimum detectable drop at alpha/D and the power (None: no spread estimate)."""
    low: float | None
    high: float | None
    """Delta's two-sided interval at 1 - 2 * alpha/D (the one-sided test's level on each side), unclipped:
    Delta is a difference, which may lie anywhere in -10..10."""
    significant: bool = False
    """Rejected by Holm's procedure over the family."""
    borrowed: int = 0
    """Unpaired: personas with one run in each batch, whose spread is the one pooled over the others."""
    labelled: tuple[int, int] = (0, 0)
    """People-labelled runs of the baseline and of the batch that corrected the change (0, 0: not corrected)."""
    lam: float | None = None
    """The correction's power tuning (1: plain PPI, 0: the people's change alone); None: not corrected."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cells(obs: Iterable[Observation]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for o in obs:
        out.setdefault(o.persona, []).append(o.value)
    return out


def pooled_variance(cells: Iterable[Sequence[float]]) -> tuple[float, int]:
    """The within-cell variance pooled over cells, and its degrees of freedom (sum of n - 1)."""
    ss, df = 0.0, 0
    for values in cells:
        if len(values) >= 2:
            m = statistics.fmean(values)
            ss += sum((x - m) ** 2 for x in values)
            df += len(values) - 1
    return (ss / df if df else math.nan), df


@dataclass(frozen=True)
class Spread:
    """An unpaired comparison's variance sum_p c_p s_p^2 (see the module's formulas) and its degrees of freedom."""

    se2: float
    """sum_p w_p s_p^2 with the caller's weights (w_p = 1/n_Bp + 1/n_Cp; SE^2 is se2 / P^2)."""
    df: float
    variance: float
    """The weighted mean s_p^2 (se2 / sum w_p): the run-to-run variance the comparison used."""
    floored: int
    """Personas whose measured variance was below the floor."""
    borrowed: int
    """Personas without repeats of their own, given the pooled variance."""
    pooled_df: int = 0
    """The degrees of freedom of the spread pooled over personas (sum of f_p): the power calculation's."""


def combine(
    own: Sequence[tuple[float, int]], weights: Sequence[float], pooled: tuple[float, int], floor: float
) -> Spread:
    """sum_p w_p s_p^2 from each persona's (variance, degrees of freedom), with Welch-Satterthwaite's degrees of
    freedom. A persona with f_p = 0 takes the pooled variance; those personas make one term together (they share
    one estimate), with the pooled degrees of freedom. Every variance is taken at least `floor`."""
    terms: list[tuple[float, float]] = []
    floored = borrowed = 0
    lent = 0.0
    for (variance, f), w in zip(own, weights, strict=True):
        if not f:
            borrowed += 1
            lent += w
            continue
        if not variance >= floor:
            floored += 1
            variance = floor
        terms.append((w * variance, f))
    if borrowed:
        variance, f = pooled
        if not variance >= floor:
            floored += borrowed
            variance = floor
        terms.append((lent * variance, f))
    se2 = sum(t for t, _ in terms)
    df = se2**2 / sum(t * t / f for t, f in terms)
    pooled_df = sum(f for (_, f) in own) + (pooled[1] if borrowed and not any(f for _, f in own) else 0)
    return Spread(se2, df, se2 / sum(weights), floored, borrowed, int(pooled_df))


def welch(cells: Sequence[Sequence[Sequence[float]]], weights: Sequence[float], floor: float) -> Spread | None:
    """Per persona (its cells: the baseline's and the candidate's runs), the floored run-to-run variance, summed
    with the weights, and Welch-Satterthwaite's degrees of freedom (see `combine`). None when no persona has
    repeats."""
    pooled = pooled_variance([cell for persona in cells for cell in persona])
    if not pooled[1]:
        return None
    return combine([pooled_variance(persona) for persona in cells], weights, pooled, floor)


def _pairs(baseline: Sequence[Observation], candidate: Sequence[Observation]) -> dict[str, list[float]] | None:
    """Per persona, the differences of runs sharing persona, topic and seed; None unless every candidate run has
    a baseline partner (each baseline run partners one candidate run at most)."""
    partners: dict[tuple[Any, ...], list[float]] = {}
    for o in baseline:
        if o.pair is None:
            return None
        partners.setdefault(o.pair, []).append(o.value)
    out: dict[str, list[float]] = {}
    for o in candidate:
        if o.pair is None or not partners.get(o.pair):
            return None
        out.setdefault(o.persona, []).append(o.value - partners[o.pair].pop())
    return out


def dimension_test(
    dimension: str,
    baseline: Sequence[Observation],
    candidate: Sequence[Observation],
    *,
    family: int,
    alpha: float = ALPHA,
    power: float = POWER,
    resolution: float = RESOLUTION,
    labels: tuple[Sequence[Labelled], Sequence[Labelled]] = ((), ()),
) -> DimensionTest | None:
    """One dimension's comparison (see the module's formulas); None when no persona is in both batches.
    family: how many dimensions the gate tests together (the MDD and interval use alpha / family). labels: the
    people-labelled runs of the baseline and of the batch, which correct the change where each has enough."""
    from scipy import stats

    base, cand = _cells(baseline), _cells(candidate)
    personas = sorted(set(base) & set(cand))
    if not personas:
        return None
    floor = floor_variance(resolution)
    diffs = _pairs([o for o in baseline if o.persona in cand], [o for o in candidate if o.persona in base])
    P = len(personas)
    if diffs is not None and P >= 2:
        means = [statistics.fmean(diffs[p]) for p in personas]
        delta = statistics.fmean(means)
        m = min(len(diffs[p]) for p in personas)
        measured, df = statistics.variance(means), float(P - 1)
        power_df = df
        least = 2 * floor / m
        variance = max(measured, least)
        se = math.sqrt(variance / P)
        paired, pairs = True, sum(len(diffs[p]) for p in personas)
        floored = not measured >= least
        borrowed = 0
    else:
        delta = statistics.fmean(statistics.fmean(cand[p]) - statistics.fmean(base[p]) for p in personas)
        weights = [1 / len(base[p]) + 1 / len(cand[p]) for p in personas]
        spread = welch([[base[p], cand[p]] for p in personas], weights, floor)
        if spread is None:
            return DimensionTest(
                dimension, round(delta, 4), math.nan, 0, P, False, 0, math.nan, False, None, "", None, None, None
            )
        se = math.sqrt(spread.se2) / P
        variance, df, floored, borrowed = spread.variance, spread.df, spread.floored > 0, spread.borrowed
        power_df = float(spread.pooled_df)
        paired, pairs = False, 0
    corrected = corrected_change(delta, se, df, labels, floor)
    lam = None
    if corrected is not None:
        delta, se, df, lam = corrected
        power_df = df
    level = alpha / family
    t = delta / se
    if paired and diffs is not None:
        arrangements = 2.0 ** sum(len(diffs[p]) for p in personas)
    else:
        arrangements = math.prod(math.comb(len(base[p]) + len(cand[p]), len(cand[p])) for p in personas)
    if lam is not None or arrangements < LEAST_ARRANGEMENTS:
        # the correction's label term is no permutation of runs; too few arrangements cannot reach alpha / D
        p_value, method = float(stats.t.cdf(t, df)), "t"
    elif paired and diffs is not None:
        p_value, method = sign_flip_p([diffs[p] for p in personas], delta), "sign-flip"
    else:
        p_value, method = permutation_p([(base[p], cand[p]) for p in personas], delta), "permutation"
    q = float(stats.t.ppf(1 - level, df))
    mdd = (float(stats.t.ppf(1 - level, power_df)) + float(stats.t.ppf(power, power_df))) * se
    return DimensionTest(
        dimension=dimension,
        delta=round(delta, 4),
        se=round(se, 4),
        df=round(df, 1),
        personas=P,
        paired=paired,
        pairs=pairs,
        variance=round(variance, 4),
        floored=floored,
        borrowed=borrowed,
        labelled=(len(labels[0]), len(labels[1])) if lam is not None else (0, 0),
        lam=None if lam is None else round(lam, 3),
        p_value=p_value,
        test=method,
        mdd=round(mdd, 3),
        low=round(delta - q * se, 3),
        high=round(delta + q * se, 3),
    )


def permutation_p(cells: Sequence[tuple[Sequence[float], Sequence[float]]], observed: float) -> float:
    """The one-sided p-value of a drop at least `observed` by a permutation test stratified by persona: under no
    change a persona's runs are exchangeable between the batches, so each of PERMUTATIONS draws deals each
    persona's runs out again (as many to the candidate as it had) and recomputes the batch-mean change. Exact
    in level whatever the scores' distribution (Phipson and Smyth 2010: (1 + hits) / (1 + draws))."""
    rng = np.random.default_rng(0)
    total = np.zeros(PERMUTATIONS)
    for base, cand in cells:
        values = np.asarray([*base, *cand], dtype=np.float64)
        shuffled = values[np.argsort(rng.random((PERMUTATIONS, values.size)), axis=1)]
        total += shuffled[:, len(base) :].mean(axis=1) - shuffled[:, : len(base)].mean(axis=1)
    hits = int(np.count_nonzero(total / len(cells) <= observed + TIES))
    return (1 + hits) / (1 + PERMUTATIONS)


def sign_flip_p(differences: Sequence[Sequence[float]], observed: float) -> float:
    """The paired counterpart: under no change each pair's difference is as likely with either sign, so each
    draw flips each pair's sign at random and recomputes the mean over personas of the mean difference."""
    rng = np.random.default_rng(0)
    total = np.zeros(PERMUTATIONS)
    for d in differences:
        values = np.asarray(d, dtype=np.float64)
        total += (rng.choice((-1.0, 1.0), size=(PERMUTATIONS, values.size)) * values).mean(axis=1)
    hits = int(np.count_nonzero(total / len(differences) <= observed + TIES))
    return (1 + hits) / (1 + PERMUTATIONS)


def corrected_change(
    delta: float, se: float, df: float, labels: tuple[Sequence[Labelled], Sequence[Labelled]], floor: float
) -> tuple[float, float, float, float] | None:
    """The change corrected by people's labels (see the module's formulas): (Delta_PP, SE_PP, df, lambda); None
    unless both batches have LEAST_LABELLED labelled runs."""
    base, cand = labels
    if len(base) < LEAST_LABELLED or len(cand) < LEAST_LABELLED:
        return None
    sides = []
    for side in (base, cand):
        y = [x.people for x in side]
        f = [x.judge for x in side]
        sides.append((y, f, len(side), statistics.covariance(y, f), statistics.variance(f)))
    denominator = se * se + sum(var_f / n for _, _, n, _, var_f in sides)
    lam = min(1.0, max(0.0, sum(cov / n for _, _, n, cov, _ in sides) / denominator)) if denominator > 0 else 0.0
    terms = [(lam * lam * se * se, df)]
    means = []
    for y, f, n, _, _ in sides:
        rectifier = [a - lam * b for a, b in zip(y, f, strict=True)]
        means.append(statistics.fmean(rectifier))
        terms.append((max(statistics.variance(rectifier), floor) / n, n - 1))
    variance = sum(t for t, _ in terms)
    corrected_df = variance**2 / sum(t * t / f for t, f in terms if t > 0)
    return lam * delta + means[1] - means[0], math.sqrt(variance), corrected_df, lam


def holm(p_values: Sequence[float | None], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down procedure: which of the hypotheses are rejected at family-wise level alpha (a missing
    p-value counts as 1: nothing to reject; the family's size counts it)."""
    m = len(p_values)
    ps = [1.0 if p is None else p for p in p_values]
    order = sorted(range(m), key=lambda i: ps[i])
    rejected = [False] * m
    for rank, i in enumerate(order):
        p = p_values[i]
        if p is None or p > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected


def family_test(
    baseline: Mapping[str, Sequence[Observation]],
    candidate: Mapping[str, Sequence[Observation]],
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    resolution: float = RESOLUTION,
    labels: Mapping[str, tuple[Sequence[Labelled], Sequence[Labelled]]] | None = None,
) -> list[DimensionTest]:
    """Every dimension of the baseline that the candidate also has, tested as one family (Holm at alpha). labels:
    per dimension, the people-labelled runs of the baseline and of the candidate (the correction, where enough)."""
    dims = [d for d in baseline if candidate.get(d)]
    tests = [
        dimension_test(
            d,
            baseline[d],
            candidate[d],
            family=len(dims),
            alpha=alpha,
            power=power,
            resolution=resolution,
            labels=(labels or {}).get(d, ((), ())),
        )
        for d in dims
    ]
    found = [t for t in tests if t is not None]
    rejected = holm([t.p_value if t.delta < 0 else None for t in found], alpha)
    return [DimensionTest(**{**asdict(t), "significant": r}) for t, r in zip(found, rejected, strict=True)]


@dataclass(frozen=True)
class Plan:
    """How many runs per persona detect a drop of the threshold's size on every dimension."""

    runs_per_persona: int | None
    """None: no number up to MAX_PLANNED_RUNS does, against this baseline."""
    baseline_runs_per_persona: int | None
    """When the baseline itself is too small: the runs per persona a new baseline and the batch would each need."""
    detects: dict[str, float]
    """Per dimension: the drop detectable at runs_per_persona (or at the most runs planned)."""
    detects_at_one: dict[str, float]
    """Per dimension: the drop one run per persona detects."""
    spread: dict[str, float]
    """Per dimension: the run-to-run standard deviation pooled over personas (after the floor), as measured (the
    plan itself uses its upper PLAN_CONFIDENCE bound)."""
    df: dict[str, int]
    """Per dimension: the pooled spread's degrees of freedom (each persona's own spread plans its share)."""
    personas: int
    source: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Evidence:
    """A dimension's baseline spread: per persona (variance, degrees of freedom, runs), and the pooled variance
    with its degrees of freedom."""

    own: tuple[tuple[float, int, int], ...]
    pooled: tuple[float, int]

    @classmethod
    def of(cls, observations: Sequence[Observation]) -> "Evidence":
        cells = _cells(observations).values()
        return cls(tuple((*pooled_variance([v]), len(v)) for v in cells), pooled_variance(cells))

    def upper(self, confidence: float) -> "Evidence":
        """Every variance raised to the upper `confidence` bound of the pooled one: f / chi2_(1 - confidence)(f)
        times it (f the pooled degrees of freedom)."""
        from scipy import stats

        f = self.pooled[1]
        factor = f / float(stats.chi2.ppf(1 - confidence, f))
        return Evidence(tuple((v * factor, df, n) for v, df, n in self.own), (self.pooled[0] * factor, self.pooled[1]))


def detectable(
    evidence: Evidence, k: int, *, level: float, power: float, floor: float, baseline_k: int | None = None
) -> float:
    """The minimum detectable drop of an unpaired comparison of k candidate runs per persona against this
    baseline, or (baseline_k) against a new baseline of that many runs per persona with the same spreads: the
    dimension_test formulas with each persona's spread expected to stay what the baseline measured."""
    from scipy import stats

    pooled, pooled_df = evidence.pooled
    own, weights = [], []
    for variance, f, n in evidence.own:
        runs, base_df = (baseline_k, baseline_k - 1) if baseline_k else (n, f)
        own.append((variance if f else pooled, base_df + k - 1))
        weights.append(1 / runs + 1 / k)
    P = len(own)
    spread = combine(own, weights, (pooled, pooled_df + P * (k - 1)), floor)
    se = math.sqrt(spread.se2) / P
    df = spread.pooled_df
    return (float(stats.t.ppf(1 - level, df)) + float(stats.t.ppf(power, df))) * se


def plan(
    baseline: Mapping[str, Sequence[Observation]],
    *,
    threshold: float,
    alpha: float = ALPHA,
    power: float = POWER,
    resolution: float = RESOLUTION,
    source: str = "",
) -> Plan | None:
    """From a baseline's repeats: the fewest candidate runs per persona whose unpaired comparison has power
    `power` against a drop of `threshold` on every dimension at Holm's strictest level. None when the baseline
    has no repeats (no spread to plan from)."""
    level = alpha / max(1, len(baseline))
    floor = floor_variance(resolution)
    measured = {d: Evidence.of(obs) for d, obs in baseline.items()}
    if not measured or not all(e.pooled[1] for e in measured.values()):
        return None
    evidence = {d: e.upper(PLAN_CONFIDENCE) for d, e in measured.items()}

    def drops(k: int, baseline_k: int | None = None) -> dict[str, float]:
        return {
            d: detectable(e, k, level=level, power=power, floor=floor, baseline_k=baseline_k)
            for d, e in evidence.items()
        }

    chosen = next((k for k in range(1, MAX_PLANNED_RUNS + 1) if max(drops(k).values()) <= threshold), None)
    fresh = None
    if chosen is None:
        # the baseline's own noise is too large: a new baseline of k runs per persona and a batch of k
        fresh = next((k for k in range(2, MAX_PLANNED_RUNS + 1) if max(drops(k, k).values()) <= threshold), None)
    at = chosen or fresh or MAX_PLANNED_RUNS
    detects = drops(at, at) if chosen is None and fresh is not None else drops(at)
    return Plan(
        runs_per_persona=chosen or fresh,
        baseline_runs_per_persona=fresh if chosen is None else None,
        detects={d: round(x, 2) for d, x in detects.items()},
        detects_at_one={d: round(x, 2) for d, x in drops(1).items()},
        spread={d: round(math.sqrt(max(e.pooled[0], floor)), 3) for d, e in measured.items()},
        df={d: e.pooled[1] for d, e in evidence.items()},
        personas=max(len(e.own) for e in evidence.values()),
        source=source,
    )
