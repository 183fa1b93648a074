"""Load personas, topics and propositions from their folders into the database (idempotent).

Per file it says what it did: created, updated, replaced (another file's or the admin's record),
skipped (edited in the admin since it was loaded: the admin wins unless --force) or rejected
(invalid: file, field, reason). -v 2 also names the unchanged files; -v 0 prints conflicts and errors only.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.catalog import catalog_load
from evaluation.conf import setting


class Command(BaseCommand):
    help = (
        "Load persona, topic, proposition and cast files into the database; records edited in the admin are "
        "kept unless --force. Exits non-zero if any file was rejected."
    )

    def add_arguments(self, parser):
        parser.add_argument("--personas", type=Path, default=None, help="Persona folder (default: personas/)")
        parser.add_argument("--topics", type=Path, default=None, help="Topic folder (default: topics/)")
        parser.add_argument(
            "--propositions", type=Path, default=None, help="Proposition folder (default: propositions/)"
        )
        parser.add_argument("--cast", type=Path, default=None, help="Character agents folder (default: cast/)")
        parser.add_argument("--only", choices=["personas", "topics", "propositions", "cast"], help="Load one kind only")
        parser.add_argument(
            "--force", action="store_true", help="Overwrite records staff edited in the admin since they were loaded"
        )

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
            force=opts["force"],
        )
        verbosity = opts["verbosity"]
        for outcome in report.files:
            if outcome.outcome in ("created", "updated", "replaced") and verbosity >= 1:
                self.stdout.write(f"  {outcome}")
            elif outcome.outcome == "unchanged" and verbosity >= 2:
                self.stdout.write(f"  {outcome}")
        for warning in report.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        for error in report.errors:
            self.stderr.write(self.style.ERROR(f"error: {error}"))
        if verbosity >= 1:
            counts = ", ".join(f"{n} {kind}" for kind, n in report.loaded.items())
            outcomes = ", ".join(
                f"{report.count(o)} {o}"
                for o in ("created", "updated", "replaced", "unchanged", "skipped", "rejected")
                if report.count(o)
            )
            self.stdout.write(f"Loaded {counts} ({len(report.files)} files: {outcomes}).")
        if not report.ok:
            raise CommandError(f"{len(report.errors)} problem(s) in the files above; the other files loaded.")
