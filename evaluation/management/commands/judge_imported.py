"""Judge imported conversations (or candidate responses) with a rubric; the canary set goes first."""

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors, services
from evaluation.providers import ProviderError
from evaluation.providers.compat import plumbing_only


class Command(BaseCommand):
    help = (
        "Judge every imported item of the rubric's unit with the rubric_judge role's provider (or --provider), "
        "k times each. Items already judged under the same configuration are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("--rubric", required=True, help="A rubric slug, e.g. tutor-response")
        parser.add_argument("--provider", default=None, help="offline, openai/gpt-5.2, anthropic:claude-opus-4-6, ...")
        parser.add_argument("--repeats", type=int, default=1, help="Judge each item k times (self-consistency)")
        parser.add_argument("--workers", type=int, default=4, help="Calls in flight at once")
        parser.add_argument("--again", action="store_true", help="Judge items already judged under this configuration")
        parser.add_argument(
            "--canary-only",
            action="store_true",
            help="Judge only the rubric's canary set (after a configuration change)",
        )
        parser.add_argument(
            "--batch",
            action="store_true",
            help="Send the calls through the vendor's batch API and wait for it (cheaper, slower); a batch of "
            "the same job that is already stored is resumed, not sent again",
        )
        parser.add_argument(
            "--no-wait",
            action="store_true",
            help="With --batch: send the batch and return; a worker polls it and stores the scores when it ends",
        )

        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Print the calls, tokens and price (direct and by batch) of judging every item of the rubric; "
            "judge and send nothing",
        )

    def handle(self, *args, **opts):
        try:
            if opts["dry_run"]:
                if opts["canary_only"]:
                    raise CommandError("--dry-run prices every item of the rubric; leave out --canary-only")
                found = selectors.judging_forecast(
                    rubric=services.rubric_get(opts["rubric"]), provider=opts["provider"], repeats=opts["repeats"]
                )
                self.stdout.write(found.text())
                self.stdout.write("Dry run: nothing was judged or sent.")
                return
            if opts["canary_only"]:
                report = services.canary_rejudge(
                    rubric=opts["rubric"],
                    provider=opts["provider"],
                    repeats=opts["repeats"],
                    batch=opts["batch"] or None,
                )
                self.stdout.write(f"Judged {report}")
                return
            report = services.transcripts_judge(
                rubric=opts["rubric"],
                provider=opts["provider"],
                repeats=opts["repeats"],
                workers=opts["workers"],
                only_missing=not opts["again"],
                batch=opts["batch"] or None,
                on_progress=self._progress,
                wait=not opts["no_wait"],
            )
        except (InvalidInput, NotFound, ProviderError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        for line in report.failed[:20]:
            self.stderr.write(self.style.WARNING(f"failed: {line}"))
        self.stdout.write(f"Judged {report}")
        note = plumbing_only(report.configuration)
        if note:
            self.stdout.write(self.style.WARNING(note))
        if report.failed:
            raise CommandError(f"{len(report.failed)} call(s) failed; the others are stored. Run again to retry them.")

    def _progress(self, done: int, total: int) -> None:
        self.stderr.write(f"waiting on the provider's batch ({done}/{total} done)")
