"""Shared rate-limit budgets (filled in by the change that adds them)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0017_provider_batches")]

    operations: list = []
