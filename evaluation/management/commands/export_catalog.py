"""Write personas, topics and propositions from the database back to files."""

from pathlib import Path

from django.core.management.base import BaseCommand

from evaluation.catalog import catalog_export


class Command(BaseCommand):
    help = "Export the database's personas, topics and propositions to a folder (personas/, topics/, propositions/)."

    def add_arguments(self, parser):
        parser.add_argument("out", type=Path, help="Folder to write into")

    def handle(self, *args, **opts):
        out: Path = opts["out"]
        written = catalog_export(
            personas_dir=out / "personas",
            topics_dir=out / "topics",
            propositions_dir=out / "propositions",
            cast_dir=out / "cast",
        )
        self.stdout.write(f"Wrote {len(written)} files under {out}.")
