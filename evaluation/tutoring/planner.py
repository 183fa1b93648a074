"""The gate's planner: how many runs per persona detect a drop of the threshold's size, what they cost, how long.

The runs per persona come from the noise model (evaluation.runs.noise.plan) on the baseline's repeats, or,
without a baseline, on the latest comparable group's (same topic, max turns and judge configuration, with
repeats); the cost from the price forecast of the same start (forecast.run_forecast); the time from the
median duration of the runs the spread came from, at the given concurrency.
"""

import math
import statistics
from typing import Any

from django.conf import settings

from evaluation.errors import FieldProblem, InvalidInput, NotFound
from evaluation.models import EvaluationRun
from evaluation.providers.forecast import model_of
from evaluation.providers.registry import resolve
from evaluation.runs import noise
from evaluation.tutoring import selectors
from evaluation.tutoring.forecast import run_forecast
from evaluation.tutoring.judge import judge_config
from evaluation.tutoring.regression import DEFAULT_THRESHOLD, counted, mismatches, observations
from evaluation.tutoring.start_input import approved_topic, gate_problems, start_personas

SECONDS_PER_TURN = {"offline": 0.2, "llm": 8.0}
"""Without measured runs: a turn's simulator and tutor calls, offline and with LLMs (a typical reply's latency)."""
LATEST_GROUPS = 50
"""How many of the newest groups are looked at for a comparable spread."""


def _comparable(runs: list[dict[str, Any]], ours: dict[str, str], topic: str, max_turns: int) -> bool:
    differs = mismatches(runs, judge_config=ours, topic=topic, personas=[], max_turns=max_turns)
    return not differs


def spread_source(
    baseline: str | None, *, ours: dict[str, str], topic: str, max_turns: int, min_coverage: float
) -> tuple[str, list[dict[str, Any]]]:
    """The runs whose repeats give the spread: the baseline's, or the latest comparable group's with repeats
    ("" and [] when there is none)."""
    if baseline:
        runs = [r for r in selectors.baseline_runs(baseline) if counted(r, min_coverage)]
        if not runs:
            raise NotFound(f"baseline: no scored tutor runs in a group or run named {baseline!r}")
        return baseline, runs
    groups = (
        EvaluationRun.objects.filter(kind="tutor", topic__topic_id=topic, max_turns=max_turns)
        .exclude(group="")
        .order_by("-created_at")
        .values_list("group", flat=True)
    )
    seen: list[str] = []
    for group in groups.iterator():
        if group in seen:
            continue
        seen.append(group)
        if len(seen) > LATEST_GROUPS:
            break
        runs = [r for r in selectors.baseline_runs(group) if counted(r, min_coverage)]
        if runs and _comparable(runs, ours, topic, max_turns) and noise.plan(observations(runs), threshold=1.0):
            return group, runs
    return "", []


