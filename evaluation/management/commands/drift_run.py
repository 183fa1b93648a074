"""Persona-drift harness: evaluate agents and fail on regressions against golden baselines."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.conf import setting
from evaluation.drift import services
from evaluation.errors import InvalidInput
from evaluation.models import Agent
from evaluation.providers import ProviderError, require_keys


class Command(BaseCommand):
    help = (
        "Evaluate character agents on every drift dimension; exit status 1 on a regression (a drop of more than "
        "1.0, beyond the noise of the repeats), a failed or incomplete evaluation, or when nothing could be compared. "
        "An agent without a baseline is reported as 'no baseline'."
    )

    def add_arguments(self, parser):
        parser.add_argument("--agents", default="", help="Comma-separated agent ids (default: every character agent)")
        parser.add_argument("--mode", choices=services.HARNESS_MODES, default="live")
        parser.add_argument("--judge", default=None, help="Provider for the judge (live and synthetic modes)")
        parser.add_argument(
            "--baselines", type=Path, default=None, help="Folder of golden baselines (default: baselines/)"
        )
        parser.add_argument(
            "--markdown", type=Path, default=None, help="Write the scores table (for a PR comment) here"
        )
        parser.add_argument("--junit", type=Path, default=None, help="Write JUnit XML here")
        parser.add_argument("--rounds", type=int, default=4, help="Synthetic mode: messages per agent")
        parser.add_argument(
            "--repeats", type=int, default=1, help="Evaluate each agent k times (mean and bootstrap 95%% CI per score)"
        )
        parser.add_argument(
            "--rule",
            choices=services.HARNESS_RULES,
            default="interval",
            help="interval (default): a drop of more than 1.0 whose 95%% CI over the repeats excludes the baseline; "
            "fixed: the drop alone (what one repeat always uses)",
        )
        parser.add_argument(
            "--batch",
            action="store_true",
            help="Send the judge's calls through its vendor's batch API and wait for it (cheaper, slower; live and "
            "synthetic modes)",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Compare with baselines captured with another setup (judge, judge prompt, propositions, window); "
            "every report then says so",
        )

    def handle(self, *args, **opts):
        agents = [a for a in opts["agents"].split(",") if a] or list(
            Agent.objects.filter(kind="character").values_list("id", flat=True)
        )
        if not agents:
            raise CommandError("--agents: no character agents (load the cast with manage.py load_catalog)")
        if opts["mode"] != "mock-judge":
            missing = require_keys(
                ["proposition_judge", "gate", "tutor"] if opts["mode"] == "synthetic" else ["proposition_judge"],
                opts["judge"],
            )
            if missing:
                raise CommandError("; ".join(missing))
        try:
            report = services.harness_run(
                agent_ids=agents,
                mode=opts["mode"],
                baselines_dir=opts["baselines"] or Path(setting("BASELINES_DIR")),
                cast_file=Path(setting("CAST_DIR")) / "messages.jsonl",
                judge=opts["judge"],
                rounds=opts["rounds"],
                repeats=opts["repeats"],
                rule=opts["rule"],
                force=opts["force"],
                batch=opts["batch"],
            )
        except services.SetupRefused as refused:
            # the refusal still writes the reports, headed with it and each difference: a PR comment always appears
            if opts["markdown"]:
                opts["markdown"].write_text(services.refusal_markdown(refused, mode=opts["mode"]))
            if opts["junit"]:
                opts["junit"].write_text(services.refusal_junit(refused, mode=opts["mode"]))
            raise CommandError(str(refused)) from None
        except (ValueError, RuntimeError, ProviderError, InvalidInput) as exc:
            raise CommandError(str(exc)) from None
        if report.judge.startswith("offline/") and opts["mode"] != "mock-judge" and not opts["judge"]:
            self.stderr.write(
                "warning: no judge is configured for proposition_judge (admin LLM configs, EVAL_PROPOSITION_JUDGE_PROVIDER "
                "or --judge): the offline rule-based judge scored this run"
            )
        table = services.report_markdown(report)
        self.stdout.write(table)
        if opts["markdown"]:
            opts["markdown"].write_text(table)
        if opts["junit"]:
            opts["junit"].write_text(services.report_junit(report))
        for agent, reasons in sorted(report.forced.items()):
            self.stderr.write(f"warning: {agent}: forced comparison (--force): {'; '.join(reasons)}")
        for agent in report.without_baseline:
            self.stderr.write(f"warning: {agent}: no baseline, not compared")
        if report.problems:
            raise CommandError("; ".join(report.problems))
