"""Run EVAL.md suites from the command line (the same harness as the pytest plugin)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.providers import ProviderSpec, require_keys
from evaluation.suites.services import (
    FILE_CACHE_PATH,
    FileCache,
    RunOptions,
    SuiteError,
    case_summaries,
    suite_file_run,
    suite_files,
)


class Command(BaseCommand):
    help = "Run the cases of EVAL.md suites (files or folders); exit status 1 if any case fails."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--model", help="Agent provider/model (wins over frontmatter)")
        parser.add_argument("--judge-model", help="Judge provider/model")
        parser.add_argument("--no-judge", action="store_true", help="Completion check only")
        parser.add_argument(
            "--cache",
            nargs="?",
            const=str(FILE_CACHE_PATH),
            default=None,
            help=f"Skip cases already passed (default file {FILE_CACHE_PATH})",
        )
        parser.add_argument("--timeout", type=float, default=120.0)
        parser.add_argument(
            "--repeats",
            type=int,
            default=1,
            help="Run each case K times: it passes only when all K pass (pass^k); prints the pass rate and its 95%% CI",
        )

    def handle(self, *args, **opts):
        for role, flag, name in (
            ("suite_agent", opts["model"], "--model"),
            ("suite_judge", opts["judge_model"], "--judge-model"),
        ):
            if flag:
                try:
                    ProviderSpec.parse(flag)
                except ValueError as exc:
                    raise CommandError(f"{name}: {exc}") from None
            missing = require_keys([role], flag)
            if missing:
                raise CommandError("; ".join(missing))
        if not 1 <= opts["repeats"] <= 100:
            raise CommandError("--repeats: must be from 1 to 100")
        options = RunOptions(
            model=opts["model"],
            judge_model=opts["judge_model"],
            judge=not opts["no_judge"],
            cache=FileCache(opts["cache"]) if opts["cache"] else None,
            timeout=opts["timeout"],
            repeats=opts["repeats"],
        )
        files = suite_files(opts["paths"])
        if not files:
            raise CommandError(f"no EVAL.md or *.eval.md under {', '.join(map(str, opts['paths']))}")
        if opts["repeats"] > 1 and opts["cache"]:
            self.stdout.write("note: with --repeats the cache is neither read nor written; every repeat runs")
        everything = []
        judges: dict[str, None] = {}
        broken: list[str] = []
        for path in files:
            try:
                results = suite_file_run(path, options)
            except SuiteError as exc:
                # One suite that cannot load must not stop the others: report it and go on.
                broken.append(str(exc))
                self.stderr.write(self.style.ERROR(f"ERROR {exc}"))
                continue
            for result in results:
                judges[result.judged_by] = None
                mark = "PASS" if result.passed else "FAIL"
                cached = " (cached)" if result.cached else ""
                repeat = f" [repeat {result.repeat}/{options.repeats}]" if options.repeats > 1 else ""
                self.stdout.write(
                    f"{mark}{cached} {result.suite}: {result.case}{repeat}  [{result.duration_ms:.0f} ms]"
                )
                for warning in result.warnings:
                    self.stdout.write(f"     WARNING: {warning}")
                if not result.passed:
                    self.stdout.write(result.failure_message())
            everything += results
        cases = case_summaries(everything)
        if options.repeats > 1:
            self.stdout.write(f"Per case over {options.repeats} repeats:")
            for summary in cases:
                self.stdout.write(f"  {summary.line()}")
        failed = sum(not c.pass_k for c in cases)
        self.stdout.write(f"judge: {'; '.join(judges) or 'none ran'}")
        self.stdout.write(
            f"{len(cases) - failed} passed, {failed} failed"
            + (f" (pass^{options.repeats})" if options.repeats > 1 else "")
            + (f", {len(broken)} error" if broken else "")
        )
        if failed or broken:
            raise CommandError(
                "; ".join(([f"{failed} case(s) failed"] if failed else []) + [f"suite error: {e}" for e in broken])
            )
