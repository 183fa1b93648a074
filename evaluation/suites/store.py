"""Suites in the app: discovery into the database, the database pass cache, and suite runs."""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluation.models import CacheEntry, Case, CaseResult, EvaluationRun, Suite
from evaluation.models.runs import RunStage, RunStatus
from evaluation.suites.parser import SuiteError, discover, load_file
from evaluation.suites.runner import RunOptions, run_case
from evaluation.suites.subjects import resolve_subject


class DBCache:
    """The pass cache kept in the database (CacheEntry), shared by every worker."""

    def is_pass(self, key: str) -> bool:
        return CacheEntry.objects.filter(fingerprint=key).exists()

    def record_pass(self, key: str, *, case: str, suite: str) -> None:
        CacheEntry.objects.get_or_create(fingerprint=key, defaults={"case_name": case[:300], "suite_path": suite[:500]})


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path(settings.BASE_DIR)))
    except ValueError:
        return str(path)


def suites_discover(roots: list[Path]) -> tuple[list[Suite], list[str]]:
    """Upsert every EVAL.md under roots with its cases; returns (suites, errors naming file and line)."""
    found, errors = [], []
    for root in roots:
        for path in discover(root):
            try:
                parsed = load_file(path)
            except SuiteError as exc:
                errors.append(str(exc))
                continue
            with transaction.atomic():
                suite, _ = Suite.objects.update_or_create(
                    path=_relative(path), defaults={"name": parsed.label, "frontmatter": parsed.frontmatter}
                )
                suite.cases.exclude(name__in=[c.name for c in parsed.cases]).delete()
                for case in parsed.cases:
                    Case.objects.update_or_create(
                        suite=suite,
                        name=case.name,
                        defaults={"prompt": case.prompt, "expect": case.expect, "line": case.line},
                    )
            found.append(suite)
    return found, errors


def suite_run_create(
    *, suite: Suite, model: str | None = None, judge_model: str | None = None, judge: bool = True
) -> EvaluationRun:
    stamp = timezone.now().strftime("%Y%m%d_%H%M%S")
    from evaluation.services import create_run

    return create_run(
        f"suite_{stamp}_{suite.name}"[:100],
        kind="suite",
        config={
            "suite_id": suite.pk,
            "suite_path": suite.path,
            "model": model or "",
            "judge_model": judge_model or "",
            "judge": judge,
        },
    )


def suite_run_execute(run_pk: Any) -> EvaluationRun:
    """Run every case of the run's suite (from disk, as it is now) and store the results."""
    run = EvaluationRun.objects.get(pk=run_pk)
    run.status, run.stage, run.started_at = RunStatus.RUNNING, RunStage.EVALUATING, timezone.now()
    run.save(update_fields=["status", "stage", "started_at"])
    try:
        suite_row = Suite.objects.get(pk=run.config["suite_id"])
        path = (
            Path(settings.BASE_DIR) / suite_row.path if not Path(suite_row.path).is_absolute() else Path(suite_row.path)
        )
        parsed = load_file(path)
        subject = resolve_subject(parsed)
        options = RunOptions(
            model=run.config.get("model") or None,
            judge_model=run.config.get("judge_model") or None,
            judge=run.config.get("judge", True),
            cache=DBCache(),
        )
        cases = {c.name: c for c in suite_row.cases.all()}
        passed = 0
        for index, case in enumerate(parsed.cases, start=1):
            row = cases.get(case.name) or Case.objects.create(
                suite=suite_row, name=case.name, prompt=case.prompt, expect=case.expect, line=case.line
            )
            result = run_case(parsed, case, options, subject=subject)
            CaseResult.objects.create(
                run=run,
                case=row,
                passed=result.passed,
                cached=result.cached,
                checks=[{"name": c.name, "passed": c.passed, "detail": c.detail} for c in result.checks],
                warnings=result.warnings,
                transcript=result.transcript,
                usage=result.usage,
                duration_ms=result.duration_ms,
                fingerprint=result.fingerprint,
            )
            passed += result.passed
            EvaluationRun.objects.filter(pk=run.pk).update(detail=f"Case {index}/{len(parsed.cases)}", turn=index)
        run.status, run.stage = RunStatus.COMPLETED, RunStage.COMPLETE
        run.overall_score = round(passed / len(parsed.cases), 3) if parsed.cases else None
        run.detail = f"{passed}/{len(parsed.cases)} passed"
    except (SuiteError, Suite.DoesNotExist) as exc:
        run.status, run.stage, run.error = RunStatus.FAILED, RunStage.FAILED, str(exc)
    run.completed_at = timezone.now()
    run.save()
    return run
