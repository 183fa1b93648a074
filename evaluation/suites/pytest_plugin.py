"""pytest plugin: every case of an EVAL.md (or *.eval.md) becomes an item `<folder>: <case name>`,
marked `eval` and left out of the default run. `pytest -m eval` or `pytest --eval` runs them.

    pytest --eval skills/ --eval-model anthropic/claude-sonnet-4-6 \
        --eval-judge-model anthropic/claude-sonnet-4-6 --eval-cache .eval_cache.jsonl

The summary names the judge that gave the verdicts (the offline rule-based judge when no judge
model is set). With --eval-repeats K an item passes only when all K runs pass (pass^k), and the
summary gives each case's pass rate with its 95% interval.
"""

from pathlib import Path
from typing import Any

import pytest

from evaluation.suites.parser import SuiteError, is_suite_file, load_file

WARNINGS_KEY = pytest.StashKey[list[tuple[str, str]]]()
JUDGES_KEY = pytest.StashKey[dict[str, None]]()
SUMMARIES_KEY = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalmd", "EVAL.md suites")
    group.addoption("--eval", action="store_true", help="run EVAL.md cases (left out of the default run)")
    group.addoption(
        "--eval-model", default=None, help="provider/model of the agent under test (default: role config, env, offline)"
    )
    group.addoption("--eval-judge-model", default=None, help="provider/model of the verdict judge")
    group.addoption(
        "--eval-cache",
        nargs="?",
        const="build/eval_cache.jsonl",
        default=None,
        help="skip cases whose scope already passed (PATH, default build/eval_cache.jsonl)",
    )
    group.addoption("--eval-timeout", type=float, default=120.0, help="seconds per LLM call")
    group.addoption("--eval-no-judge", action="store_true", help="completion check only: no judge tokens")
    group.addoption(
        "--eval-repeats",
        type=int,
        default=1,
        help="run each case K times; it passes only when all K pass (pass^k); the cache is not used",
    )
    parser.addini(
        "eval_dirs",
        "folders whose EVAL.md files are collected (default: everywhere pytest looks)",
        type="paths",
        default=[],
    )
    parser.addini(
        "eval_modules", "modules (dotted names or .py paths) whose EVAL string is a suite", type="linelist", default=[]
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "eval: an EVAL.md case (an agent run plus an LLM judge)")
    config.stash[WARNINGS_KEY] = []
    config.stash[JUDGES_KEY] = {}
    config.stash[SUMMARIES_KEY] = []


def _wanted(config: pytest.Config) -> bool:
    return bool(config.getoption("--eval")) or "eval" in (config.option.markexpr or "")


def _module_file(ref: str, rootdir: Path) -> Path | None:
    if ref.endswith(".py"):
        return (rootdir / ref).resolve()
    import importlib.util

    spec = importlib.util.find_spec(ref)
    return Path(spec.origin).resolve() if spec and spec.origin else None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> "EvalFile | EvalModule | None":
    if file_path.suffix == ".py":
        for ref in parent.config.getini("eval_modules"):
            if _module_file(ref, parent.config.rootpath) == file_path.resolve():
                return EvalModule.from_parent(parent, path=file_path, ref=ref)
        return None
    if not is_suite_file(file_path):
        return None
    dirs = parent.config.getini("eval_dirs")
    if dirs and not any(file_path.resolve().is_relative_to(Path(d).resolve()) for d in dirs):
        return None
    return EvalFile.from_parent(parent, path=file_path)


def _items(parent: pytest.File, suites: list[Any]):  # type: ignore[no-untyped-def]
    for suite in suites:
        for case in suite.cases:
            item = EvalItem.from_parent(parent, name=f"{suite.label}: {case.name}", suite=suite, case=case)
            item.add_marker(pytest.mark.eval)
            yield item


class EvalFile(pytest.File):
    def collect(self):  # type: ignore[no-untyped-def]
        try:
            suite = load_file(self.path)
        except SuiteError as exc:
            raise self.CollectError(str(exc)) from None
        yield from _items(self, [suite])

    class CollectError(Exception):
        pass


class EvalModule(pytest.File):
    """A module listed in `eval_modules`: its `EVAL` string's cases, anchored to the module."""

    def __init__(self, *, ref: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.ref = ref

    def collect(self):  # type: ignore[no-untyped-def]
        from evaluation.suites.subjects import module_suites

        try:
            suites = module_suites(self.ref)
        except SuiteError as exc:
            raise EvalFile.CollectError(str(exc)) from None
        yield from _items(self, suites)


class EvalFailed(Exception):
    pass


class EvalItem(pytest.Item):
    def __init__(self, *, suite: Any, case: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.suite = suite
        self.case = case

    def runtest(self) -> None:
        from evaluation.suites.cache import FileCache
        from evaluation.suites.repeats import summarize
        from evaluation.suites.runner import PYTEST_JUDGE_HINT, RunOptions, judge_description, run_case

        config = self.config
        cache_path = config.getoption("--eval-cache")
        repeats = max(1, config.getoption("--eval-repeats"))
        options = RunOptions(
            model=config.getoption("--eval-model"),
            judge_model=config.getoption("--eval-judge-model"),
            judge=not config.getoption("--eval-no-judge"),
            cache=FileCache(cache_path) if cache_path else None,
            timeout=config.getoption("--eval-timeout"),
            use_db=False,
            repeats=repeats,
        )
        results = [run_case(self.suite, self.case, options, repeat=n) for n in range(1, repeats + 1)]
        judged_by = [judge_description(r.judge_model, PYTEST_JUDGE_HINT) for r in results]  # pytest's own option
        for judge in judged_by:
            config.stash[JUDGES_KEY][judge] = None
        self.user_properties.append(("eval_cached", all(r.cached for r in results)))
        self.user_properties.append(("eval_judge", judged_by[0]))
        summary = summarize(self.suite.label, self.case.name, results)
        if repeats > 1:
            config.stash[SUMMARIES_KEY].append(summary.line())
        if not summary.pass_k:
            failures = "\n".join(r.failure_message() for r in results if not r.passed)
            raise EvalFailed(failures + (f"\n{summary.line()}" if repeats > 1 else ""))
        for warning in dict.fromkeys(w for r in results for w in r.warnings):
            config.stash[WARNINGS_KEY].append((self.name, warning))
        if results[0].cached:
            self.add_report_section("call", "eval", "cached pass: the scope fingerprint matched a recorded pass")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, EvalFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, self.name


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _wanted(config):
        return
    left_out = [i for i in items if isinstance(i, EvalItem)]
    if left_out:
        items[:] = [i for i in items if not isinstance(i, EvalItem)]
        config.hook.pytest_deselected(items=left_out)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    judges = config.stash.get(JUDGES_KEY, {})
    if judges:
        terminalreporter.section("EVAL.md judge")
        for judge in judges:
            terminalreporter.line(f"judge: {judge}")
    summaries = config.stash.get(SUMMARIES_KEY, [])
    if summaries:
        terminalreporter.section("EVAL.md pass^k")
        for line in summaries:
            terminalreporter.line(line)
    warnings = config.stash.get(WARNINGS_KEY, [])
    if warnings:
        terminalreporter.section("EVAL.md warnings (passing cases)")
        for name, warning in warnings:
            terminalreporter.line(f"{name}: WARNING: {warning}")
