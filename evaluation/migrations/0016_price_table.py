"""The price table (filled in by the change that adds it)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0015_rubric_versions")]

    operations: list = []
