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
def test_add_or_change_page_opens_for_staff(staff_client, catalog, model):
    obj = model._default_manager.first()
    if obj is not None:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[obj.pk])
    else:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")
    response = staff_client.get(url)
    assert response.status_code in (200, 403), response.status_code


def persona_post(**changes):
    data = json.loads((ROOT / "personas" / "struggler.json").read_text())
    data.update(changes)
    form = {}
    for key, value in data.items():
        form[key] = json.dumps(value) if isinstance(value, list | dict) else value
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
    assert "response_style.max_words: is required" in errors["response_style"][0]


def test_admin_saves_a_valid_persona(staff_client, catalog):
    url = reverse("admin:evaluation_persona_change", args=[Persona.objects.get(persona_id="struggler").pk])
    response = staff_client.post(url, persona_post(correct_answer_probability=0.35))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Persona.objects.get(persona_id="struggler").correct_answer_probability == 0.35
