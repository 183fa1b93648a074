"""Judge validity: rubrics, imported transcripts and their items, annotations, judge scores, canaries;
the judging role for LLM configs; the two shipped rubrics (rubrics/*.json); the groups' permissions."""

import json

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from evaluation.judging.rubrics import SHIPPED_DIR, rubric_rows

NEW_MODELS = (
    "rubric",
    "rubricdimension",
    "transcript",
    "item",
    "annotation",
    "judgeconfiguration",
    "judgescore",
    "canaryset",
)
OPERATOR_EXTRA = (
    "add_transcript",
    "change_transcript",
    "add_annotation",
    "change_annotation",
    "add_canaryset",
    "change_canaryset",
)


def load_shipped_rubrics(apps, schema_editor):
    Rubric = apps.get_model("evaluation", "Rubric")
    RubricDimension = apps.get_model("evaluation", "RubricDimension")
    for path in sorted(SHIPPED_DIR.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        fields, dims = rubric_rows(doc)
        rubric, created = Rubric.objects.get_or_create(slug=doc["slug"], defaults=fields)
        if created:
            RubricDimension.objects.bulk_create(RubricDimension(rubric=rubric, **d) for d in dims)


def grant_permissions(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ours = Permission.objects.filter(content_type__app_label="evaluation")
    view = list(ours.filter(codename__in=[f"view_{m}" for m in NEW_MODELS]))
    for group in Group.objects.filter(name__in=["viewer", "operator"]):
        group.permissions.add(*view)
        if group.name == "operator":
            group.permissions.add(*ours.filter(codename__in=OPERATOR_EXTRA))


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0011_suite_models_and_repeats"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Item",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "key",
                    models.CharField(
                        blank=True, help_text="The candidate's name (e.g. a tutor model); '' = session.", max_length=100
                    ),
                ),
                (
                    "response",
                    models.TextField(blank=True, help_text="The candidate next turn, for response-level rubrics."),
                ),
            ],
            options={
                "ordering": ["transcript", "key"],
            },
        ),
        migrations.CreateModel(
            name="Rubric",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.SlugField(max_length=64, unique=True)),
                ("name", models.CharField(max_length=200)),
                (
                    "version",
                    models.PositiveIntegerField(
                        default=1,
                        help_text="Part of every judge configuration key: raise it when the rubric's meaning changes.",
                    ),
                ),
                (
                    "unit",
                    models.CharField(
                        choices=[("session", "Whole conversation"), ("response", "One response in context")],
                        default="session",
                        max_length=10,
                    ),
                ),
                ("description", models.TextField(blank=True)),
                (
                    "judge_prompt",
                    models.TextField(
                        help_text="The judge's instructions. {dimensions} is replaced by each dimension's question, scale and anchors."
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["slug"],
            },
        ),
        migrations.AlterField(
            model_name="llmconfig",
            name="role",
            field=models.CharField(
                choices=[
                    ("simulator", "Simulator"),
                    ("tutor", "Tutor"),
                    ("judge", "Judge"),
                    ("proposition_judge", "Proposition Judge"),
                    ("gate", "Gate"),
                    ("suite_agent", "Suite Agent"),
                    ("suite_judge", "Suite Judge"),
                    ("rubric_judge", "Rubric Judge"),
                ],
                max_length=30,
                unique=True,
            ),
        ),
        migrations.CreateModel(
            name="JudgeConfiguration",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(max_length=300, unique=True)),
                ("provider", models.CharField(help_text="provider/model", max_length=200)),
                ("prompt_hash", models.CharField(max_length=64)),
                ("rubric_version", models.PositiveIntegerField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "rubric",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="judge_configurations",
                        to="evaluation.rubric",
                    ),
                ),
            ],
            options={
                "ordering": ["rubric", "-created_at"],
            },
        ),
        migrations.CreateModel(
            name="CanarySet",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("items", models.ManyToManyField(blank=True, related_name="canaries", to="evaluation.item")),
                (
                    "rubric",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="canaries", to="evaluation.rubric"
                    ),
                ),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="RubricDimension",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=64)),
                ("position", models.PositiveSmallIntegerField(default=0)),
                ("question", models.TextField(blank=True)),
                (
                    "scale_kind",
                    models.CharField(
                        choices=[("integer", "Integer range"), ("categories", "Ordered categories")],
                        default="integer",
                        max_length=12,
                    ),
                ),
                (
                    "scale_min",
                    models.IntegerField(blank=True, help_text="Integer scales: the lowest score.", null=True),
                ),
                (
                    "scale_max",
                    models.IntegerField(blank=True, help_text="Integer scales: the highest score.", null=True),
                ),
                (
                    "categories",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text='Category scales, best first: ["Yes", "To some extent", "No"].',
                    ),
                ),
                (
                    "aliases",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text='Other spellings of a category: {"To some extent": "Somewhat"}.',
                    ),
                ),
                (
                    "anchors",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text='What each level means: {"Yes": "...", "No": "..."} or {"1-2": "..."}.',
                    ),
                ),
                (
                    "rubric",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="dimensions", to="evaluation.rubric"
                    ),
                ),
            ],
            options={
                "ordering": ["rubric", "position", "id"],
            },
        ),
        migrations.CreateModel(
            name="JudgeScore",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("repeat", models.PositiveSmallIntegerField(default=1)),
                ("value", models.CharField(max_length=100)),
                ("score", models.FloatField()),
                ("rationale", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "configuration",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="scores",
                        to="evaluation.judgeconfiguration",
                    ),
                ),
                (
                    "item",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="judge_scores", to="evaluation.item"
                    ),
                ),
                (
                    "dimension",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="judge_scores",
                        to="evaluation.rubricdimension",
                    ),
                ),
            ],
            options={
                "ordering": ["configuration", "item", "dimension", "repeat"],
            },
        ),
        migrations.CreateModel(
            name="Annotation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("value", models.CharField(help_text="As on the scale: a category, or an integer.", max_length=100)),
                ("score", models.FloatField(help_text="The value's place on the scale (higher is better).")),
                ("annotator", models.CharField(max_length=150)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "item",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="annotations", to="evaluation.item"
                    ),
                ),
                (
                    "dimension",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="annotations",
                        to="evaluation.rubricdimension",
                    ),
                ),
            ],
            options={
                "ordering": ["item", "dimension", "annotator"],
            },
        ),
        migrations.CreateModel(
            name="Transcript",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "source",
                    models.CharField(help_text="Where it came from: a dataset, a product, a file.", max_length=100),
                ),
                ("external_id", models.CharField(help_text="Its id at the source; unique per source.", max_length=200)),
                (
                    "messages",
                    models.JSONField(default=list, help_text='[{"role": "tutor"|"student"|..., "content": "..."}]'),
                ),
                ("metadata", models.JSONField(blank=True, default=dict)),
                (
                    "content_hash",
                    models.CharField(help_text="Hash of messages and items: re-imports detect change.", max_length=64),
                ),
                ("imported_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "topic",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="transcripts",
                        to="evaluation.topic",
                    ),
                ),
            ],
            options={
                "ordering": ["source", "external_id"],
            },
        ),
        migrations.AddField(
            model_name="item",
            name="transcript",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="items", to="evaluation.transcript"
            ),
        ),
        migrations.AddConstraint(
            model_name="rubricdimension",
            constraint=models.UniqueConstraint(fields=("rubric", "name"), name="rubric_dimension_once"),
        ),
        migrations.AddConstraint(
            model_name="judgescore",
            constraint=models.UniqueConstraint(
                fields=("item", "dimension", "configuration", "repeat"), name="judge_score_once_per_repeat"
            ),
        ),
        migrations.AddConstraint(
            model_name="annotation",
            constraint=models.UniqueConstraint(
                fields=("item", "dimension", "annotator"), name="annotation_once_per_annotator"
            ),
        ),
        migrations.AddConstraint(
            model_name="transcript",
            constraint=models.UniqueConstraint(fields=("source", "external_id"), name="transcript_once_per_source"),
        ),
        migrations.AddConstraint(
            model_name="item",
            constraint=models.UniqueConstraint(fields=("transcript", "key"), name="item_once_per_transcript"),
        ),
        migrations.RunPython(load_shipped_rubrics, migrations.RunPython.noop),
        migrations.RunPython(grant_permissions, migrations.RunPython.noop),
    ]
