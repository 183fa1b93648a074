"""Rubric versions: each rubric's current unit and dimensions recorded as its current version; every
existing label belongs to it, and every version number a judge configuration names gets a record too
(the rows as they are now: the best record there is of what it judged with)."""

import django.db.models.deletion
from django.db import migrations, models

from evaluation.judging.versions import content_hash, snapshot


def record_versions(apps, schema_editor):
    Rubric = apps.get_model("evaluation", "Rubric")
    RubricVersion = apps.get_model("evaluation", "RubricVersion")
    Annotation = apps.get_model("evaluation", "Annotation")
    JudgeConfiguration = apps.get_model("evaluation", "JudgeConfiguration")
    for rubric in Rubric.objects.all():
        dimensions = snapshot(rubric.dimensions.all())
        digest = content_hash(rubric.unit, dimensions)
        numbers = set(JudgeConfiguration.objects.filter(rubric=rubric).values_list("rubric_version", flat=True))
        for number in sorted(numbers | {rubric.version}):
            RubricVersion.objects.create(
                rubric=rubric, number=number, unit=rubric.unit, dimensions=dimensions, content_hash=digest
            )
        current = RubricVersion.objects.get(rubric=rubric, number=rubric.version)
        Annotation.objects.filter(dimension__rubric=rubric).update(rubric_version=current)


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0014_baseline_gate'),
    ]

    operations = [
        migrations.CreateModel(
            name='RubricVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('unit', models.CharField(choices=[('session', 'Whole conversation'), ('response', 'One response in context')], max_length=10)),
                ('dimensions', models.JSONField(default=list, help_text='Each dimension as it was: id, name, position, question, scale_kind, scale_min, scale_max, categories, aliases, anchors.')),
                ('content_hash', models.CharField(help_text='Hash of the unit and the dimensions.', max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['rubric', '-number'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='annotation',
            name='annotation_once_per_annotator',
        ),
        migrations.AlterField(
            model_name='annotation',
            name='dimension',
            field=models.ForeignKey(on_delete=django.db.models.deletion.RESTRICT, related_name='annotations', to='evaluation.rubricdimension'),
        ),
        migrations.AlterField(
            model_name='judgeconfiguration',
            name='rubric_version',
            field=models.PositiveIntegerField(help_text='The RubricVersion number its scores were made under.'),
        ),
        migrations.AlterField(
            model_name='judgescore',
            name='dimension',
            field=models.ForeignKey(on_delete=django.db.models.deletion.RESTRICT, related_name='judge_scores', to='evaluation.rubricdimension'),
        ),
        migrations.AlterField(
            model_name='rubric',
            name='version',
            field=models.PositiveIntegerField(default=1, help_text="The current version, part of every judge configuration key. A change of scales, questions or anchors after labels or judgements exist makes a new version by itself; raise it by hand when the rubric's meaning changed in a way its text does not show."),
        ),
        migrations.AddField(
            model_name='rubricversion',
            name='rubric',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='evaluation.rubric'),
        ),
        migrations.AddField(
            model_name='annotation',
            name='rubric_version',
            field=models.ForeignKey(help_text='The version of the rubric the label was made under; its scale reads the value.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='annotations', to='evaluation.rubricversion'),
        ),
        migrations.RunPython(record_versions, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='annotation',
            name='rubric_version',
            field=models.ForeignKey(help_text='The version of the rubric the label was made under; its scale reads the value.', on_delete=django.db.models.deletion.CASCADE, related_name='annotations', to='evaluation.rubricversion'),
        ),
        migrations.AddConstraint(
            model_name='annotation',
            constraint=models.UniqueConstraint(fields=('item', 'dimension', 'annotator', 'rubric_version'), name='annotation_once_per_version'),
        ),
        migrations.AddConstraint(
            model_name='rubricversion',
            constraint=models.UniqueConstraint(fields=('rubric', 'number'), name='rubric_version_once'),
        ),
    ]
