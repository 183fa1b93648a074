"""Labelling queues from the command line: make one, show its progress and agreement, export its labels."""

import csv
import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors, services


def _names(text: str) -> list[str]:
    return [n for n in text.replace(",", " ").split() if n]


class Command(BaseCommand):
    help = (
        "Labelling queues. `queue make NAME --rubric R --from label-next --count 20 --annotators a,b --owner o` "
        "makes one (from label-next, filter, random, job or items); `queue show ID` prints its progress, the "
        "agreement between people and the intervals now against the start; `queue export ID --format csv|json`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        make = sub.add_parser("make", help="Make a queue.")
        make.add_argument("name")
        make.add_argument("--rubric", required=True)
        make.add_argument("--from", dest="origin", default="label-next", help="label-next, filter, random, job, items")
        make.add_argument("--count", type=int, default=None)
        make.add_argument("--seed", type=int, default=0)
        make.add_argument("--configuration", type=int, default=None, help="A judge configuration's id.")
        make.add_argument("--source", default=None)
        make.add_argument("--candidate", default=None)
        make.add_argument("--group", default=None)
        make.add_argument("--items", default="", help="Item ids, separated by commas (with --from items).")
        make.add_argument("--annotators", default="", help="User names, separated by commas.")
        make.add_argument("--adjudicators", default="")
        make.add_argument("--labels-per-item", type=int, default=2)
        make.add_argument("--not-blind", action="store_true", help="Show judge scores and others' labels at once.")
        make.add_argument("--owner", required=True, help="The owner's user name.")
        show = sub.add_parser("show", help="A queue's progress and agreement.")
        show.add_argument("queue", type=int)
        export = sub.add_parser("export", help="A queue's labels, with annotator, time, version, adjudication.")
        export.add_argument("queue", type=int)
        export.add_argument("--format", choices=["csv", "json"], default="csv")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, options["action"])(options)
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None

    def _owner(self, name: str) -> Any:
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"--owner: no such user {name!r}")
        return user

    def make(self, options: dict[str, Any]) -> None:
        items = _names(options["items"])
        if any(not i.isdigit() for i in items):
            raise CommandError(f"--items: not item ids: {options['items']!r}")
        queue = services.queue_create(
            name=options["name"],
            rubric=options["rubric"],
            owner=self._owner(options["owner"]),
            origin=options["origin"],
            items=[int(i) for i in items],
            count=options["count"],
            seed=options["seed"],
            configuration=options["configuration"],
            source=options["source"],
            candidate=options["candidate"],
            group=options["group"],
            annotators=_names(options["annotators"]),
            adjudicators=_names(options["adjudicators"]),
            labels_per_item=options["labels_per_item"],
            blind=not options["not_blind"],
        )
        self.stdout.write(
            f"queue {queue.pk} {queue.name!r}: {queue.entries.count()} items ({queue.origin_detail}), "
            f"{queue.labels_per_item} labels an item, {'blind' if queue.blind else 'not blind'}"
        )

    def _queue(self, pk: int) -> Any:
        from evaluation.models import LabelQueue

        queue = LabelQueue.objects.select_related("rubric", "configuration", "owner").filter(pk=pk).first()
        if queue is None:
            raise CommandError(f"no queue {pk}")
        return queue

    def show(self, options: dict[str, Any]) -> None:
        queue = self._queue(options["queue"])
        report = selectors.queue_report(queue)
        out = [
            f"queue {queue.pk} {queue.name!r}: rubric {queue.rubric.slug}, {report.items} items, "
            f"{report.complete} with all {queue.labels_per_item} labels, {report.held} held now",
            "",
            f"{'person':<20} {'labelled':>8} {'skipped':>8} {'open':>6} {'median s':>9}",
        ]
        for p in report.people:
            secs = "-" if p.seconds_median is None else f"{p.seconds_median:.1f}"
            out.append(f"{p.name:<20} {p.labelled:>8} {p.skipped:>8} {p.remaining:>6} {secs:>9}")
        out += ["", "agreement between people (raw labels): Krippendorff's alpha, ordinal, 95% bootstrap interval"]
        for a in report.agreement:
            exact = "-" if a.exact is None else f"{a.exact:.0%}"
            out.append(f"{a.dimension:<26} alpha {a.alpha}  all the same {exact}  differ on {a.disagreements}")
        if report.widths:
            out += ["", f"corrected interval width (people's value: {report.people_value}):"]
            for name, start, now in report.widths:
                fmt = lambda w: "-" if w is None else f"{w:.3f}"  # noqa: E731
                out.append(f"{name:<26} start {fmt(start)}  now {fmt(now)}")
        out += ["", f"{len(report.disagreements)} items where people differ; {report.adjudicated} adjudicated"]
        self.stdout.write("\n".join(out))

    def export(self, options: dict[str, Any]) -> None:
        rows = selectors.queue_export_rows(self._queue(options["queue"]))
        if options["format"] == "json":
            self.stdout.write(json.dumps(rows, indent=1))
            return
        writer = csv.DictWriter(self.stdout, fieldnames=list(selectors.EXPORT_FIELDS))
        writer.writeheader()
        writer.writerows(rows)
