"""Noise-aware verdicts for tutor comparisons: means with t intervals, and regressions against a baseline.

With k repeats per persona a mean is shown with its 95% confidence interval (Student's t, from
scipy). A drop against the baseline is a regression only when it exceeds the threshold AND the
interval lies wholly below the baseline's mean ("noise-aware", the default); the "fixed" rule
flags any drop beyond the threshold, as a single run would.
"""

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

# scipy is imported where it is used: it takes longer to import than the rest of the app.

CONFIDENCE = 0.95
DEFAULT_THRESHOLD = 1.0
RULES = ("noise-aware", "fixed")


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
    mean = round(statistics.fmean(values), 2)
    low, high = mean_ci(values)
    drop = round(baseline - mean, 2)
    if drop <= threshold:
        regression, why = False, f"drop {drop:g} is within the threshold {threshold:g}"
    elif rule == "fixed":
        regression, why = True, f"drop {drop:g} exceeds the threshold {threshold:g} (fixed rule)"
    elif high is None:
        regression, why = False, f"drop {drop:g} exceeds {threshold:g}, but one run has no interval: repeat it"
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

    runs: group_runs() entries (persona_id, scores, avg_score); baseline: persona -> dimension -> mean
    (the key "average" for the average score).
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
