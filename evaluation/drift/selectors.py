"""Drift reads: the drift index and an agent's drift page."""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from evaluation.conf import setting
from evaluation.drift.baselines import read_baseline
from evaluation.drift.execution import known_dimensions
from evaluation.errors import InvalidInput
from evaluation.models import Agent, CorrectionLog, DimensionScore, EvaluationRun, PropositionScore

_LIST_LITERAL = re.compile(r"\[((?:'[^'\]]*'(?:, )?)+)\]")


def reasoning_items(text: str) -> list[str]:
    """A proposition's reasoning as readable items: one per judged check (joined by " | " when stored),
    with Python list literals written out as words ("['fraction', 'half']" -> "fraction, half")."""
    plain = _LIST_LITERAL.sub(lambda m: ", ".join(re.findall(r"'([^']*)'", m.group(1))), text or "")
    return [item.strip() for item in plain.split(" | ") if item.strip()]


@dataclass(frozen=True)
class FileBaseline:
    """An agent's golden baseline as drift_run reads it (baselines/<agent>.json), for the drift pages."""

    file: str
    """Where it is, relative to the project when inside it ("baselines/rex.json")."""
    captured_at: str = ""
    judge: str = ""
    dimensions: dict[str, float] = field(default_factory=dict)
    problem: str = ""
    """Why the file cannot be read (then it has no scores)."""

    @property
    def overall(self) -> float | None:
        """The mean of its dimensions, as a drift run's overall score is the mean of its dimensions."""
        return sum(self.dimensions.values()) / len(self.dimensions) if self.dimensions else None


def agent_baseline(agent_id: str) -> FileBaseline | None:
    """The agent's baseline file in EVAL's BASELINES_DIR, the one drift_run compares with; None when there is none."""
    folder = Path(setting("BASELINES_DIR"))
    path = folder / f"{agent_id}.json"
    try:
        shown = str(path.resolve().relative_to(Path(settings.BASE_DIR).resolve()))
    except ValueError:
        shown = str(path)
    try:
        found = read_baseline(folder, agent_id)
    except InvalidInput as exc:
        return FileBaseline(shown, problem=str(exc))
    if found is None:
        return None
    return FileBaseline(
        shown,
        captured_at=found.captured_at[:16].replace("T", " "),
        judge=found.judge.label if found.judge else "",
        dimensions=dict(found.dimensions),
    )


def baseline_changes(
    baseline: FileBaseline | None, latest: EvaluationRun | None
) -> tuple[list[dict[str, Any]], float | None]:
    """Per dimension of the baseline: its score, the latest run's and the change (as drift_run reports them);
    and the change of the overall score."""
    if baseline is None or latest is None:
        return [], None
    scores = {s.dimension: s.score for s in latest.dimension_scores.all()}
    rows = [
        {
            "dimension": d,
            "baseline": b,
            "latest": scores.get(d),
            "delta": None if scores.get(d) is None else round(scores[d] - b, 2),
        }
        for d, b in baseline.dimensions.items()
    ]
    overall = baseline.overall
    delta = None if overall is None or latest.overall_score is None else round(latest.overall_score - overall, 2)
    return rows, delta


def drift_context(agent_id: str, runs_shown: int = 20) -> dict[str, Any] | None:
    """An agent's drift page: dimension scores over its latest runs, weakest propositions, corrections."""
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return None
    runs = list(
        EvaluationRun.objects.filter(kind="drift", agent=agent, status="completed")
        .prefetch_related(Prefetch("dimension_scores", queryset=DimensionScore.objects.order_by("id")))
        .order_by("-created_at")[:runs_shown]
    )[::-1]
    dimensions = list(known_dimensions())
    table: list[dict[str, Any]] = [
        {"run": r, "scores": {s.dimension: s.score for s in r.dimension_scores.all()}} for r in runs
    ]
    latest = runs[-1] if runs else None
    weakest = (
        list(PropositionScore.objects.filter(evaluation_run=latest, score__isnull=False).order_by("score")[:8])
        if latest
        else []
    )
    unscored = list(PropositionScore.objects.filter(evaluation_run=latest, score__isnull=True)) if latest else []
    for proposition in weakest + unscored:
        proposition.reasoning_items = reasoning_items(proposition.reasoning)  # type: ignore[attr-defined]
    judges = sorted({r.judge_label or "unknown judge" for r in runs})

    def series_of(dimension: str, judge: str) -> list[float | None]:
        return [
            row["scores"].get(dimension) if (row["run"].judge_label or "unknown judge") == judge else None
            for row in table
        ]

    # one line per dimension, and per judge when runs were judged by more than one: never averaged across
    series = (
        {f"{d} · {j}": series_of(d, j) for d in dimensions for j in judges}
        if len(judges) > 1
        else {d: [row["scores"].get(d) for row in table] for d in dimensions}
    )
    baseline = agent_baseline(agent.pk)
    changes, delta = baseline_changes(baseline, latest)
    return {
        "agent": agent,
        "dimensions": dimensions,
        "table": table,
        "series": {name: values for name, values in series.items() if any(v is not None for v in values)},
        "judges": judges,
        "baseline": baseline,
        "changes": changes,
        "delta": delta,
        "labels": [r.created_at.strftime("%m-%d %H:%M") for r in runs],
        "moments": [r.created_at for r in runs],
        "latest": latest,
        "weakest": weakest,
        "unscored": unscored,
        "corrections": list(CorrectionLog.objects.filter(agent=agent).order_by("-created_at")[:20]),
    }


def _per_agent(runs: QuerySet[Any], value: Any) -> Subquery:
    """One value per agent from its runs in `runs` (OuterRef: the agent)."""
    return Subquery(runs.filter(agent=OuterRef("pk")).values(value)[:1])


def drift_index() -> list[dict[str, Any]]:
    """The drift index: every character agent and every agent with drift runs, each with its number of
    drift runs and corrections, its latest completed run, its baseline file (the one drift_run compares
    with) and the overall score's change since that baseline."""
    drift = EvaluationRun.objects.filter(kind="drift")
    completed = drift.filter(status="completed").order_by("-created_at")
    counted = drift.order_by().values("agent").annotate(n=Count("pk")).values("n")
    corrections = CorrectionLog.objects.order_by().values("agent").annotate(n=Count("pk")).values("n")
    agents = list(
        Agent.objects.filter(Q(kind=Agent.Kind.CHARACTER) | Q(pk__in=drift.values("agent")))
        .annotate(
            n_runs=Coalesce(Subquery(counted.filter(agent=OuterRef("pk"))), 0),
            n_corrections=Coalesce(Subquery(corrections.filter(agent=OuterRef("pk"))), 0),
            latest_id=_per_agent(completed, "pk"),
        )
        .order_by("display_name", "pk")
    )
    runs = EvaluationRun.objects.in_bulk([a.latest_id for a in agents if a.latest_id is not None])
    rows = []
    for agent in agents:
        latest, baseline = runs.get(agent.latest_id), agent_baseline(agent.pk)
        delta = None
        if latest and baseline and baseline.overall is not None and latest.overall_score is not None:
            delta = latest.overall_score - baseline.overall
        rows.append(
            {
                "agent": agent,
                "runs": agent.n_runs,
                "corrections": agent.n_corrections,
                "latest": latest,
                "baseline": baseline,
                "delta": delta,
            }
        )
    return rows
