"""Record golden baselines (and the judge calls behind them, for mock-judge replays)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.conf import setting
from evaluation.drift import services
from evaluation.models import Agent
from evaluation.providers import require_keys


class Command(BaseCommand):
    help = (
        "Evaluate agents on the cast's shipped messages and write baselines/<agent>.json, recording the judge's calls."
    )

    def add_arguments(self, parser):
        parser.add_argument("--agents", required=True, help="Comma-separated agent ids, e.g. marigold,rex")
        parser.add_argument("--judge", default=None, help="Provider for the judge (default: role config, env, offline)")
        parser.add_argument("--baselines", type=Path, default=None)
        parser.add_argument("--repeats", type=int, default=1, help="Score k times; the baseline keeps each repeat")

    def handle(self, *args, **opts):
        folder = opts["baselines"] or Path(setting("BASELINES_DIR"))
        ids = [a for a in opts["agents"].split(",") if a]
        agents = list(Agent.objects.filter(pk__in=ids))
        unknown = sorted(set(ids) - {a.pk for a in agents})
        if unknown:
            raise CommandError(f"--agents: no agent {', '.join(unknown)}")
        missing = require_keys(["proposition_judge"], opts["judge"])
        if missing:
            raise CommandError("; ".join(missing))
        for agent in agents:
            run, path = services.baseline_record(
                agent_id=agent.pk, judge=opts["judge"], folder=folder, repeats=opts["repeats"]
            )
            if path is None:
                raise CommandError(f"{agent.pk}: {run.error}")
            self.stdout.write(f"{agent.pk}: {run.detail} (judge {run.judge_label}) -> {path}")
