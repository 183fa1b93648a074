"""The admin: every model's pages open for staff, are refused to anonymous users; JSON is validated."""

import json
from pathlib import Path

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from evaluation.models import Persona

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db

MODEL_ADMINS = [m for m in admin.site._registry if m._meta.app_label == "evaluation"]


def test_every_evaluation_model_is_registered():
    from django.apps import apps

    registered = {m.__name__ for m in MODEL_ADMINS}
    models = {m.__name__ for m in apps.get_app_config("evaluation").get_models()}
    assert models <= registered, f"not in the admin: {models - registered}"


@pytest.mark.parametrize("model", MODEL_ADMINS, ids=lambda m: m.__name__)
def test_changelist_opens_for_staff_and_redirects_anonymous(staff_client, catalog, model):
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert staff_client.get(url).status_code == 200
    response = Client().get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize("model", MODEL_ADMINS, ids=lambda m: m.__name__)
def test_add_or_change_page_opens_for_staff(staff_client, staff_user, catalog, model, rf):
    obj = model._default_manager.first()
    if obj is not None:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[obj.pk])
        expected = 200
    else:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")
        # a superuser is refused only an add page the admin closes to everyone (read-only results)
        request = rf.get(url)
        request.user = staff_user
        expected = 200 if admin.site._registry[model].has_add_permission(request) else 403
    response = staff_client.get(url)
    assert response.status_code == expected, (url, response.status_code)


def persona_post(**changes):
    """The persona change form as a browser posts it: lists one per line, style and behaviours as fields."""
    data = json.loads((ROOT / "personas" / "struggler.json").read_text())
    data.update(changes)
    style = dict(data.pop("response_style"))
    behaviours = dict(data.pop("persona_specific_behaviors", {}))
    form = {}
    for key, value in data.items():
        if isinstance(value, dict):  # a JSON field (grounding) holds its JSON text
            form[key] = json.dumps(value)
        else:
            form[key] = "\n".join(value) if isinstance(value, list) else value
    for key in ("max_words", "language", "examples"):
        value = style.pop(key, "")
        form[f"style_{key}"] = "\n".join(value) if isinstance(value, list) else value
    form["style_other"] = json.dumps(style)
    schema = json.loads((ROOT / "personas" / "schema.json").read_text())
    for key in schema["properties"]["persona_specific_behaviors"]["properties"]:
        value = behaviours.pop(key, "")
        if isinstance(value, dict):  # {"probability": p, "trigger": t}
            form[f"trigger_{key}"] = value["trigger"]
            value = value["probability"]
        form[f"behaviour_{key}"] = value
    form["other_behaviors"] = json.dumps(behaviours)
    form.setdefault("extra", "{}")
    return form


def test_admin_refuses_probability_1_7_naming_the_field(staff_client, catalog):
    url = reverse("admin:evaluation_persona_change", args=[Persona.objects.get(persona_id="struggler").pk])
    response = staff_client.post(url, persona_post(correct_answer_probability=1.7))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "correct_answer_probability" in errors
    assert Persona.objects.get(persona_id="struggler").correct_answer_probability == 0.3


def test_admin_refuses_response_style_without_max_words(staff_client, catalog):
    url = reverse("admin:evaluation_persona_change", args=[Persona.objects.get(persona_id="struggler").pk])
    response = staff_client.post(url, persona_post(response_style={"language": "en"}))
    errors = response.context["adminform"].form.errors
    assert errors["style_max_words"] == ["This field is required."]


def test_admin_saves_a_valid_persona(staff_client, catalog):
    url = reverse("admin:evaluation_persona_change", args=[Persona.objects.get(persona_id="struggler").pk])
    response = staff_client.post(url, persona_post(correct_answer_probability=0.35))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Persona.objects.get(persona_id="struggler").correct_answer_probability == 0.35


def test_admin_index_groups_models_by_task_and_hides_internal_tables(staff_client):
    response = staff_client.get(reverse("admin:index"))
    assert response.status_code == 200
    sections = {app["name"]: [m["object_name"] for m in app["models"]] for app in response.context["app_list"]}
    assert list(sections)[:6] == ["Catalogue", "Runs and reports", "Drift", "Suites", "Access", "Background work"]
    assert sections["Catalogue"][:3] == ["Persona", "Topic", "Agent"]
    assert "EvaluationRun" in sections["Runs and reports"] and "Suite" in sections["Suites"]
    assert "User" in sections["Access"] and "TokenProxy" in sections["Access"]
    listed = {name for names in sections.values() for name in names}
    for internal in ("RunMessage", "RunEvent", "DimensionScore", "Problem", "Proposition", "OrmQ", "CaseResult"):
        assert internal not in listed, internal
    html = response.content.decode()
    assert "Runs and reports" in html and ">Run messages<" not in html
    # a hidden table still has its page
    assert staff_client.get(reverse("admin:evaluation_runmessage_changelist")).status_code == 200


