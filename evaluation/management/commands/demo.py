"""The README's main job: every persona against the reference tutor, offline, with reports."""

from django.core.management import call_command
from django.core.management.base import BaseCommand

from evaluation.models import Persona, Topic


class Command(BaseCommand):
    help = "Run all personas against the built-in reference tutor with the offline provider (no API key needed)."

    def add_arguments(self, parser):
        parser.add_argument("--max-turns", type=int, default=20)
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--workers", type=int, default=2)

    def handle(self, *args, **opts):
        topic = Topic.objects.filter(approved=True).order_by("grade", "topic_id").last()
        self.stdout.write(f"Catalogue: {Persona.objects.count()} personas, {Topic.objects.count()} topics.")
        call_command(
            "run_evaluation",
            topic_id=topic.topic_id if topic else None,
            persona="all",
            provider="offline",
            max_turns=opts["max_turns"],
            seed=opts["seed"],
            workers=opts["workers"],
            stdout=self.stdout,
        )
