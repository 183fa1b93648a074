"""Suite reads: discovered suites and a suite run's results."""

from types import SimpleNamespace
from typing import Any

from django.db.models import Count, Prefetch, QuerySet

from evaluation.errors import NotFound
from evaluation.models import Case, CaseResult, EvaluationRun, Suite
from evaluation.suites.repeats import summarize
from evaluation.suites.runner import WEB_JUDGE_HINT, judge_description


def suite_results(run: EvaluationRun) -> list[dict[str, Any]]:
    """Each case result of the run, in file order, repeats in order; with the judge that ran."""
    return [
        {
            "case": r.case.name,
            "repeat": r.repeat,
            "passed": r.passed,
            "cached": r.cached,
            "checks": r.checks,
            "warnings": r.warnings,
            "transcript": r.transcript,
            "duration_ms": round(r.duration_ms, 1),
            "usage": r.usage,
            "agent_model": r.agent_model,
            "judge_model": r.judge_model,
            "judged_by": judge_description(r.judge_model, WEB_JUDGE_HINT) if r.judge_model or r.agent_model else "",
        }
        for r in CaseResult.objects.filter(run=run).select_related("case").order_by("case__line", "repeat")
    ]


def suite_case_summaries(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case over its repeats: pass^k, the pass rate and its 95% Wilson interval."""
    grouped: dict[str, list[SimpleNamespace]] = {}
    for row in results:
        grouped.setdefault(row["case"], []).append(SimpleNamespace(passed=row["passed"]))
    out = []
    for case, rows in grouped.items():
        summary = summarize("", case, rows)
        out.append(
            {
                "case": case,
                "k": summary.k,
                "passes": summary.passes,
                "pass_k": summary.pass_k,
                "mean": round(summary.rate, 3),
                "ci_low": round(summary.ci_low, 3),
                "ci_high": round(summary.ci_high, 3),
            }
        )
    return out


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
