"""Find EVAL.md suites on disk and record them (and their cases) in the database."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.conf import setting
from evaluation.suites.services import suites_discover


class Command(BaseCommand):
    help = "Discover EVAL.md and *.eval.md suites (default: settings SUITE_DIRS) and store them."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="*", type=Path)

    def handle(self, *args, **opts):
        roots = opts["paths"] or [Path(p) for p in setting("SUITE_DIRS")]
        missing = [str(root) for root in opts["paths"] if not root.exists()]
        if missing:
            raise CommandError(f"no such file or folder: {', '.join(missing)}; nothing was discovered")
        suites, errors = suites_discover(roots)
        for suite in suites:
            self.stdout.write(f"  {suite.path}: {suite.cases.count()} case(s)")
        for error in errors:
            self.stderr.write(self.style.ERROR(f"error: {error}"))
        self.stdout.write(f"Discovered {len(suites)} suite(s).")
        if errors:
            raise CommandError(f"{len(errors)} suite file(s) could not be read; the others were stored.")
