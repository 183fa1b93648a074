"""Tutor comparisons against a baseline: the gate, its family of dimension tests, and per-persona diagnostics.

A gate (`gate`) is the whole check of a batch: it compares, or says why it could not, and counts the runs
it left out (failed, or judged on too few of their planned turns). Under the "noise-aware" rule (the
default) the verdict comes from one test per rubric dimension of the batch mean's change, controlled as a
family (Holm), with the noise model of evaluation.runs.noise: REGRESSION when some dimension dropped
significantly; INCONCLUSIVE when none did but the batch could not have seen a drop of the threshold's size
(too few runs for the measured spread), naming what it could see and how many runs would see the threshold;
PASS otherwise. The "fixed" rule flags any dimension whose batch mean dropped by more than the threshold.

Per-persona rows (`verdict`, `compare`) are diagnostics: a persona's mean, its 95% t interval (with the
noise model's floor on the spread, clipped to the score's range) and whether its drop is beyond the
threshold and the interval. They decide nothing: with 8 personas x 6 rows, 48 such checks would cry wolf.
"""

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.runs import noise

# scipy is imported where it is used: it takes longer to import than the rest of the app.

CONFIDENCE = 0.95
DEFAULT_THRESHOLD = 1.0
RULES = ("noise-aware", "fixed")
REGRESSION, PASS, INCONCLUSIVE, NOT_COMPARED = "regression", "pass", "inconclusive", "not compared"
"""A gate's outcomes: only PASS lets a pipeline go on."""
OUTCOMES = (REGRESSION, PASS, INCONCLUSIVE, NOT_COMPARED)
SCORE_RANGE = (0.0, 10.0)


def mean_ci(values: list[float]) -> tuple[float | None, float | None]:
    """The 95% t interval of the mean, its spread never below the noise model's floor (two runs that score the
    same are no evidence of zero spread) and clipped to the score's range; (None, None) with fewer than two
    values."""
    if len(values) < 2:
        return None, None
    from scipy import stats

    sd = max(statistics.stdev(values), math.sqrt(noise.floor_variance()))
    mean, sem = statistics.fmean(values), sd / math.sqrt(len(values))
    low, high = stats.t.interval(CONFIDENCE, len(values) - 1, loc=mean, scale=sem)
    return round(max(SCORE_RANGE[0], float(low)), 2), round(min(SCORE_RANGE[1], float(high)), 2)


@dataclass(frozen=True)
class Verdict:
    """One persona and dimension (or "average") compared with the baseline: a diagnostic row."""

    persona_id: str
    dimension: str
    baseline: float
    mean: float
    n: int
    low: float | None
    high: float | None
    drop: float
    flagged: bool
    """This persona's drop is beyond the threshold (and its interval): a diagnostic, not the verdict."""
    why: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(
    persona_id: str,
    dimension: str,
    baseline: float,
    values: list[float],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    rule: str = "noise-aware",
) -> Verdict:
    if rule not in RULES:
        raise ValueError(f"rule: {rule!r} is not one of {', '.join(RULES)}")
    mean = round(statistics.fmean(values), 2)
    low, high = mean_ci(values)
    drop = round(baseline - mean, 2)
    if drop <= threshold:
        regression, why = False, f"drop {drop:g} is within the threshold {threshold:g}"
    elif rule == "fixed":
        regression, why = True, f"drop {drop:g} exceeds the threshold {threshold:g} (fixed rule)"
    elif high is None:
        regression, why = (
            True,
            f"drop {drop:g} exceeds the threshold {threshold:g} (one run of this persona: no interval)",
        )
    elif high < baseline:
        regression, why = (
            True,
            f"drop {drop:g} exceeds {threshold:g} and the 95% CI [{low:g}, {high:g}] excludes {baseline:g}",
        )
    else:
        regression, why = (
            False,
            f"drop {drop:g} exceeds {threshold:g}, but the 95% CI [{low:g}, {high:g}] holds {baseline:g}: noise",
        )
    return Verdict(persona_id, dimension, baseline, mean, len(values), low, high, drop, regression, why)


