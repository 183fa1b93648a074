"""Realism cards: simulated students (or an imported set) against real students."""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors as judging_selectors
from evaluation.tutoring import selectors


class Command(BaseCommand):
    help = (
        "The realism card of each persona's simulated runs (per simulator model), or of an imported transcript "
        "set, against a reference corpus of real students (default: the shipped Bridge table). "
        "--build-reference measures Bridge's JSON files into a reference table."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--reference",
            default=selectors.DEFAULT_REFERENCE,
            help="bridge (the shipped table), bridge:<split>, bridge:not-<split>, bridge:error=<type>, or an imported "
            "source name (imported:<name> when a shipped table has that name)",
        )
        parser.add_argument("--persona", default="all", help="A persona id, or all (default)")
        parser.add_argument("--group", default="", help="Only the runs of this batch (its group id)")
        parser.add_argument("--transcripts", default="", help="Card an imported transcript set (its source name)")
        parser.add_argument("--json", action="store_true", help="Print the cards as JSON")
        parser.add_argument(
            "--build-reference",
            nargs="+",
            type=Path,
            metavar="FILE",
            default=None,
            help="Bridge's train/validation/test JSON files: write their per-turn measures as a reference table",
        )
        parser.add_argument("--out", type=Path, default=None, help="--build-reference: where to write the table")

    def handle(self, *args, **opts):
        try:
            if opts["build_reference"]:
                return self.build(opts["build_reference"], opts["out"])
            cards = selectors.realism_cards(
                reference=opts["reference"],
                persona=opts["persona"],
                transcripts=opts["transcripts"],
                group=opts["group"],
            )
        except InvalidInput as exc:
            for problem in exc.problems:
                self.stderr.write(self.style.ERROR(f"error: {problem}"))
            raise CommandError(f"{len(exc.problems)} problem(s)") from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(json.dumps(cards.as_dict(), indent=2))
            return
        if not cards.cards:
            self.stdout.write("No completed simulated runs to card.")
        for card in cards.cards:
            self.stdout.write(self.text(card))

    def text(self, card: Any) -> str:
        lines = [
            f"{card.name}: {card.dialogues} dialogue(s), {card.turns} student turn(s); reference {card.reference}: "
            f"{card.reference_dialogues} dialogue(s), {card.reference_turns} turn(s)",
            f"  {card.summary()}",
        ]
        for m in card.measures:
            if m.name == "act_distribution":
                value = ", ".join(f"{k} {v:.0%}" for k, v in m.value.items())
                ref = ", ".join(f"{k} {v:.0%}" for k, v in m.reference_value.items())
            else:
                value, ref = f"{m.value} {m.interval}", f"{m.reference_value} {m.reference_interval}"
            flag = {True: "FLAG", False: "ok", None: "-"}[m.flag]
            lines.append(f"  [{flag:>4}] {m.name}: {value} | real: {ref} | {m.distance_name} {m.distance}")
        return "\n".join(lines)

    def build(self, files: list[Path], out: Path | None) -> None:
        if out is None:
            raise CommandError("--build-reference needs --out FILE")
        records = (
            (path.stem, r.external_id, r.messages, r.metadata)
            for path in files
            for r in judging_selectors.transcripts_read(path, format="bridge")
        )
        text, dialogues, turns = selectors.reference_table(records)
        out.write_text(text, encoding="utf-8")
        self.stdout.write(f"{out}: {dialogues} dialogue(s), {turns} student turn(s) from {len(files)} file(s)")
