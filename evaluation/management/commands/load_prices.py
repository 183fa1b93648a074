"""Load the price file (prices/vendors.yaml by default) into the price table; rows edited in the admin are kept."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import InvalidInput
from evaluation.providers.pricing import prices_load


class Command(BaseCommand):
    help = (
        "Load a price file into the price table: new prices are added, changed ones updated; a row edited "
        "in the admin is never overwritten (it is listed as kept). Exits non-zero if the file is invalid."
    )

    def add_arguments(self, parser):
        parser.add_argument("--file", type=Path, default=None, help="Price file (default: prices/vendors.yaml)")

    def handle(self, *args, **opts):
        try:
            report = prices_load(path=opts["file"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        for label, names in (
            ("created", report.created),
            ("updated", report.updated),
            ("kept (edited in the admin)", report.kept),
        ):
            for name in names:
                self.stdout.write(f"{label}: {name}")
        self.stdout.write(
            f"prices: {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.kept)} kept as edited in the admin"
        )