def test_every_registered_model_is_listed_or_deliberately_hidden(staff_client):
    from evaluation.adminsite import HIDDEN

    response = staff_client.get(reverse("admin:index"))
    listed = {
        f"{m['model']._meta.app_label}.{m['object_name']}" for a in response.context["app_list"] for m in a["models"]
    }
    registered = {f"{m._meta.app_label}.{m.__name__}" for m in admin.site._registry}
    assert registered == listed | (registered & HIDDEN)
    assert not listed & HIDDEN


def test_the_index_follows_each_users_permissions_and_a_change_of_them_at_once(django_user_model):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("viewer", "v@example.com", "pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_persona"))
    client = Client()
    client.force_login(viewer)

    def listed() -> set[str]:
        response = client.get(reverse("admin:index"))
        assert response.status_code == 200
        return {m["object_name"] for app in response.context["app_list"] for m in app["models"]}

    assert listed() == {"Persona"}
    viewer.user_permissions.add(Permission.objects.get(codename="view_topic"))
    assert listed() == {"Persona", "Topic"}  # kept lists are per set of permissions: no stale one
    viewer.user_permissions.remove(*Permission.objects.filter(codename__in=["view_persona", "view_topic"]))
    assert listed() == set()
    boss = django_user_model.objects.create_user("boss", "b@example.com", "pw-boss-1234", is_staff=True)
    boss.is_superuser = True
    boss.save()
    client.force_login(boss)
    assert {"Persona", "Topic", "EvaluationRun", "User"} <= listed()


def test_persona_traits_style_and_behaviours_are_fields_with_the_schemas_help_text(staff_client, catalog):
    schema = json.loads((ROOT / "personas" / "schema.json").read_text())
    persona = Persona.objects.get(persona_id="struggler")
    response = staff_client.get(reverse("admin:evaluation_persona_change", args=[persona.pk]))
    form = response.context["adminform"].form
    assert form["style_max_words"].value() == persona.response_style["max_words"]
    assert (
        form.fields["style_max_words"].help_text
        == schema["properties"]["response_style"]["properties"]["max_words"]["description"]
    )
    behaviours = schema["properties"]["persona_specific_behaviors"]["properties"]
    assert form.fields["behaviour_pushback_probability"].help_text.startswith(
        behaviours["pushback_probability"]["description"]
    )
    for key, chance in persona.persona_specific_behaviors.items():
        assert form[f"behaviour_{key}"].value() == chance
    traits = form["personality_traits"].as_widget()
    assert "<textarea" in traits and persona.personality_traits[0] in traits
    html = response.content.decode()
    assert "Response style" in html and "Behaviours" in html and "One per line." in html


def test_persona_form_saves_structured_fields_and_keeps_unknown_keys_as_json(staff_client, catalog):
    persona = Persona.objects.get(persona_id="struggler")
    url = reverse("admin:evaluation_persona_change", args=[persona.pk])
    post = persona_post(
        personality_traits=["anxious", "tries hard"],
        response_style={"max_words": 12, "language": "short sentences", "examples": ["idk", "is it 5?"], "tone": "shy"},
        persona_specific_behaviors={"pushback_probability": 0.2, "doodling_probability": 0.15},
    )
    response = staff_client.post(url, post)
    assert response.status_code == 302, response.context["adminform"].form.errors
    persona.refresh_from_db()
    assert persona.personality_traits == ["anxious", "tries hard"]
    assert persona.response_style == {
        "max_words": 12,
        "language": "short sentences",
        "examples": ["idk", "is it 5?"],
        "tone": "shy",
    }
    assert persona.persona_specific_behaviors == {"pushback_probability": 0.2, "doodling_probability": 0.15}


