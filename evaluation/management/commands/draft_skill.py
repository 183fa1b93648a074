"""Draft a SKILL.md from an EVAL.md, run the suite against it, and refine from the failures."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.providers import ProviderError
from evaluation.suites.services import SuiteError, best_round, draft_skill, draft_write


class Command(BaseCommand):
    help = "Write a SKILL.md that satisfies an EVAL.md: draft, test, refine (every round kept under --out)."

    def add_arguments(self, parser):
        parser.add_argument("eval_md", type=Path)
        parser.add_argument("--out", type=Path, default=Path("build/drafts"))
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--model", help="Provider/model that writes the draft and plays the agent")
        parser.add_argument("--judge-model", help="Provider/model of the judge")
        parser.add_argument(
            "--write",
            action="store_true",
            help="Place the best draft as the SKILL.md beside the eval (an existing one is kept under --out)",
        )

    def handle(self, *args, **opts):
        if not 1 <= opts["rounds"] <= 10:
            raise CommandError("--rounds: must be from 1 to 10")
        try:
            rounds = draft_skill(
                opts["eval_md"],
                opts["out"],
                rounds=opts["rounds"],
                model=opts["model"],
                judge_model=opts["judge_model"],
            )
        except (SuiteError, ValueError, ProviderError) as exc:
            raise CommandError(str(exc)) from None
        for r in rounds:
            self.stdout.write(f"round {r.number}: {r.passed}/{r.total} passed  ({r.skill})")
        self.stdout.write(f"judge: {rounds[-1].judged_by}")
        best = best_round(rounds)
        self.stdout.write(f"Best draft: {best.skill} (round {best.number}, {best.passed}/{best.total} passed)")
        if not opts["write"]:
            self.stdout.write("Run again with --write to place it as the SKILL.md beside the eval.")
            return
        try:
            written, kept = draft_write(opts["eval_md"], best, opts["out"])
        except (SuiteError, ValueError) as exc:
            raise CommandError(f"--write: {exc}") from None
        self.stdout.write(f"Wrote {written}" + (f" (the previous one is kept as {kept})" if kept else ""))
