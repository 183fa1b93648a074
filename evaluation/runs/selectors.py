"""The run kernel's reads: lookup, status, and what is active."""

import uuid
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet

from evaluation.errors import NotFound
from evaluation.models import DimensionScore, EvaluationRun
from evaluation.models.runs import ACTIVE_STATUSES


def run_lookup(run_id: str, *, kind: str | None = None) -> EvaluationRun:
    """A run by readable id or UUID (of the given kind, if named); NotFound names what was asked for."""
    query = Q(run_id=run_id)
    try:
        query |= Q(pk=uuid.UUID(str(run_id)))
    except ValueError:
        pass
    runs = EvaluationRun.objects.select_related("persona", "topic", "agent").filter(query)
    run = runs.first()
    if run is None:
        raise NotFound(f"run: no run {run_id!r}")
    if kind is not None and run.kind != kind:
        raise NotFound(f"run: {run_id!r} is a {run.kind} run, not a {kind} run")
    return run


def runs_with_results() -> QuerySet[EvaluationRun]:
    """Runs with persona, topic, scores and message counts loaded in a fixed number of queries."""
    return (
        EvaluationRun.objects.select_related("persona", "topic", "agent")
        .prefetch_related(Prefetch("dimension_scores", queryset=DimensionScore.objects.order_by("id")))
        .annotate(message_count=Count("messages", distinct=True))
    )


def run_scores(run: EvaluationRun) -> dict[str, float]:
    return {s.dimension: s.score for s in run.dimension_scores.all()}


def run_summary(run: EvaluationRun) -> dict[str, Any]:
    """Spec 001's run-list entry."""
    scores = run_scores(run)
    return {
        "run_id": run.run_id,
        "id": str(run.id),
        "timestamp": run.created_at.isoformat(),
        "status": run.status,
        "stage": run.stage,
        "topic_id": run.topic.topic_id if run.topic else None,
        "persona_id": run.persona.persona_id if run.persona else None,
        "message_count": getattr(run, "message_count", None) if hasattr(run, "message_count") else run.messages.count(),
        "avg_score": run.overall_score,
        "scores": scores,
        "source": run.source,
        "source_session_id": str(run.source_session_id) if run.source_session_id else None,
        "group": run.group or None,
        "repeat_index": run.repeat_index,
    }


def active_runs(kind: str | None = None) -> QuerySet[EvaluationRun]:
    runs = EvaluationRun.objects.filter(status__in=ACTIVE_STATUSES)
    return runs.filter(kind=kind) if kind else runs


def run_status(run: EvaluationRun) -> dict[str, Any]:
    """Spec 001's status shape for one run: the stage, plus the lifecycle status and progress."""
    return {
        "status": run.stage,
        "run_status": run.status,
        "run_id": run.run_id,
        "kind": run.kind,
        "attempt": run.attempt,
        "detail": run.detail,
        "turn": run.turn,
        "max_turns": run.max_turns,
        "error": run.error or None,
    }


def runs_by_ids(run_ids: list[str]) -> list[dict[str, Any]]:
    """Statuses of the named runs (for the dashboard's polling), in one query."""
    return [run_status(r) for r in EvaluationRun.objects.filter(run_id__in=run_ids[:200])]
