"""The README's main job: on a fresh clone, show that everything works end to end."""

from django.core.management.base import BaseCommand

from evaluation.models import Persona, PropositionSet, Topic


class Command(BaseCommand):
    help = "Run the demo on the embedded default (SQLite, offline provider, no API key)."

    def handle(self, *args, **opts):
        self.stdout.write(
            f"Catalogue: {Persona.objects.count()} personas, {Topic.objects.count()} topics, "
            f"{PropositionSet.objects.count()} proposition sets."
        )
