"""Provider batches (filled in by the change that adds them)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0016_price_table")]

    operations: list = []