def run_plan(
    *,
    topic_id: str,
    persona: str | list[str] = "average_student",
    max_turns: int = 20,
    agent_id: str | None = None,
    provider: str | None = None,
    grade: int | None = None,
    baseline: str | None = None,
    threshold: float | None = None,
    alpha: float = noise.ALPHA,
    power: float = noise.POWER,
    workers: int | None = None,
    min_coverage: float = 0.5,
) -> dict[str, Any]:
    """{"runs_per_persona", "cost_usd", "minutes", "detects", ...} for a start of these runs against the
    baseline (or the latest comparable group); runs_per_persona is None, with the reason in "text", when
    there is no spread to plan from. workers: runs at a time (default: the queue's workers). Bad input is
    refused as run_start refuses it."""
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    if workers is None:  # the configured concurrency: the queue's workers
        cluster: dict[str, Any] = settings.Q_CLUSTER
        workers = int(cluster.get("workers", 1))
    problems = gate_problems(alpha=alpha, power=power)
    if threshold <= 0:
        problems.append(FieldProblem("regression_threshold", f"{threshold} must be above 0 to plan for it"))
    if problems:
        raise InvalidInput(problems)
    topic = approved_topic(topic_id)
    personas = start_personas(persona)
    # the judge as its runs would record it, named without building a client: a plan sends nothing, so it
    # needs no key (a start without one is refused by the start itself)
    spec = resolve("judge", provider)
    ours = judge_config(f"{spec.provider}/{model_of(spec)}")
    source, runs = spread_source(
        baseline, ours=ours, topic=topic.topic_id, max_turns=max_turns, min_coverage=min_coverage
    )
    found = (
        noise.plan(observations(runs), threshold=threshold, alpha=alpha, power=power, source=source) if runs else None
    )
    out: dict[str, Any] = {
        "runs_per_persona": None,
        "baseline_runs_per_persona": None,
        "cost_usd": None,
        "minutes": None,
        "detects": {},
        "detects_at_one_run": {},
        "spread": {},
        "threshold": threshold,
        "alpha": alpha,
        "power": power,
        "personas": len(personas),
        "spread_from": source or None,
        "workers": workers,
    }
    if found is None:
        why = (
            f"the baseline {source} has no repeats (2 or more runs of a persona): no run-to-run spread to plan from"
            if source
            else "no comparable group with repeats (same topic, max turns and judge): run a baseline with "
            "--runs-per-persona 2 or more first"
        )
        out["text"] = f"No plan: {why}."
        out["reason"] = why
        return out
    k = found.runs_per_persona or noise.MAX_PLANNED_RUNS
    forecast = run_forecast(
        topic_id=topic.topic_id,
        persona=persona,
        max_turns=max_turns,
        runs_per_persona=k,
        agent_id=agent_id,
        provider=provider,
        grade=grade,
    )
    low, high = forecast.direct_usd
    batch_runs = len(personas) * k
    extra_runs = len(personas) * (found.baseline_runs_per_persona or 0)
    seconds = _run_seconds(runs, max_turns, offline=all(line.free for line in forecast.lines))
    total_runs = batch_runs + extra_runs
    minutes = math.ceil(total_runs / max(1, workers)) * seconds / 60
    cost = high * (total_runs / batch_runs)
    out.update(
        {
            "runs_per_persona": found.runs_per_persona,
            "baseline_runs_per_persona": found.baseline_runs_per_persona,
            "cost_usd": round(cost, 4),
            "cost_usd_low": round(low * (total_runs / batch_runs), 4),
            "unpriced": list(forecast.unpriced),
            "minutes": round(minutes, 1),
            "runs": total_runs,
            "seconds_per_run": round(seconds, 1),
            "detects": found.detects,
            "detects_at_one_run": found.detects_at_one,
            "spread": found.spread,
        }
    )
    out["text"] = plan_text(out)
    return out


def _run_seconds(runs: list[dict[str, Any]], max_turns: int, *, offline: bool) -> float:
    measured = [r["seconds"] for r in runs if r.get("seconds")]
    if measured:
        return float(statistics.median(measured))
    return max_turns * SECONDS_PER_TURN["offline" if offline else "llm"]


def plan_text(plan: dict[str, Any]) -> str:
    """The plan in a few lines, as the CLI prints it and the dashboard shows it."""
    t = plan["threshold"]
    head = f"To see a drop of {t:g} at a false-alarm rate of {plan['alpha']:g} with {plan['power']:.0%} power"
    src = f" (spread from {plan['spread_from']})" if plan.get("spread_from") else ""
    lines = []
    if plan["runs_per_persona"] is None:
        lines.append(f"{head}{src}: no plan up to {noise.MAX_PLANNED_RUNS} runs per persona.")
    elif plan["baseline_runs_per_persona"]:
        k = plan["baseline_runs_per_persona"]
        lines.append(
            f"{head}{src}: the baseline is too small; a new baseline and the batch need {k} runs per persona each."
        )
    else:
        lines.append(f"{head}{src}: {plan['runs_per_persona']} run(s) per persona.")
    if plan["cost_usd"] is not None:
        lines.append(
            f"{plan['runs']} runs: up to ${plan['cost_usd']:.4f} (from ${plan['cost_usd_low']:.4f})"
            + (f", without the calls to {', '.join(plan['unpriced'])} (no price)" if plan.get("unpriced") else "")
            + f"; about {plan['minutes']:g} min at {plan['workers']} at a time ({plan['seconds_per_run']:g} s a run)."
        )
    lines.append(
        "Detects: "
        + ", ".join(f"{d} {x:g}" for d, x in plan["detects"].items())
        + "; one run per persona detects: "
        + ", ".join(f"{d} {x:g}" for d, x in plan["detects_at_one_run"].items())
    )
    return "\n".join(lines)
