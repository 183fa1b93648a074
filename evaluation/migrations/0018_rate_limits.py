"""Shared rate-limit budgets: one row per vendor key, base URL and model, where no Redis is configured."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0017_provider_batches")]

    operations: list = [
        migrations.CreateModel(
            name="RateLimitBudget",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "key",
                    models.CharField(
                        help_text="A hash of the key's fingerprint, URL and model.", max_length=64, unique=True
                    ),
                ),
                (
                    "label",
                    models.CharField(
                        help_text="Vendor, model, URL and the key's fingerprint (never the key itself).",
                        max_length=300,
                    ),
                ),
                (
                    "state",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text="Limits, what remains, reset times, calls in flight, a pause.",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={"verbose_name": "rate-limit budget", "ordering": ["label"]},
        ),
    ]
