"""Load personas, topics and propositions from their folders into the database (idempotent)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.catalog import catalog_load
from evaluation.conf import setting


class Command(BaseCommand):
    help = "Load persona, topic and proposition files into the database. Exits non-zero if any file failed."

    def add_arguments(self, parser):
        parser.add_argument("--personas", type=Path, default=None, help="Persona folder (default: personas/)")
        parser.add_argument("--topics", type=Path, default=None, help="Topic folder (default: topics/)")
        parser.add_argument(
            "--propositions", type=Path, default=None, help="Proposition folder (default: propositions/)"
        )
        parser.add_argument("--cast", type=Path, default=None, help="Character agents folder (default: cast/)")
        parser.add_argument("--only", choices=["personas", "topics", "propositions", "cast"], help="Load one kind only")

    def handle(self, *args, **opts):
        dirs = {
            "personas": opts["personas"] or Path(setting("PERSONAS_DIR")),
            "topics": opts["topics"] or Path(setting("TOPICS_DIR")),
            "propositions": opts["propositions"] or Path(setting("PROPOSITIONS_DIR")),
            "cast": opts["cast"] or Path(setting("CAST_DIR")),
        }
        if opts["only"]:
            dirs = {k: (v if k == opts["only"] else None) for k, v in dirs.items()}
        for kind, folder in dirs.items():
            if folder is not None and not folder.is_dir():
                raise CommandError(f"--{kind}: {folder} is not a folder")
        report = catalog_load(
            personas_dir=dirs["personas"],
            topics_dir=dirs["topics"],
            propositions_dir=dirs["propositions"],
            cast_dir=dirs["cast"],
        )
        for warning in report.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        for error in report.errors:
            self.stderr.write(self.style.ERROR(f"error: {error}"))
        counts = ", ".join(f"{n} {kind}" for kind, n in report.loaded.items())
        self.stdout.write(f"Loaded {counts}.")
        if not report.ok:
            raise CommandError(f"{len(report.errors)} problem(s) in the files above; the other files loaded.")
