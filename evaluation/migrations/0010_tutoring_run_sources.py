"""Drift and suite runs get their own source values, so they never read as simulated tutoring runs."""

from django.db import migrations, models


def sources_by_kind(apps, schema_editor):
    Run = apps.get_model("evaluation", "EvaluationRun")
    for kind in ("drift", "suite"):
        Run.objects.filter(kind=kind).update(source=kind)


def sources_back(apps, schema_editor):
    Run = apps.get_model("evaluation", "EvaluationRun")
    Run.objects.filter(source__in=["drift", "suite"]).update(source="simulated")


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0009_catalog_fingerprint"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="evaluationrun",
            name="run_source_valid",
        ),
        migrations.AlterField(
            model_name="evaluationrun",
            name="source",
            field=models.CharField(
                choices=[
                    ("simulated", "Simulated"),
                    ("existing_session", "Session"),
                    ("drift", "Agent messages (drift)"),
                    ("suite", "EVAL.md suite"),
                ],
                default="simulated",
                max_length=20,
            ),
        ),
        migrations.RunPython(sources_by_kind, sources_back),
        migrations.AddConstraint(
            model_name="evaluationrun",
            constraint=models.CheckConstraint(
                condition=models.Q(("source__in", ["simulated", "existing_session", "drift", "suite"])),
                name="run_source_valid",
            ),
        ),
    ]
