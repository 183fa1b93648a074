"""Realism cards: simulated students (or an imported set) against real students."""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors as judging_selectors
from evaluation.providers import ProviderError
from evaluation.tutoring import selectors, services


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
            "--acts",
            default="judge",
            help="What gives each student turn its dialogue act: judge (default: the judge role's LLM, the rules "
            "when it is offline), rules, or a provider spec (e.g. openai/gpt-5-mini). A shipped table's acts are "
            "always the rules' (it holds no text): import the reference's transcripts to have an LLM read both",
        )
        parser.add_argument(
            "--build-reference",
            nargs="+",
            type=Path,
            metavar="FILE",
            default=None,
            help="Bridge's train/validation/test JSON files: write their per-turn measures as a reference table",
        )
        parser.add_argument("--out", type=Path, default=None, help="--build-reference: where to write the table")
        parser.add_argument(
            "--fit",
            metavar="PERSONA",
            default="",
            help="Propose grounding values for this persona from --reference (e.g. bridge:error=guess) and show its "
            "card now; --save stores them (then run a batch and card it again)",
        )
        parser.add_argument("--save", action="store_true", help="--fit: store the proposed values on the persona")
        parser.add_argument(
            "--next-turn",
            action="store_true",
            help="Next-turn tests: replay the --transcripts set's real dialogues, let the simulator write each student "
            "turn as --persona, and score it against the real turn",
        )
        parser.add_argument(
            "--provider",
            action="append",
            default=[],
            help="--next-turn: a simulator model (default: the simulator role's); repeat it to compare models, one "
            "report per persona and model",
        )
        parser.add_argument(
            "--batch",
            action="store_true",
            default=None,
            help="--next-turn: send each persona's calls as one provider batch (as judging does; default: as the "
            "simulator's LLM config options say)",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="--next-turn: price the job per simulator model (direct and by batch) and send nothing",
        )
        parser.add_argument(
            "--limit", type=int, default=100, help="--next-turn: student turns per persona (default 100)"
        )

    def handle(self, *args, **opts):
        try:
            if opts["build_reference"]:
                return self.build(opts["build_reference"], opts["out"])
            if opts["next_turn"]:
                return self.next_turn(opts)
            if opts["fit"]:
                return self.fit(opts["fit"], opts["reference"], opts["save"], opts["json"])
            cards = selectors.realism_cards(
                reference=opts["reference"],
                persona=opts["persona"],
                transcripts=opts["transcripts"],
                group=opts["group"],
                acts=opts["acts"],
            )
        except InvalidInput as exc:
            raise CommandError("; ".join(str(p) for p in exc.problems)) from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(json.dumps(cards.as_dict(), indent=2))
            return
        if cards.acts_by != "rules":
            self.stdout.write(
                f"acts by {cards.acts_by}: {cards.act_calls} call(s) made, the rest from the cache"
                + (f", {cards.act_failures} failed (those turns by the rules)" if cards.act_failures else "")
            )
        if not cards.cards:
            self.stdout.write("No completed simulated runs to card.")
        for card in cards.cards:
            self.stdout.write(self.text(card))

    def text(self, card: Any) -> str:
        lines = [
            f"{card.name}: {card.dialogues} dialogue(s), {card.turns} student turn(s); reference {card.reference}: "
            f"{card.reference_dialogues} dialogue(s), {card.reference_turns} turn(s)",
            f"  {card.summary()}",
            f"  acts by {card.acts_by}; the reference's by {card.reference_acts_by}",
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

    def next_turn(self, opts: dict[str, Any]) -> None:
        if not opts["transcripts"]:
            raise CommandError("--next-turn needs --transcripts SOURCE (an imported set of real dialogues)")
        if opts["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        if opts["dry_run"]:
            plan = selectors.next_turn_forecast(
                transcripts=opts["transcripts"],
                persona=opts["persona"],
                providers=opts["provider"],
                limit=opts["limit"],
            )
            if opts["json"]:
                self.stdout.write(
                    json.dumps({"transcripts": opts["transcripts"], "forecast": plan.as_dict()}, indent=2)
                )
                return
            self.stdout.write(plan.text())
            return
        try:
            reports = selectors.next_turn_reports(
                transcripts=opts["transcripts"],
                persona=opts["persona"],
                providers=opts["provider"],
                limit=opts["limit"],
                batch=opts["batch"],
            )
        except ProviderError as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(
                json.dumps({"transcripts": opts["transcripts"], "reports": [r.as_dict() for r in reports]}, indent=2)
            )
            return
        for r in reports:
            how = f"by {r.batch}" if r.batch else "direct calls"
            self.stdout.write(
                f"{r.persona} ({r.simulator}): {r.turns} turn(s); same act {r.act_agreement}, same answer-or-not "
                f"{r.attempt_agreement}, |log length ratio| {r.mean_length_gap}, ROUGE-L {r.mean_rouge_l}; median words "
                f"{r.median_words} against {r.real_median_words}; {how}, ${r.cost_usd:.4f}"
                + (f", {r.failed} turn(s) failed" if r.failed else "")
            )

    def fit(self, persona: str, reference: str, save: bool, as_json: bool) -> None:
        found = selectors.persona_fit(persona, reference)
        if save:
            services.persona_ground(persona_id=persona, grounding=found.grounding)
        if as_json:
            self.stdout.write(json.dumps({**found.as_dict(), "saved": save}, indent=2))
            return
        self.stdout.write(f"{persona}: grounding fitted to {reference}: {json.dumps(found.grounding)}")
        self.stdout.write("saved on the persona" if save else "not saved (--save stores it)")
        if found.after is None:
            self.stdout.write("No completed simulated runs yet: no card before or after (run a batch, then fit again).")
            return
        self.stdout.write("Before, the runs as played:")
        for card in found.before:
            self.stdout.write(self.text(card))
        self.stdout.write("Before, their tutor turns answered by the offline student as grounded now:")
        self.stdout.write(self.text(found.replayed_before))
        self.stdout.write("After, the same tutor turns answered by the offline student grounded by the proposal:")
        self.stdout.write(self.text(found.after))
        self.stdout.write(
            "An LLM simulator is steered by the grounding through its prompt: run a batch with it and card it "
            f"(manage.py realism --persona {persona} --reference {reference}) to see whether the model follows it."
        )

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
