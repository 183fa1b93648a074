"""Noise-aware verdicts for tutor comparisons: means with t intervals, and regressions against a baseline.

With k repeats per persona a mean is shown with its 95% confidence interval (Student's t, from
scipy). A drop against the baseline is a regression only when it exceeds the threshold AND the
interval lies wholly below the baseline's mean ("noise-aware", the default); the "fixed" rule
flags any drop beyond the threshold. With one run of a persona there is no interval, so its drops
are judged by the fixed rule, and the verdict says so: one run never passes for lack of one.

A gate (`gate`) is the whole check of a batch: it compares, or says why it could not, and counts
the runs it left out (failed, or judged on too few of their planned turns).
"""

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

# scipy is imported where it is used: it takes longer to import than the rest of the app.

CONFIDENCE = 0.95
DEFAULT_THRESHOLD = 1.0
RULES = ("noise-aware", "fixed")
REGRESSION, PASS, NOT_COMPARED = "regression", "pass", "not compared"
"""A gate's outcomes: only PASS lets a pipeline go on."""


def mean_ci(values: list[float]) -> tuple[float | None, float | None]:
    """The 95% t interval of the mean; (None, None) with fewer than two values."""
    if len(values) < 2:
        return None, None
    mean, sem = statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))
    if sem == 0:
        return round(mean, 2), round(mean, 2)
    from scipy import stats

    low, high = stats.t.interval(CONFIDENCE, len(values) - 1, loc=mean, scale=sem)
    return round(float(low), 2), round(float(high), 2)


@dataclass(frozen=True)
class Verdict:
    """One persona and dimension (or "average") compared with the baseline."""

    persona_id: str
    dimension: str
    baseline: float
    mean: float
    n: int
    low: float | None
    high: float | None
    drop: float
    regression: bool
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
            f"drop {drop:g} exceeds the threshold {threshold:g} (fixed rule: one run has no interval; "
            "the noise-aware rule needs 2 or more runs per persona)",
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
    """A batch checked against its baseline: the outcome, the rows compared, and what was left out."""

    baseline: str
    """The baseline's group (or run) id."""
    outcome: str
    """REGRESSION, PASS or NOT_COMPARED; only PASS is a pass."""
    reason: str
    """One line a reader acts on: which regressions, or why nothing could be compared."""
    rule: str
    threshold: float
    forced: bool
    """Compared although the baseline does not match (`mismatches`): every page says so."""
    mismatches: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    left_out: tuple[str, ...]
    """Runs of the batch not compared, each with why: failed, cut short below the coverage threshold."""
    no_baseline: tuple[str, ...]
    """Personas of the batch the baseline has no scores for."""
    min_coverage: float

    @property
    def regressions(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.regression]

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "outcome": self.outcome,
            "reason": self.reason,
            "rule": self.rule,
            "threshold": self.threshold,
            "forced": self.forced,
            "mismatches": list(self.mismatches),
            "verdicts": [v.as_dict() for v in self.verdicts],
            "left_out": list(self.left_out),
            "no_baseline": list(self.no_baseline),
            "min_coverage": self.min_coverage,
        }


def gate(runs: list[dict[str, Any]], baseline: dict[str, Any], *, min_coverage: float) -> Gate:
    """Check a batch's runs (group_runs() entries) against the baseline a start recorded
    ({"id", "means", "rule", "threshold", "forced", "mismatches"}): compare what counts, leave out and
    count what does not, and never pass when nothing could be compared or a persona of the batch was not
    measured at all (every run of it failed or was cut short)."""
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
    verdicts = tuple(compare(kept, means, threshold=threshold, rule=rule))
    regressions = [v for v in verdicts if v.regression]
    # a persona whose every run failed or was cut short was not measured: the batch cannot pass for it
    unmeasured = sorted({r["persona_id"] or "session" for r in runs} - set(personas))
    if regressions:
        outcome = REGRESSION
        reason = f"{len(regressions)} regression(s): " + "; ".join(
            f"{v.persona_id} {v.dimension}: {v.why}" for v in regressions
        )
    elif verdicts and unmeasured:
        outcome = NOT_COMPARED
        reason = (
            f"not measured: {', '.join(unmeasured)} (no run counts: failed or cut short); no regression in "
            f"{len(verdicts)} comparison(s) of the other {len(personas) - len(no_baseline)} persona(s)"
        )
    elif verdicts:
        outcome = PASS
        reason = f"no regression in {len(verdicts)} comparison(s) of {len(personas) - len(no_baseline)} persona(s)"
    else:
        outcome = NOT_COMPARED
        if not runs:
            reason = "the batch has no runs"
        elif not kept:
            reason = f"no run of the batch counts: {len(left_out)} of {len(runs)} left out (failed or cut short)"
        else:
            reason = f"no persona in common with the baseline (the batch has {', '.join(personas)})"
    if left_out and verdicts:
        reason += f"; {len(left_out)} run(s) left out"
    return Gate(
        baseline=baseline["id"],
        outcome=outcome,
        reason=reason,
        rule=rule,
        threshold=threshold,
        forced=bool(baseline.get("forced")),
        mismatches=tuple(baseline.get("mismatches") or ()),
        verdicts=verdicts,
        left_out=tuple(left_out),
        no_baseline=no_baseline,
        min_coverage=min_coverage,
    )