def test_persona_form_edits_a_behaviours_trigger_and_keeps_the_plain_form_for_always(staff_client, catalog):
    persona = Persona.objects.get(persona_id="struggler")
    url = reverse("admin:evaluation_persona_change", args=[persona.pk])
    behaviours = {
        "pushback_probability": {"probability": 0.4, "trigger": "after_incorrect"},
        "boredom_probability": 0.1,
    }
    response = staff_client.post(url, persona_post(persona_specific_behaviors=behaviours))
    assert response.status_code == 302, response.context["adminform"].form.errors
    persona.refresh_from_db()
    assert persona.persona_specific_behaviors == behaviours
    form = staff_client.get(url).context["adminform"].form
    assert form["behaviour_pushback_probability"].value() == 0.4
    assert form["trigger_pushback_probability"].value() == "after_incorrect"
    assert form["trigger_boredom_probability"].value() == "always"


def test_persona_form_names_the_behaviour_field_out_of_range(staff_client, catalog):
    persona = Persona.objects.get(persona_id="struggler")
    url = reverse("admin:evaluation_persona_change", args=[persona.pk])
    post = persona_post(persona_specific_behaviors={"pushback_probability": 1.4, "doodling_probability": 2})
    response = staff_client.post(url, post)
    errors = response.context["adminform"].form.errors
    assert "behaviour_pushback_probability" in errors
    assert "doodling_probability" in str(errors["other_behaviors"])
    persona.refresh_from_db()
    assert persona.persona_specific_behaviors.get("pushback_probability") != 1.4


def test_persona_form_refuses_a_text_or_list_over_the_catalogue_limits_naming_them(staff_client, catalog, settings):
    """The admin holds a persona to the same size limits as a catalogue file (docs/limits.md)."""
    settings.EVALUATION = {**settings.EVALUATION, "CATALOG_MAX_TEXT_CHARS": 500, "CATALOG_MAX_LIST_ITEMS": 20}
    persona = Persona.objects.get(persona_id="struggler")
    url = reverse("admin:evaluation_persona_change", args=[persona.pk])
    post = persona_post(description="x" * 501, personality_traits=[f"trait {i}" for i in range(21)])
    response = staff_client.post(url, post)
    assert response.status_code == 200, "saved over the limits"
    errors = response.context["adminform"].form.errors
    assert "is 501 characters: the limit is 500" in str(errors["description"])
    assert "has 21 items: the limit is 20" in str(errors["personality_traits"])
    persona.refresh_from_db()
    assert len(persona.description) < 501 and len(persona.personality_traits) < 21


def test_a_persona_saved_in_the_admin_is_kept_by_the_next_catalogue_load(staff_client, catalog):
    from io import StringIO

    from django.core.management import call_command

    persona = Persona.objects.get(persona_id="struggler")
    url = reverse("admin:evaluation_persona_change", args=[persona.pk])
    response = staff_client.post(url, persona_post(description="Rewritten by staff in the admin."))
    assert response.status_code == 302, response.context["adminform"].form.errors
    err = StringIO()
    call_command("load_catalog", stdout=StringIO(), stderr=err)
    assert "personas/struggler.json: persona struggler edited in the admin" in err.getvalue()
    assert Persona.objects.get(persona_id="struggler").description == "Rewritten by staff in the admin."


@pytest.mark.parametrize(
    ("action", "status", "permission"),
    [("cancel_runs", "running", "cancel_run"), ("retry_runs", "failed", "retry_run")],
)
def test_run_actions_need_the_same_permission_as_the_api(django_user_model, action, status, permission):
    from django.contrib.auth.models import Permission

    from evaluation.models import EvaluationRun

    stage = "running_session" if status == "running" else status
    run = EvaluationRun.objects.create(run_id=f"run_{action}", status=status, stage=stage)
    viewer = django_user_model.objects.create_user("viewer", "v@example.com", "pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_evaluationrun"))
    client = Client()
    client.force_login(viewer)
    url = reverse("admin:evaluation_evaluationrun_changelist")

    def offered() -> set[str]:
        response = client.get(url)
        assert response.status_code == 200
        form = response.context["action_form"]  # None when no action is offered at all
        return {name for name, _ in form.fields["action"].choices if name} if form is not None else set()

    assert action not in offered()
    client.post(url, {"action": action, "_selected_action": [str(run.pk)]})
    run.refresh_from_db()
    assert run.status == status, "a user who may only view runs changed one through the admin"

    viewer.user_permissions.add(Permission.objects.get(codename=permission))
    viewer = django_user_model.objects.get(pk=viewer.pk)  # permissions are cached per user object
    client.force_login(viewer)
    assert action in offered()
    client.post(url, {"action": action, "_selected_action": [str(run.pk)]})
    run.refresh_from_db()
    assert run.status == ("cancelled" if action == "cancel_runs" else "queued")
