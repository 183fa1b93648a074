"""Import conversations from outside (transcripts, plain text, candidate-response sets), with their labels."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import services
from evaluation.limits import read_bounded


class Command(BaseCommand):
    help = (
        "Import a file of conversations with their human labels: all or nothing (or --skip-invalid), idempotent on "
        "(source, id). "
        "Formats: json, jsonl (transcripts or candidate-response sets), text (Tutor:/Student: lines), candidates, "
        'bridge (the Bridge dataset\'s JSON files; source "bridge" unless --source names another).'
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--format", default="auto", choices=["auto", "json", "jsonl", "text", "candidates", "bridge"]
        )
        parser.add_argument("--rubric", default=None, help="Read labels against this rubric (default: by record kind)")
        parser.add_argument("--source", default="", help="The records' source when they name none (default: file name)")
        parser.add_argument("--annotator", default="", help="Who made the labels when records name none")
        parser.add_argument("--speaker-separator", default=":", help="text: between speaker and message (default ':')")
        parser.add_argument("--transcript-separator", default="---", help="text: the line between transcripts")
        parser.add_argument(
            "--map-labels",
            type=Path,
            default=None,
            metavar="FILE",
            help='JSON or YAML {"<dimension>" or "*": {"<other wording>": "<label of the scale>"}}',
        )
        parser.add_argument(
            "--skip-invalid",
            action="store_true",
            help="Import the valid records and list the rejected ones with their reasons (default: all or nothing)",
        )

    def handle(self, *args, **opts):
        try:
            label_map = None
            if opts["map_labels"] is not None:
                path = opts["map_labels"]
                if not path.is_file():
                    raise NotFound(f"--map-labels {path}: no such file")
                label_map = read_bounded(path, "CATALOG_MAX_FILE_BYTES", file=str(path))
            report = services.transcripts_import(
                opts["path"],
                format=opts["format"],
                rubric=opts["rubric"],
                source=opts["source"],
                annotator=opts["annotator"],
                speaker_separator=opts["speaker_separator"],
                transcript_separator=opts["transcript_separator"],
                label_map=label_map,
                skip_invalid=opts["skip_invalid"],
            )
        except InvalidInput as exc:
            for problem in exc.problems:
                self.stderr.write(self.style.ERROR(f"error: {problem}"))
            raise CommandError(f"{len(exc.problems)} problem(s); nothing was imported.") from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        summary, *rejected = report.lines()
        self.stdout.write(summary)
        for line in rejected:
            self.stderr.write(self.style.WARNING(line))
