"""Suite reads: discovered suites and a suite run's results."""

from typing import Any

from django.db.models import Count, Prefetch, QuerySet

from evaluation.errors import NotFound
from evaluation.models import Case, CaseResult, EvaluationRun, Suite


def suite_results(run: EvaluationRun) -> list[dict[str, Any]]:
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


def suite_last_run(suite: Suite) -> EvaluationRun | None:
    return EvaluationRun.objects.filter(suite_run__suite=suite).order_by("-created_at").first()


def suites_with_case_counts(*, name: str = "") -> QuerySet[Suite]:
    """Discovered suites by path, each with `case_count`; `name` keeps those of that name."""
    suites = Suite.objects.annotate(case_count=Count("cases")).order_by("path")
    return suites.filter(name=name) if name else suites


def suite_get(suite_id: int) -> Suite:
    """One suite with `case_count` and its cases loaded in file order; NotFound names the id."""
    suite = (
        Suite.objects.annotate(case_count=Count("cases"))
        .prefetch_related(Prefetch("cases", queryset=Case.objects.order_by("line")))
        .filter(pk=suite_id)
        .first()
    )
    if suite is None:
        raise NotFound(f"suite: no suite {suite_id}")
    return suite
