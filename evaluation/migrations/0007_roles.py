"""Two groups staff can be put in: viewers read runs and the catalogue; operators also start, retry,
cancel, ingest and edit the catalogue. Secrets (LLM configs, endpoint credentials) stay with admins."""

from django.db import migrations

OPERATOR_EXTRA = [
    "start_run",
    "retry_run",
    "cancel_run",
    "use_corrections",
    "add_agentmessage",
    *(
        f"{action}_{model}"
        for action in ("add", "change")
        for model in (
            "persona",
            "topic",
            "agent",
            "agentevaluationconfig",
            "propositionset",
            "proposition",
            "suite",
            "case",
        )
    ),
]
HIDDEN_FROM_VIEWERS = ("llmconfig", "endpointcredential")


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after migrations run; make sure they exist now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ours = Permission.objects.filter(content_type__app_label="evaluation")
    view = [p for p in ours.filter(codename__startswith="view_") if p.codename[5:] not in HIDDEN_FROM_VIEWERS]
    viewer, _ = Group.objects.get_or_create(name="viewer")
    viewer.permissions.set(view)
    operator, _ = Group.objects.get_or_create(name="operator")
    operator.permissions.set(view + list(ours.filter(codename__in=OPERATOR_EXTRA)))


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["viewer", "operator"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0006_run_owner_and_permissions"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
