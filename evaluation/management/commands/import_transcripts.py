"""Import conversations from outside (transcripts, plain text, candidate-response sets), with their labels."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import services


class Command(BaseCommand):
    help = (
        "Import a file of conversations with their human labels: all or nothing, idempotent on (source, id). "
        "Formats: json, jsonl (transcripts or candidate-response sets), text (Tutor:/Student: lines), candidates."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", default="auto", choices=["auto", "json", "jsonl", "text", "candidates"])
        parser.add_argument("--rubric", default=None, help="Read labels against this rubric (default: by record kind)")
        parser.add_argument("--source", default="", help="The records' source when they name none (default: file name)")
        parser.add_argument("--annotator", default="", help="Who made the labels when records name none")
        parser.add_argument("--speaker-separator", default=":", help="text: between speaker and message (default ':')")
        parser.add_argument("--transcript-separator", default="---", help="text: the line between transcripts")

    def handle(self, *args, **opts):
        try:
            report = services.transcripts_import(
                opts["path"],
                format=opts["format"],
                rubric=opts["rubric"],
                source=opts["source"],
                annotator=opts["annotator"],
                speaker_separator=opts["speaker_separator"],
                transcript_separator=opts["transcript_separator"],
            )
        except InvalidInput as exc:
            for problem in exc.problems:
                self.stderr.write(self.style.ERROR(f"error: {problem}"))
            raise CommandError(f"{len(exc.problems)} problem(s); nothing was imported.") from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Imported {report}")
