"""Provider batches: work sent through a vendor's batch API, stored so a restarted worker resumes polling."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0016_price_table")]

    operations: list = [
        migrations.CreateModel(
            name="ProviderBatch",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "vendor",
                    models.CharField(
                        help_text="The provider that serves it (openai, anthropic, offline, ...)", max_length=40
                    ),
                ),
                ("model", models.CharField(blank=True, max_length=200)),
                ("base_url", models.CharField(blank=True, max_length=500)),
                (
                    "provider_batch_id",
                    models.CharField(
                        blank=True,
                        db_index=True,
                        help_text="The vendor's id for the batch (empty until it is created)",
                        max_length=200,
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        help_text="The work it serves: judge_items, drift_scores, run_judge", max_length=40
                    ),
                ),
                (
                    "job_key",
                    models.CharField(
                        db_index=True, help_text="Hash of the job: the same job resumes this row", max_length=64
                    ),
                ),
                (
                    "job",
                    models.JSONField(default=dict, help_text="What the work is (rubric, repeats, runs, configuration)"),
                ),
                ("custom_ids", models.JSONField(default=dict, help_text="{custom id: what its answer maps back to}")),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("submitting", "submitting"),
                            ("waiting", "waiting on the provider"),
                            ("applied", "results stored"),
                            ("failed", "failed"),
                        ],
                        default="submitting",
                        max_length=20,
                    ),
                ),
                (
                    "provider_state",
                    models.CharField(blank=True, help_text="The vendor's own status, as last read", max_length=40),
                ),
                ("total", models.PositiveIntegerField(default=0)),
                ("done", models.PositiveIntegerField(default=0, help_text="Lines the vendor answered")),
                (
                    "failed",
                    models.PositiveIntegerField(default=0, help_text="Lines the vendor failed (retried one by one)"),
                ),
                (
                    "retried",
                    models.PositiveIntegerField(default=0, help_text="Lines answered by a direct call instead"),
                ),
                (
                    "lost",
                    models.PositiveIntegerField(
                        default=0, help_text="Lines that failed in the batch and again directly"
                    ),
                ),
                ("polls", models.PositiveIntegerField(default=0)),
                ("usage", models.JSONField(blank=True, default=dict)),
                (
                    "cost_usd",
                    models.FloatField(
                        default=0.0, help_text="Batch lines at the batch price, direct retries at theirs"
                    ),
                ),
                ("error", models.TextField(blank=True)),
                (
                    "results",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text="{custom id: the answer}, kept when each run takes its own answer later",
                    ),
                ),
                (
                    "run_id",
                    models.CharField(blank=True, help_text="The run it serves, when it serves one", max_length=64),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["-created_at"],
                "indexes": [models.Index(fields=["kind", "job_key", "state"], name="batch_job_state")],
            },
        ),
    ]
