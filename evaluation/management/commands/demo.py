"""The README's main job: every persona against the reference tutor, offline, with reports."""

import os
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils import timezone

from evaluation.conf import setting
from evaluation.models import EvaluationRun, Persona, Topic
from evaluation.tutoring import services


class Command(BaseCommand):
    help = "Run all personas against the built-in reference tutor with the offline provider (no API key needed)."

    def add_arguments(self, parser):
        parser.add_argument("--max-turns", type=int, default=20)
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument(
            "--prepare",
            action="store_true",
            help="Migrate the database and load the catalogue first (bin/demo), while the tutor server starts",
        )

    def handle(self, *args, **opts):
        # The tutor server boots (seconds) while the database is prepared; EVAL_SERVER_URL names one to use.
        own = None if os.environ.get("EVAL_SERVER_URL") else services.ServerProcess(services.own_server_env()).start()
        try:
            if opts["prepare"]:
                call_command("migrate", interactive=False, verbosity=0)
                call_command("load_catalog", verbosity=0, stdout=self.stdout, stderr=self.stderr)
            topic = Topic.objects.filter(approved=True).order_by("grade", "topic_id").last()
            self.stdout.write(f"Catalogue: {Persona.objects.count()} personas, {Topic.objects.count()} topics.")
            started = timezone.now()
            call_command(
                "run_evaluation",
                topic_id=topic.topic_id if topic else None,
                persona="all",
                provider="offline",
                max_turns=opts["max_turns"],
                seed=opts["seed"],
                workers=opts["workers"],
                stdout=self.stdout,
                **({"own_server": own} if own is not None else {}),
            )
        finally:
            if own is not None:
                own.stop()
        self.next_steps(EvaluationRun.objects.filter(created_at__gte=started).exclude(overall_score=None))

    def next_steps(self, runs) -> None:
        """Say what to read and what to run next: the lowest-scoring report, a login, the server, the dashboard."""
        lowest = runs.order_by("overall_score", "run_id").first()
        python = ".venv/bin/python"
        lines = ["", "Next:"]
        if lowest is not None:
            folder = Path(setting("RUNS_DIR")) / lowest.run_id
            lines.append(f"  read the lowest-scoring report   {folder / 'review.md'}")
            lines.append(f"  and its problems                 {folder / 'problems.md'}")
        lines += [
            f"  create a staff login             {python} manage.py createsuperuser",
            f"  start the server                 {python} manage.py runserver",
            "  open the dashboard               http://127.0.0.1:8000/admin/evaluation/",
        ]
        self.stdout.write("\n".join(lines))
