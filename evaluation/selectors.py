"""Reads that several doors share (API, CLI, dashboard, reports)."""

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Prefetch, QuerySet
from django.utils.dateparse import parse_date

from evaluation.models import DimensionScore, EvaluationRun, Problem, RunMessage
from evaluation.tutoring.personas import persona_as_dict
from evaluation.tutoring.topics import topic_as_dict


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


def run_status(run: EvaluationRun) -> dict[str, Any]:
    """Spec 001's status shape, for one run."""
    return {
        "status": run.stage,
        "run_status": run.status,
        "run_id": run.run_id,
        "detail": run.detail,
        "turn": run.turn,
        "max_turns": run.max_turns,
        "error": run.error or None,
    }


def run_messages(run: EvaluationRun) -> list[dict[str, Any]]:
    return [
        {
            "turn": m.turn,
            "role": m.role,
            "content": m.content,
            "timestamp": m.timestamp.isoformat(),
            "metadata": m.metadata,
        }
        for m in RunMessage.objects.filter(run=run).order_by("turn", "id")
    ]


def run_evaluation(run: EvaluationRun) -> dict[str, Any] | None:
    scores = list(DimensionScore.objects.filter(run=run).order_by("id"))
    if not scores:
        return None
    problems = Problem.objects.filter(run=run).order_by("rank")
    return {
        "scores": {s.dimension: s.score for s in scores},
        "avg_score": run.overall_score,
        "dimension_analysis": {s.dimension: s.analysis for s in scores},
        "problems": [
            {
                "rank": p.rank,
                "title": p.title,
                "turns": p.turns,
                "description": p.description,
                "quote": p.quote,
                "quote_found": p.quote_found,
                "severity": p.severity,
                "root_cause": p.root_cause,
            }
            for p in problems
        ],
        "summary": run.summary,
        "judge": run.judge_label,
        "offline": run.judge_label.startswith("offline/"),
    }


def run_report_context(run: EvaluationRun) -> dict[str, Any]:
    """Everything the report writers need, from the database alone."""
    return {
        "run": {"run_id": run.run_id, "id": str(run.id), "status": run.status, "source": run.source},
        "config": run.config,
        "persona": persona_as_dict(run.persona) if run.persona else run.config.get("persona"),
        "topic": topic_as_dict(run.topic) if run.topic else run.config.get("topic"),
        "session": {
            "session_id": str(run.source_session_id) if run.source_session_id else run.config.get("session_id")
        },
        "messages": run_messages(run),
        "evaluation": run_evaluation(run),
    }


def group_runs(group: str) -> list[dict[str, Any]]:
    """Comparison input: every run of a multi-persona group with its scores and root causes."""
    runs = (
        runs_with_results()
        .filter(group=group)
        .prefetch_related("problems")
        .order_by("persona__persona_id", "repeat_index")
    )
    out = []
    for run in runs:
        out.append(
            {
                "run_id": run.run_id,
                "persona_id": run.persona.persona_id if run.persona else None,
                "status": run.status,
                "repeat_index": run.repeat_index,
                "scores": run_scores(run),
                "avg_score": run.overall_score,
                "root_causes": [p.root_cause for p in run.problems.all()],
            }
        )
    return out


@dataclass
class RunCard:
    """What a dashboard card shows for one run."""

    run: EvaluationRun
    scores: list[tuple[str, float]]
    message_count: int


RUN_FILTERS = ("source", "persona", "topic", "status", "date_from", "date_to")


def run_list_page(
    filters: dict[str, str], page_number: str | int | None, per_page: int = 24
) -> tuple[Page, list[RunCard]]:
    """One page of runs, newest first, in four queries whatever the number of runs or messages."""
    runs = EvaluationRun.objects.filter(kind="tutor").select_related("persona", "topic").order_by("-created_at")
    if filters.get("source"):
        runs = runs.filter(source=filters["source"])
    if filters.get("persona"):
        runs = runs.filter(persona__persona_id=filters["persona"])
    if filters.get("topic"):
        runs = runs.filter(topic__topic_id=filters["topic"])
    if filters.get("status"):
        runs = runs.filter(status=filters["status"])
    for key, lookup in (("date_from", "created_at__date__gte"), ("date_to", "created_at__date__lte")):
        value = parse_date(filters.get(key) or "")
        if value:
            runs = runs.filter(**{lookup: value})
    page = Paginator(runs, per_page).get_page(page_number)
    items = list(page.object_list)
    ids = [r.pk for r in items]
    scores: dict[Any, list[tuple[str, float]]] = {}
    for run_pk, dimension, score in (
        DimensionScore.objects.filter(run_id__in=ids).order_by("id").values_list("run_id", "dimension", "score")
    ):
        scores.setdefault(run_pk, []).append((dimension, score))
    counts = dict(
        RunMessage.objects.filter(run_id__in=ids).values("run_id").annotate(n=Count("id")).values_list("run_id", "n")
    )
    return page, [RunCard(r, scores.get(r.pk, []), counts.get(r.pk, 0)) for r in items]


def runs_by_ids(run_ids: list[str]) -> list[dict[str, Any]]:
    """Statuses of the named runs (for the dashboard's polling), in one query."""
    return [run_status(r) for r in EvaluationRun.objects.filter(run_id__in=run_ids[:200])]


def comparison_context(group: str) -> dict[str, Any] | None:
    """A multi-persona group's table: personas x dimensions (mean, spread), root causes, from the data."""
    from evaluation.tutoring.reports import comparison_data

    runs = group_runs(group)
    if not runs:
        return None
    data = comparison_data(runs)
    dimensions: list[str] = []
    for p in data["personas"].values():
        dimensions += [d for d in p["mean_scores"] if d not in dimensions]
    rows = []
    for persona_id, p in data["personas"].items():
        cells = [(p["mean_scores"].get(d), p["spread"].get(d)) for d in dimensions]
        rows.append(
            {
                "persona_id": persona_id,
                "cells": cells,
                "avg": p["avg_score"],
                "avg_spread": p["avg_spread"],
                "runs": p["runs"],
            }
        )
    repeats = max(len(p["runs"]) for p in data["personas"].values())
    return {
        "group": group,
        "dimensions": dimensions,
        "rows": rows,
        "root_causes": data["root_causes"],
        "repeats": repeats,
        "series": {pid: p["mean_scores"] for pid, p in data["personas"].items()},
    }


def suite_results(run: EvaluationRun) -> list[dict[str, Any]]:
    from evaluation.models import CaseResult

    return [
        {
            "case": r.case.name,
            "passed": r.passed,
            "cached": r.cached,
            "checks": r.checks,
            "warnings": r.warnings,
            "transcript": r.transcript,
            "duration_ms": round(r.duration_ms, 1),
            "usage": r.usage,
        }
        for r in CaseResult.objects.filter(run=run).select_related("case").order_by("case__line")
    ]


def drift_context(agent_id: str, runs_shown: int = 20) -> dict[str, Any] | None:
    """An agent's drift page: dimension scores over its latest runs, weakest propositions, corrections."""
    from evaluation.models import Agent, CorrectionLog, PropositionScore

    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return None
    runs = list(
        EvaluationRun.objects.filter(kind="drift", agent=agent, status="completed")
        .prefetch_related(Prefetch("dimension_scores", queryset=DimensionScore.objects.order_by("id")))
        .order_by("-created_at")[:runs_shown]
    )[::-1]
    dimensions = ["adherence", "consistency", "fluency", "convergence"]
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
