"""Run EVAL.md suites from the command line (the same harness as the pytest plugin)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.providers import require_keys
from evaluation.suites.cache import DEFAULT_PATH, FileCache
from evaluation.suites.parser import SuiteError, discover, load_file
from evaluation.suites.runner import RunOptions, run_suite


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
            const=str(DEFAULT_PATH),
            default=None,
            help=f"Skip cases already passed (default file {DEFAULT_PATH})",
        )
        parser.add_argument("--timeout", type=float, default=120.0)

    def handle(self, *args, **opts):
        for role, flag in (("suite_agent", opts["model"]), ("suite_judge", opts["judge_model"])):
            missing = require_keys([role], flag)
            if missing:
                raise CommandError("; ".join(missing))
        options = RunOptions(
            model=opts["model"],
            judge_model=opts["judge_model"],
            judge=not opts["no_judge"],
            cache=FileCache(opts["cache"]) if opts["cache"] else None,
            timeout=opts["timeout"],
        )
        files = [f for p in opts["paths"] for f in discover(p)]
        if not files:
            raise CommandError(f"no EVAL.md or *.eval.md under {', '.join(map(str, opts['paths']))}")
        failed = total = 0
        for path in files:
            try:
                suite = load_file(path)
            except SuiteError as exc:
                raise CommandError(str(exc)) from None
            for result in run_suite(suite, options):
                total += 1
                mark = "PASS" if result.passed else "FAIL"
                cached = " (cached)" if result.cached else ""
                self.stdout.write(f"{mark}{cached} {result.suite}: {result.case}  [{result.duration_ms:.0f} ms]")
                for warning in result.warnings:
                    self.stdout.write(f"     WARNING: {warning}")
                if not result.passed:
                    failed += 1
                    self.stdout.write(result.failure_message())
        self.stdout.write(f"{total - failed} passed, {failed} failed")
        if failed:
            raise CommandError(f"{failed} case(s) failed")
