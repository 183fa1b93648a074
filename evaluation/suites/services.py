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
from evaluation.redact import redact
from evaluation.runs import services as runs
from evaluation.suites.cache import DEFAULT_PATH as FILE_CACHE_PATH
from evaluation.suites.cache import FileCache
from evaluation.suites.drafting import Round, best_round, draft_skill, draft_write
from evaluation.suites.parser import SuiteError, discover, load_file
from evaluation.suites.runner import WEB_JUDGE_HINT, RunOptions, judge_description, model_check, run_case, run_suite
from evaluation.suites.runner import CaseResult as CaseOutcome
from evaluation.suites.runner import summaries as case_summaries
from evaluation.suites.scope import SuiteScope
from evaluation.suites.subjects import resolve_subject

__all__ = [
    "FILE_CACHE_PATH",
    "CaseOutcome",
    "FileCache",
    "RunOptions",
    "SuiteError",
    "Round",
    "best_round",
    "case_summaries",
    "draft_skill",
    "draft_write",
    "suite_file_run",
    "suite_files",
    "suite_path_check",
    "suite_run_execute",
    "suite_run_start",
    "suites_discover",
]


MAX_REPEATS = 20
"""Repeats one suite run may ask for (the API and the admin)."""


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
    repeats: int = 1,
    enqueue: bool = True,
    user: Any = None,
) -> EvaluationRun:
    """Create a queued run of one discovered suite (and hand it to a worker); with repeats k > 1 each
    case runs k times and passes only when all k do (pass^k)."""
    suite = Suite.objects.filter(pk=suite_id).first()
    if suite is None:
        raise NotFound(f"suite: no suite {suite_id}")
    for name, value in (("model", model), ("judge_model", judge_model)):
        if value:
            try:
                ProviderSpec.parse(value)
            except ValueError as exc:
                raise InvalidInput([FieldProblem(name, str(exc))]) from None
    if not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput([FieldProblem("repeats", f"must be from 1 to {MAX_REPEATS}")])
    keys_check(["suite_agent"], model, field="model")
    if judge:
        keys_check(["suite_judge"], judge_model, field="judge_model")
    stamp = timezone.now().strftime("%Y%m%d_%H%M%S")
    with runs.capacity_reserved(1, queue=enqueue):
        run = runs.run_create(
            base_id=f"suite_{stamp}_{suite.name}", kind=RunKind.SUITE, stage=RunStage.QUEUED, user=user
        )
        SuiteRun.objects.create(
            run=run,
            suite=suite,
            suite_path=suite.path,
            model=model or "",
            judge_model=judge_model or "",
            judge=judge,
            repeats=repeats,
        )
        if enqueue:
            runs.run_enqueue(run)
    return run


def _suite_file(path: str) -> Path:
    return Path(settings.BASE_DIR) / path if not Path(path).is_absolute() else Path(path)


def suite_path_check(path: str) -> None:
    """Raise SuiteError unless the suite path (relative to the project, or absolute) lies inside
    the suite folders, symlinks resolved."""
    SuiteScope.from_settings().check_file(_suite_file(path), file=path, key="path")


def _shown(scope: SuiteScope, text: str) -> str:
    """A case's check detail or warning as pages show it: paths relative to the suite folders, URL credentials masked."""
    return scope.shown_paths(redact(text))


def _run_cases(handle: runs.RunHandle) -> dict[str, Any]:
    """Run every case of the run's suite; a failure's message shows paths relative to the suite folders
    (SuiteScope.shown_paths), never the server's absolute paths."""
    try:
        return _run_suite_cases(handle)
    except runs.RunStopped:
        raise
    except Exception as exc:
        message = runs.failure_message(exc)
        shown = SuiteScope.from_settings().shown_paths(message)
        if shown != message or isinstance(exc, SuiteError):
            raise SuiteRunError(shown) from exc
        raise


def _run_suite_cases(handle: runs.RunHandle) -> dict[str, Any]:
    """Run every case of the run's suite (from disk, as it is now) and store each result as it lands."""
    run = handle.run
    scope = SuiteScope.from_settings()
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
        model=detail.model or None,
        judge_model=detail.judge_model or None,
        judge=detail.judge,
        cache=DBCache(),
        repeats=detail.repeats,
    )
    # A model the run itself names is checked first: unusable, it fails the run, not each case.
    for role, choice in (("suite_agent", detail.model), ("suite_judge", detail.judge_model if detail.judge else "")):
        if choice:
            model_check(role, choice, options)
    cases = {c.name: c for c in detail.suite.cases.all()}
    k = detail.repeats
    total = len(parsed.cases) * k
    outcomes: list[CaseOutcome] = []
    handle.progress(max_turns=total, detail=f"Case 0/{total}")
    for index, (case, repeat) in enumerate(((c, n) for c in parsed.cases for n in range(1, k + 1)), start=1):
        row = cases.get(case.name) or Case.objects.create(
            suite=detail.suite, name=case.name, prompt=case.prompt, expect=case.expect, line=case.line
        )
        cases[case.name] = row
        result = run_case(parsed, case, options, subject=subject, repeat=repeat)
        CaseResult.objects.create(
            run=run,
            case=row,
            passed=result.passed,
            cached=result.cached,
            checks=[{"name": c.name, "passed": c.passed, "detail": _shown(scope, c.detail)} for c in result.checks],
            warnings=[_shown(scope, w) for w in result.warnings],
            transcript=result.transcript,
            usage=result.usage,
            duration_ms=result.duration_ms,
            fingerprint=result.fingerprint,
            agent_model=result.agent_model,
            judge_model=result.judge_model,
            repeat=repeat,
        )
        outcomes.append(result)
        handle.progress(detail=f"Case {index}/{total}", turn=index)
    summaries = case_summaries(outcomes)
    passed = sum(s.pass_k for s in summaries)
    judged_by = judge_description(outcomes[0].judge_model, WEB_JUDGE_HINT) if outcomes else ""
    counted = f"{passed}/{len(summaries)} passed" if k == 1 else f"{passed}/{len(summaries)} cases pass^{k}"
    return {
        "overall_score": round(passed / len(summaries), 3) if summaries else None,
        "detail": counted + (f"; judge: {judged_by}" if judged_by and k > 1 else ""),
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
