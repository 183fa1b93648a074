"""The price table, seeded with the shipped price file (prices/vendors.yaml)."""

from decimal import Decimal

import django.core.validators
from django.db import migrations, models

_PER_MILLION = [django.core.validators.MinValueValidator(Decimal("0"))]


def seed_prices(apps, schema_editor):
    # The file as shipped at migrate time; load_prices brings later editions in (rows edited in the admin kept).
    from evaluation.providers.pricing import load_entries, read_price_file

    load_entries(apps.get_model("evaluation", "ModelPrice"), read_price_file())


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0015_rubric_versions")]

    operations: list = [
        migrations.CreateModel(
            name="ModelPrice",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("vendor", models.CharField(help_text="e.g. openai, anthropic", max_length=50)),
                (
                    "model",
                    models.CharField(
                        help_text='The base name: dated names ("gpt-5.2-2026-01-15") price as their base name.',
                        max_length=200,
                    ),
                ),
                (
                    "effective_from",
                    models.DateField(help_text="The price is in force for calls on this date and after."),
                ),
                (
                    "input_per_mtok",
                    models.DecimalField(
                        decimal_places=6,
                        help_text="USD per million uncached input tokens",
                        max_digits=12,
                        validators=_PER_MILLION,
                        verbose_name="input",
                    ),
                ),
                (
                    "output_per_mtok",
                    models.DecimalField(
                        decimal_places=6,
                        help_text="USD per million output tokens (thinking included)",
                        max_digits=12,
                        validators=_PER_MILLION,
                        verbose_name="output",
                    ),
                ),
                (
                    "cached_input_per_mtok",
                    models.DecimalField(
                        decimal_places=6,
                        help_text="USD per million input tokens read from the prompt cache",
                        max_digits=12,
                        validators=_PER_MILLION,
                        verbose_name="cached input",
                    ),
                ),
                (
                    "cache_write_per_mtok",
                    models.DecimalField(
                        decimal_places=6,
                        help_text="USD per million input tokens written to the prompt cache",
                        max_digits=12,
                        validators=_PER_MILLION,
                        verbose_name="cache write",
                    ),
                ),
                (
                    "batch_discount",
                    models.DecimalField(
                        decimal_places=3,
                        default=Decimal("0.5"),
                        help_text=(
                            "Fraction taken off every price for work sent through the vendor's batch API "
                            "(0.5: half price)."
                        ),
                        max_digits=4,
                        validators=[
                            django.core.validators.MinValueValidator(Decimal("0")),
                            django.core.validators.MaxValueValidator(Decimal("1")),
                        ],
                    ),
                ),
                (
                    "source",
                    models.CharField(
                        blank=True, help_text="Where the figures come from (a price page).", max_length=300
                    ),
                ),
                (
                    "edited_in_admin",
                    models.BooleanField(
                        default=False, help_text="Changed by staff: load_prices no longer overwrites this row."
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "model price",
                "ordering": ["vendor", "model", "-effective_from"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("vendor", "model", "effective_from"), name="model_price_once_a_date"
                    )
                ],
            },
        ),
        migrations.RunPython(seed_prices, migrations.RunPython.noop),
    ]