def compare(
    runs: list[dict[str, Any]],
    baseline: dict[str, dict[str, float]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    rule: str = "noise-aware",
) -> list[Verdict]:
    """Every persona and dimension (and the average) of `runs` that the baseline also has.

    runs: group_runs() entries (persona_id, scores, avg_score) that count (see `counted`); baseline:
    persona -> dimension -> mean (the key "average" for the average score).
    """
    out = []
    by_persona: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r.get("scores"):
            by_persona.setdefault(r["persona_id"] or "session", []).append(r)
    for persona_id, items in sorted(by_persona.items()):
        base = baseline.get(persona_id) or {}
        for dimension, base_mean in base.items():
            if dimension == "average":
                values = [r["avg_score"] for r in items if r.get("avg_score") is not None]
            else:
                values = [r["scores"][dimension] for r in items if dimension in r["scores"]]
            if values:
                out.append(verdict(persona_id, dimension, base_mean, values, threshold=threshold, rule=rule))
    return out


def baseline_means(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """persona -> dimension (and "average") -> mean score, from a baseline's runs."""
    by_persona: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r.get("scores"):
            by_persona.setdefault(r["persona_id"] or "session", []).append(r)
    out: dict[str, dict[str, float]] = {}
    for persona_id, items in by_persona.items():
        dims = list(dict.fromkeys(d for r in items for d in r["scores"]))
        means = {d: round(statistics.fmean([r["scores"][d] for r in items if d in r["scores"]]), 2) for d in dims}
        avgs = [r["avg_score"] for r in items if r.get("avg_score") is not None]
        if avgs:
            means["average"] = round(statistics.fmean(avgs), 2)
        out[persona_id] = means
    return out


COMPARABLE = (("judge", "judge"), ("prompt_hash", "judge prompt"), ("rubric", "rubric"))
"""The judge configuration's keys (tutoring.judge.judge_config) a baseline must share, with their names."""


def mismatches(
    baseline_runs: list[dict[str, Any]],
    *,
    judge_config: dict[str, str],
    topic: str,
    personas: list[str],
    max_turns: int,
) -> list[str]:
    """Why a baseline's runs do not compare with a batch: each a line naming what differs (empty: they
    compare). A baseline run that did not record a value differs from any value."""

    def values(get: Any) -> list[str]:
        return sorted({str(get(r)) for r in baseline_runs})

    out = []
    for key, name in COMPARABLE:
        theirs = values(lambda r, key=key: (r.get("judge_config") or {}).get(key, "not recorded"))
        if theirs != [judge_config[key]]:
            out.append(f"{name}: the baseline has {', '.join(theirs)}, this batch {judge_config[key]}")
    topics = values(lambda r: r.get("topic"))
    if topics != [topic]:
        out.append(f"topic: the baseline has {', '.join(topics)}, this batch {topic}")
    turns = values(lambda r: r.get("max_turns"))
    if turns != [str(max_turns)]:
        out.append(f"max turns: the baseline has {', '.join(turns)}, this batch {max_turns}")
    missing = sorted(set(personas) - {r.get("persona_id") for r in baseline_runs})
    if missing:
        out.append(f"personas: the baseline has no runs of {', '.join(missing)}")
    return out


def counted(run: dict[str, Any], min_coverage: float) -> bool:
    """Does a run's score count in a comparison: scored, and judged on enough of its planned turns?"""
    return bool(run.get("scores")) and run.get("coverage", 1.0) >= min_coverage


@dataclass(frozen=True)
class Gate:
    """A batch checked against its baseline: the outcome, the tests that decided it, the diagnostic rows, and
    what was left out."""

    baseline: str
    """The baseline's group (or run) id."""
    outcome: str
    """REGRESSION, PASS, INCONCLUSIVE or NOT_COMPARED; only PASS is a pass."""
    reason: str
    """One line a reader acts on: which regressions, what the batch could not see, or why nothing was compared."""
    rule: str
    threshold: float
    forced: bool
    """Compared although the baseline does not match (`mismatches`): every page says so."""
    mismatches: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    """Per persona and dimension: diagnostics."""
    left_out: tuple[str, ...]
    """Runs of the batch not compared, each with why: failed, cut short below the coverage threshold."""
    no_baseline: tuple[str, ...]
    """Personas of the batch the baseline has no scores for."""
    min_coverage: float
    tests: tuple[noise.DimensionTest, ...] = ()
    """Per rubric dimension: the batch mean's change, tested as a family (the noise-aware rule's verdict)."""
    alpha: float = noise.ALPHA
    power: float = noise.POWER
    pairing: str = ""
    """How the runs were compared: "paired by persona, topic and seed" or "unpaired"."""
    plan: noise.Plan | None = None
    """What the baseline's spread says about runs per persona (the planner's figures)."""

    @property
    def regressions(self) -> list[noise.DimensionTest]:
        if self.rule == "fixed":
            return [t for t in self.tests if -t.delta > self.threshold]
        return [t for t in self.tests if t.significant]

    @property
    def family_rule(self) -> str:
        """The rule in words, for every door."""
        if self.rule == "fixed":
            return f"fixed: a dimension whose batch mean dropped by more than {self.threshold:g} is a regression"
        corrected = [t for t in self.tests if t.lam is not None]
        labels = (
            "; the judge's error corrected by people's labels (prediction-powered, PPI++) on "
            + ", ".join(f"{t.dimension} ({t.labelled[0]}+{t.labelled[1]} labelled runs)" for t in corrected)
            if corrected
            else "; judged by the judge alone (no people's labels on enough runs of both batches)"
        )
        return (
            f"noise-aware: one one-sided test per dimension of the batch mean's change ({self.pairing}; "
            f"{self._tests_used()}), "
            f"Holm over {len(self.tests)} dimensions at family alpha {self.alpha:g}; inconclusive when a drop of "
            f"{self.threshold:g} had less than {self.power:.0%} power; per-persona rows are diagnostics{labels}"
        )

    def _tests_used(self) -> str:
        used = sorted({t.test for t in self.tests if t.test})
        words = {
            "permutation": "permutation test stratified by persona",
            "sign-flip": "sign-flip test of the pairs",
            "t": "t test",
        }
        return " and ".join(words[u] for u in used) or "no test"

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "outcome": self.outcome,
            "reason": self.reason,
            "rule": self.rule,
            "family_rule": self.family_rule,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "power": self.power,
            "pairing": self.pairing,
            "forced": self.forced,
            "mismatches": list(self.mismatches),
            "tests": [{**t.as_dict(), "regression": t in self.regressions} for t in self.tests],
            "plan": self.plan.as_dict() if self.plan else None,
            "verdicts": [v.as_dict() for v in self.verdicts],
            "left_out": list(self.left_out),
            "no_baseline": list(self.no_baseline),
            "min_coverage": self.min_coverage,
        }


def observations(runs: list[dict[str, Any]]) -> dict[str, list[noise.Observation]]:
    """Per rubric dimension, each run's score with its persona and its pairing key (persona, topic, seed)."""
    out: dict[str, list[noise.Observation]] = {}
    for r in runs:
        persona = r.get("persona_id") or "session"
        seed = r.get("seed")
        key = (persona, r.get("topic"), seed) if seed is not None else None
        for d, value in (r.get("scores") or {}).items():
            out.setdefault(d, []).append(noise.Observation(persona, float(value), key))
    return out


def labelled(
    baseline: list[dict[str, Any]], batch: list[dict[str, Any]], people: dict[str, dict[str, float]]
) -> dict[str, tuple[tuple[noise.Labelled, ...], tuple[noise.Labelled, ...]]]:
    """Per dimension, the runs of each side that people labelled: the judge's score beside people's value."""

    def side(runs: list[dict[str, Any]], d: str) -> tuple[noise.Labelled, ...]:
        return tuple(
            noise.Labelled(float(r["scores"][d]), people[r["run_id"]][d])
            for r in runs
            if d in (r.get("scores") or {}) and d in people.get(r.get("run_id") or "", {})
        )

    dims = {d for values in people.values() for d in values}
    return {d: (side(baseline, d), side(batch, d)) for d in sorted(dims)}


def _fmt(x: float) -> str:
    return f"{x:.2g}" if abs(x) < 1 else f"{x:.1f}"


def inconclusive_reason(tests: list[noise.DimensionTest], plan: noise.Plan | None, threshold: float, k: int) -> str:
    """Why a batch with no significant drop cannot pass: what drops it could see, and what would see the
    threshold, e.g. "k=1 detects only drops >= 3.1 on explanation_quality; 4 runs per persona detect 1"."""
    blind = [t for t in tests if t.mdd is None]
    if blind:
        return (
            f"no estimate of the run-to-run spread on {', '.join(t.dimension for t in blind)}: "
            "the baseline needs 2 or more runs per persona (or the batch, or the same seeds to pair)"
        )
    weak = sorted((t for t in tests if t.mdd is not None and t.mdd > threshold), key=lambda t: -(t.mdd or 0))
    seen = "; ".join(f"{t.dimension} {_fmt(t.mdd or 0)}" for t in weak)
    worst = weak[0]
    head = f"k={k} detects only drops >= {_fmt(worst.mdd or 0)} on {worst.dimension}"
    if len(weak) > 1:
        head += f" (and {seen.split('; ', 1)[1]})"
    if plan is None or plan.runs_per_persona is None:
        tail = (
            f"no number of runs up to {noise.MAX_PLANNED_RUNS} per persona detects {threshold:g} against this baseline"
        )
    elif plan.baseline_runs_per_persona:
        tail = (
            f"the baseline is too small: a baseline and a batch of {plan.baseline_runs_per_persona} runs per persona "
            f"each detect {threshold:g}"
        )
    else:
        tail = f"{plan.runs_per_persona} runs per persona detect {threshold:g}"
    return f"{head}; {tail}"


def gate(
    runs: list[dict[str, Any]],
    baseline: dict[str, Any],
    *,
    min_coverage: float,
    baseline_runs: list[dict[str, Any]] | None = None,
    people: dict[str, dict[str, float]] | None = None,
) -> Gate:
    """Check a batch's runs (group_runs() entries) against the baseline a start recorded ({"id", "means",
    "runs", "rule", "threshold", "alpha", "power", "forced", "mismatches"}; `baseline_runs` stands in for
    "runs" where an older record lacks them): compare what counts, leave out and count what does not, and
    never pass when nothing could be compared, a persona of the batch was not measured at all (every run of
    it failed or was cut short), or the baseline lacks a persona of the batch (a forced comparison). people: per
    run id and dimension, people's value of the run (runs.selectors.run_people_values), which corrects the judge's error in
    the change where both batches have enough labelled runs."""
    left_out = []
    for r in runs:
        if not r.get("scores"):
            left_out.append(f"{r['run_id']}: {r.get('status') or 'not scored'}, no scores")
        elif not counted(r, min_coverage):
            left_out.append(
                f"{r['run_id']}: judged on {r.get('turns_answered')}/{r.get('max_turns')} turns, "
                f"below the coverage threshold {min_coverage:.0%}"
            )
    kept = [r for r in runs if counted(r, min_coverage)]
    means = baseline["means"]
    personas = sorted({r["persona_id"] or "session" for r in kept})
    no_baseline = tuple(p for p in personas if p not in means)
    threshold, rule = baseline["threshold"], baseline["rule"]
    alpha, power = baseline.get("alpha", noise.ALPHA), baseline.get("power", noise.POWER)
    verdicts = tuple(compare(kept, means, threshold=threshold, rule=rule))
    base_runs = baseline.get("runs") or baseline_runs or []
    base_obs = observations(base_runs)
    cand_obs = observations(kept)
    labels = labelled(base_runs, kept, people or {})
    tests = (
        tuple(noise.family_test(base_obs, cand_obs, alpha=alpha, power=power, labels=labels))
        if cand_obs and base_obs
        else ()
    )
    plan = (
        noise.plan(base_obs, threshold=threshold, alpha=alpha, power=power, source=baseline["id"]) if base_obs else None
    )
    borrowed = max((t.borrowed for t in tests), default=0)
    pairing = (
        "paired by persona, topic and seed"
        if tests and all(t.paired for t in tests)
        else "unpaired: each persona's own run-to-run spread, Welch-Satterthwaite degrees of freedom"
        + (
            f"; {borrowed} persona{'s' if borrowed != 1 else ''} without repeats took the spread pooled over the others"
            if borrowed
            else ""
        )
    )
    made = Gate(
        baseline=baseline["id"],
        outcome=NOT_COMPARED,
        reason="",
        rule=rule,
        threshold=threshold,
        forced=bool(baseline.get("forced")),
        mismatches=tuple(baseline.get("mismatches") or ()),
        verdicts=verdicts,
        left_out=tuple(left_out),
        no_baseline=no_baseline,
        min_coverage=min_coverage,
        tests=tests,
        alpha=alpha,
        power=power,
        pairing=pairing if tests else "",
        plan=plan,
    )
    regressions = made.regressions
    # a persona whose every run failed or was cut short was not measured: the batch cannot pass for it
    unmeasured = sorted({r["persona_id"] or "session" for r in runs} - set(personas))
    compared = len(personas) - len(no_baseline)
    k = min((sum(1 for r in kept if (r["persona_id"] or "session") == p) for p in personas), default=0)
    if regressions:
        outcome = REGRESSION
        reason = f"{len(regressions)} dimension(s) dropped: " + "; ".join(
            _dropped(t, rule, threshold) for t in regressions
        )
    elif not (runs and kept and compared):
        outcome = NOT_COMPARED
        if not runs:
            reason = "the batch has no runs"
        elif not kept:
            reason = f"no run of the batch counts: {len(left_out)} of {len(runs)} left out (failed or cut short)"
        else:
            reason = f"no persona in common with the baseline (the batch has {', '.join(personas)})"
    elif unmeasured:
        outcome = NOT_COMPARED
        reason = (
            f"not measured: {', '.join(unmeasured)} (no run counts: failed or cut short); no regression in "
            f"{len(tests)} dimension(s) of the other {compared} persona(s)"
        )
    elif not tests:
        outcome = NOT_COMPARED
        reason = f"the baseline's runs are no longer stored: no scores of {baseline['id']} to test against"
    elif no_baseline:
        outcome = INCONCLUSIVE
        reason = (
            f"the baseline covers {compared} of the batch's {len(personas)} personas (none for "
            f"{', '.join(no_baseline)}): a partial comparison is never a pass"
        )
    elif rule != "fixed" and any(t.mdd is None or t.mdd > threshold for t in tests):
        outcome = INCONCLUSIVE
        reason = inconclusive_reason(list(tests), plan, threshold, k)
    else:
        outcome = PASS
        reason = f"no dimension dropped in {len(tests)} dimension(s) of {compared} persona(s)"
        if rule != "fixed":
            reason += f" (each would have seen a drop of {threshold:g} with {power:.0%} power)"
    if left_out and (tests or verdicts):
        reason += f"; {len(left_out)} run(s) left out"
    return Gate(**{**made.__dict__, "outcome": outcome, "reason": reason})


def _dropped(t: noise.DimensionTest, rule: str, threshold: float) -> str:
    if rule == "fixed":
        return f"{t.dimension} batch mean dropped {-t.delta:.2f} (beyond {threshold:g}, fixed rule)"
    return (
        f"{t.dimension} batch mean dropped {-t.delta:.2f} (interval [{t.low:.2f}, {t.high:.2f}], "
        f"one-sided p={t.p_value:.2g}, significant after Holm)"
    )
