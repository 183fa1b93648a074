"""Suite reads: discovered suites and a suite run's results."""

from typing import Any

from django.db.models import Count

from evaluation.models import CaseResult, EvaluationRun, Suite


def suite_list() -> list[dict[str, Any]]:
    suites = Suite.objects.annotate(case_count=Count("cases")).order_by("path")
    return [{"id": s.pk, "name": s.name, "path": s.path, "cases": s.case_count} for s in suites]


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
