"""Suite writes: discovery into the database, the database pass cache, and suite runs."""

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluation.errors import FieldProblem, InvalidInput, NotFound, PlainMessage
from evaluation.models import CacheEntry, Case, CaseResult, EvaluationRun, Suite, SuiteRun
from evaluation.models.runs import RunKind, RunStage
from evaluation.providers import ProviderSpec, keys_check
from evaluation.runs import services as runs
from evaluation.suites.cache import DEFAULT_PATH as FILE_CACHE_PATH
from evaluation.suites.cache import FileCache
from evaluation.suites.drafting import draft_skill
from evaluation.suites.parser import SuiteError, discover, load_file
from evaluation.suites.runner import CaseResult as CaseOutcome
from evaluation.suites.runner import RunOptions, run_case, run_suite
from evaluation.suites.subjects import resolve_subject

__all__ = [
    "FILE_CACHE_PATH",
    "CaseOutcome",
    "FileCache",
    "RunOptions",
    "SuiteError",
    "draft_skill",
    "suite_file_run",
    "suite_files",
    "suite_run_execute",
    "suite_run_start",
    "suites_discover",
]


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


class SuiteRunError(PlainMessage, Exception):
    """The suite could not be loaded; the message names the file and line."""


def suite_run_start(
    *,
    suite_id: int,
    model: str | None = None,
    judge_model: str | None = None,
    judge: bool = True,
    enqueue: bool = True,
    user: Any = None,
) -> EvaluationRun:
    """Create a queued run of one discovered suite (and hand it to a worker)."""
    suite = Suite.objects.filter(pk=suite_id).first()
    if suite is None:
        raise NotFound(f"suite: no suite {suite_id}")
    for name, value in (("model", model), ("judge_model", judge_model)):
        if value:
            try:
                ProviderSpec.parse(value)
            except ValueError as exc:
                raise InvalidInput([FieldProblem(name, str(exc))]) from None
    keys_check(["suite_agent"], model, field="model")
    if judge:
        keys_check(["suite_judge"], judge_model, field="judge_model")
    stamp = timezone.now().strftime("%Y%m%d_%H%M%S")
    with runs.capacity_reserved(1, queue=enqueue):
        run = runs.run_create(
            base_id=f"suite_{stamp}_{suite.name}", kind=RunKind.SUITE, stage=RunStage.QUEUED, user=user
        )
        SuiteRun.objects.create(
            run=run, suite=suite, suite_path=suite.path, model=model or "", judge_model=judge_model or "", judge=judge
        )
        if enqueue:
            runs.run_enqueue(run)
    return run


def _suite_file(path: str) -> Path:
    return Path(settings.BASE_DIR) / path if not Path(path).is_absolute() else Path(path)


def _run_cases(handle: runs.RunHandle) -> dict[str, Any]:
    """Run every case of the run's suite (from disk, as it is now) and store each result as it lands."""
    run = handle.run
    detail = SuiteRun.objects.select_related("suite").get(run=run)
    if detail.suite is None:
        raise SuiteError(detail.suite_path, None, "the suite was deleted after the run was started")
    handle.progress(stage=RunStage.EVALUATING, detail="Loading the suite")
    try:
        parsed = load_file(_suite_file(detail.suite.path))
        subject = resolve_subject(parsed)
    except SuiteError as exc:
        raise SuiteRunError(str(exc)) from exc
    options = RunOptions(
        model=detail.model or None, judge_model=detail.judge_model or None, judge=detail.judge, cache=DBCache()
    )
    cases = {c.name: c for c in detail.suite.cases.all()}
    passed = 0
    total = len(parsed.cases)
    handle.progress(max_turns=total, detail=f"Case 0/{total}")
    for index, case in enumerate(parsed.cases, start=1):
        row = cases.get(case.name) or Case.objects.create(
            suite=detail.suite, name=case.name, prompt=case.prompt, expect=case.expect, line=case.line
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
        handle.progress(detail=f"Case {index}/{total}", turn=index)
    return {
        "overall_score": round(passed / total, 3) if total else None,
        "detail": f"{passed}/{total} passed",
    }


def suite_run_execute(run_pk: Any, attempt: int) -> EvaluationRun | None:
    """One attempt of a suite run, through the kernel's lifecycle."""
    return runs.run_execute(run_pk, attempt, _run_cases)


def suite_files(paths: list[Path]) -> list[Path]:
    """Every EVAL.md and *.eval.md under the given files and folders."""
    return [f for p in paths for f in discover(p)]


def suite_file_run(path: Path, options: RunOptions) -> list[CaseOutcome]:
    """Run every case of one suite file in this process (the CLI); SuiteError names the file and line."""
    return run_suite(load_file(path), options)
