"""The 1-hour cache write price (loaded from the price file), and a batch's resends after whole-batch failures."""

from decimal import Decimal

import django.core.validators
from django.db import migrations, models


def seed_long_cache_prices(apps, schema_editor):
    from evaluation.providers.pricing import load_entries, read_price_file

    load_entries(apps.get_model("evaluation", "ModelPrice"), read_price_file())


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0021_label_queues"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelprice",
            name="cache_write_long_per_mtok",
            field=models.DecimalField(
                blank=True,
                decimal_places=6,
                help_text="USD per million input tokens written to the 1-hour cache (Anthropic); empty: the cache write price",
                max_digits=12,
                null=True,
                validators=[django.core.validators.MinValueValidator(Decimal("0"))],
                verbose_name="long cache write",
            ),
        ),
        migrations.AddField(
            model_name="providerbatch",
            name="carried",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Answers from its earlier vendor batches, the lines the current one holds, its chunk size",
            ),
        ),
        migrations.AddField(
            model_name="providerbatch",
            name="reason",
            field=models.TextField(
                blank=True, help_text="Why the vendor failed, expired or cancelled the whole batch, in its own words"
            ),
        ),
        migrations.AddField(
            model_name="providerbatch",
            name="resends",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Times its unanswered lines were sent again as a new batch after a whole-batch failure",
            ),
        ),
        migrations.RunPython(seed_long_cache_prices, migrations.RunPython.noop),
    ]
