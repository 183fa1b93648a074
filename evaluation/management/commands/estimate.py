"""Print, per dimension of a rubric, the judge's own estimate, the people's and the corrected one (stratified by the judge's level, or PPI++)."""

import argparse
import json

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _cell(e: selectors.MeanEstimate, notes: list[str] | None = None, *, n: bool = False) -> str:
    """The figure with its interval (or why there is none), n where asked, and a mark ^k for each of its notes
    (k: the note's place in the footnotes)."""
    if e.value is None:
        return f"not enough data: {e.reason}"
    shown = (
        f"{e.value:.3f} (no interval: {e.reason})" if e.low is None else f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]"
    )
    shown += f" n={e.n}" if n else ""
    marks = sorted(notes.index(note) + 1 for note in e.notes if note in notes) if notes is not None else []
    return shown + (f" ^{','.join(map(str, marks))}" if marks else "")


def _footnotes(notes: list[str]) -> list[str]:
    return ["", *(f"^{k} {note}" for k, note in enumerate(notes, 1))] if notes else []


def render(table: selectors.EstimateTable) -> str:
    lines = [
        f"Judge {table.configuration}",
        f"rubric {table.rubric} v{table.rubric_version}, {table.selection}: {table.items} items judged, "
        f"{table.labelled} with people's labels"
        + (f" (of {table.labelled_of}; the others' labels hidden)" if table.labelled != table.labelled_of else "")
        + f"; {table.adjudicated} adjudicated (people's value: {selectors.PEOPLE_VALUE})",
        "95% intervals. judge only: the judge's mean over every judged item (biased by whatever it gets wrong); "
        "people only: the people's mean over the labelled items (classical CLT); corrected: stratified by the judge's level where each level holds two labels (StratPPI), else PPI++ with power tuning; its method says which.",
        "",
        f"{'dimension':<26} {'estimand':<34} {'judge only':<26} {'people only':<32} {'corrected':<26} all people",
    ]
    notes = selectors.estimate_notes(table.rows)
    for row in table.rows:
        everyone = "-" if row.all_people is None else f"{row.all_people[0]:.3f} n={row.all_people[1]}"
        lines.append(
            f"{row.dimension:<26} {row.estimand:<34} {_cell(row.judge_only, notes):<26} "
            f"{_cell(row.people_only, notes, n=True):<32} {_cell(row.corrected, notes):<26} {everyone}"
        )
    return "\n".join(lines + _footnotes(notes))


def render_budget(budgets: list[selectors.Budget]) -> str:
    lines = ["", "How many labels? Width of the corrected 95% interval by labelled items (median of seeded subsamples,"]
    lines.append("10th-90th percentile), beside the people-only width on the same subsamples; widest first.")
    for b in budgets:
        lines += [
            "",
            f"{b.dimension} ({b.estimand})",
            f"  {'labelled':>8}  {'corrected':>9}  {'spread':<15}  people only",
        ]
        if not b.points:
            lines.append("  not enough data: fewer than 2 labelled items")
        for p in b.points:
            lines.append(
                f"  {p.labelled:>8}  {p.corrected:>9.3f}  {p.corrected_low:.3f}-{p.corrected_high:.3f}"
                f"{'':<4}  {p.people_only:.3f}"
            )
        lines.append(f"  label next ({b.rule}): " + (", ".join(f"item {i}" for i in b.next_items) or "nothing left"))
    return "\n".join(lines)


def render_compare(by: str, a: str, b: str, rows: list[selectors.DifferenceRow]) -> str:
    lines = [
        f"Corrected difference {by} {a!r} minus {b!r} (difference of two corrected estimates, variances added; 95%)",
        f"{'dimension':<26} {'estimand':<34} {a[:24]:<26} {b[:24]:<26} {'difference':<28} judge-only difference",
    ]
    notes = selectors.estimate_notes(rows)
    for r in rows:
        lines.append(
            f"{r.dimension:<26} {r.estimand:<34} {_cell(r.a, notes):<26} {_cell(r.b, notes):<26} "
            f"{_cell(r.corrected, notes):<28} {_cell(r.judge_only, notes)}"
        )
    return "\n".join(lines + _footnotes(notes))


class Command(BaseCommand):
    help = (
        "Per dimension of a rubric: the judge-only, people-only and corrected (prediction-powered) estimates "
        "with 95% intervals, within one judge configuration (the newest by default)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--rubric", required=True)
        parser.add_argument("--configuration", type=int, default=None, help="A judge configuration's id")
        parser.add_argument("--source", default=None, help="Only items of this transcript source")
        parser.add_argument("--candidate", default=None, help="Only candidate responses of this name (Item key)")
        parser.add_argument("--group", default=None, help="Only conversations of the runs of this group")
        parser.add_argument(
            "--labelled", type=_count, default=None, help="Keep the people's labels of this many items only"
        )
        parser.add_argument("--seed", type=int, default=0, help="Seed of --labelled and of --budget's subsamples")
        parser.add_argument(
            "--compare",
            nargs=2,
            metavar=("A", "B"),
            default=None,
            help="The corrected difference A minus B between two groups (see --by)",
        )
        parser.add_argument("--by", choices=selectors.GROUPINGS, default="source", help="What --compare compares")
        parser.add_argument("--budget", action="store_true", help="Also: interval width by labelled items, label next")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        selection = selectors.Selection(source=opts["source"], candidate=opts["candidate"], group=opts["group"])
        try:
            if opts["compare"]:
                a, b = opts["compare"]
                _, _, rows = selectors.estimate_compare(
                    opts["rubric"],
                    opts["by"],
                    a,
                    b,
                    configuration=opts["configuration"],
                    labelled=opts["labelled"],
                    seed=opts["seed"],
                    selection=selection,
                    budget=opts["budget"],
                )
                if opts["json"]:
                    body = {"rubric": opts["rubric"], "by": opts["by"], "a": a, "b": b}
                    self.stdout.write(json.dumps({**body, "dimensions": [r.as_dict() for r in rows]}, indent=2))
                else:
                    self.stdout.write(render_compare(opts["by"], a, b, rows))
                return
            table = selectors.estimate_table(
                opts["rubric"],
                configuration=opts["configuration"],
                selection=selection,
                labelled=opts["labelled"],
                seed=opts["seed"],
            )
        except InvalidInput as exc:
            # the field names the option: --candidate, --compare
            raise CommandError("; ".join(f"--{p.field}: {p.reason}" for p in exc.problems)) from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        if not table.items:
            raise CommandError(f"no judged items in the selection ({table.selection}) of rubric {table.rubric!r}")
        budgets = selectors.estimate_budget(table, seed=opts["seed"]) if opts["budget"] else []
        if opts["json"]:
            body = table.as_dict() | ({"budget": [b.as_dict() for b in budgets]} if opts["budget"] else {})
            self.stdout.write(json.dumps(body, indent=2))
            return
        self.stdout.write(render(table) + (render_budget(budgets) if budgets else ""))
