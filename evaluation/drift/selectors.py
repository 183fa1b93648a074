"""Drift reads: an agent's drift page."""

from typing import Any

from django.db.models import Prefetch

from evaluation.drift.execution import known_dimensions
from evaluation.models import Agent, CorrectionLog, DimensionScore, EvaluationRun, PropositionScore


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
    return {
        "agent": agent,
        "dimensions": dimensions,
        "table": table,
        "series": {d: [row["scores"].get(d) for row in table] for d in dimensions},
        "labels": [r.created_at.strftime("%m-%d %H:%M") for r in runs],
        "latest": latest,
        "weakest": weakest,
        "unscored": unscored,
        "corrections": list(CorrectionLog.objects.filter(agent=agent).order_by("-created_at")[:20]),
    }
