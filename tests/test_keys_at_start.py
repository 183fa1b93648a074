"""A run whose provider needs a key that is not set is refused at start, by every door, naming the
variable: the rooms' start services check it, so the API (400), the dashboard and the CLI agree."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from evaluation.drift import services as drift
from evaluation.errors import InvalidInput
from evaluation.models import EvaluationRun, Suite, Topic, TutoringSession
from evaluation.suites import services as suites
from evaluation.tutoring import services as tutoring

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.fixture
def suite(db):
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    return Suite.objects.get(name="greeter")


@pytest.fixture
def session(catalog):
    return TutoringSession.objects.create(
        topic=Topic.objects.filter(approved=True).first(),
        full_conversation_log=[{"role": "student", "content": "hi"}, {"role": "tutor", "content": "hello"}],
    )


def refused(call, field, variable):
    with pytest.raises(InvalidInput) as caught:
        call()
    assert {p.field for p in caught.value.problems} == {field}
    assert all(variable in p.reason for p in caught.value.problems), caught.value.problems
    assert EvaluationRun.objects.count() == 0


def test_every_start_service_refuses_a_missing_key_naming_the_variable(catalog, suite, session):
    refused(
        lambda: tutoring.run_start(topic_id="comparing-decimals", persona="ace", provider="openai"),
        "provider",
        "OPENAI_API_KEY",
    )
    refused(
        lambda: tutoring.session_evaluation_start(session_id=str(session.pk), provider="anthropic"),
        "provider",
        "ANTHROPIC_API_KEY",
    )
    refused(lambda: drift.drift_run_start(agent_id="rex", judge="openai/gpt-5-mini"), "judge", "OPENAI_API_KEY")
    refused(
        lambda: suites.suite_run_start(suite_id=suite.pk, model="anthropic:claude-sonnet-4-6"),
        "model",
        "ANTHROPIC_API_KEY",
    )
    refused(
        lambda: suites.suite_run_start(suite_id=suite.pk, model="offline", judge_model="openai"),
        "judge_model",
        "OPENAI_API_KEY",
    )
    # no judge, no judge key needed
    run = suites.suite_run_start(suite_id=suite.pk, model="offline", judge_model="openai", judge=False, enqueue=False)
    assert run.status == "queued"


def test_an_unknown_provider_is_refused_at_start_naming_the_field(catalog):
    with pytest.raises(InvalidInput, match="judge"):
        drift.drift_run_start(agent_id="rex", judge="nosuchvendor")
    assert EvaluationRun.objects.count() == 0


@pytest.fixture
def api(staff_user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    return client


def test_the_api_answers_400_naming_the_variable_for_every_kind_of_start(api, catalog, suite, session):
    cases = [
        (
            "/api/evaluation/evaluate-session",
            {"session_id": str(session.pk), "provider": "anthropic"},
            "provider",
            "ANTHROPIC_API_KEY",
        ),
        ("/api/drift/agents/rex/evaluate", {"judge": "openai/gpt-5-mini"}, "judge", "OPENAI_API_KEY"),
        (f"/api/suites/{suite.pk}/run", {"model": "anthropic:claude-sonnet-4-6"}, "model", "ANTHROPIC_API_KEY"),
    ]
    for url, body, field, variable in cases:
        response = api.post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        assert all(variable in reason for reason in response.json()["fields"][field]), response.json()
    assert EvaluationRun.objects.count() == 0


def test_the_dashboard_start_form_refuses_a_missing_key_naming_the_variable(staff_client, catalog):
    response = staff_client.post(
        "/admin/evaluation/start",
        {"mode": "simulate", "topic_id": "comparing-decimals", "personas": ["ace"], "provider": "openai"},
        follow=True,
    )
    text = " ".join(str(m) for m in response.context["messages"])
    assert "Not started" in text and "OPENAI_API_KEY is not set" in text
    assert EvaluationRun.objects.count() == 0


def test_the_reference_tutors_key_is_checked_at_start_too(catalog, monkeypatch):
    """TUTOR_LLM_PROVIDER=anthropic without its key: refused before any run is made (the run failed at turn 0)."""
    monkeypatch.setenv("TUTOR_LLM_PROVIDER", "anthropic")
    refused(lambda: tutoring.run_start(topic_id="comparing-decimals", persona="ace"), "target", "ANTHROPIC_API_KEY")
    monkeypatch.delenv("EVAL_SERVER_URL", raising=False)  # the command's own server would run this tutor
    with pytest.raises(CommandError, match="role 'tutor' uses anthropic.*ANTHROPIC_API_KEY is not set"):
        call_command("run_evaluation", "--persona", "ace", "--max-turns", "2", stdout=StringIO())
    assert EvaluationRun.objects.count() == 0


def test_the_provider_line_never_says_no_llm_is_called_when_a_role_calls_one(catalog, monkeypatch):
    from evaluation.management.commands.run_evaluation import Command

    monkeypatch.setenv("TUTOR_LLM_PROVIDER", "anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-set")
    line = Command().providers_line(None, None, own_tutor=True)
    assert "anthropic for tutor (environment)" in line and "no LLM is called" not in line, line
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set-and-unused")
    assert "no LLM is called" not in Command().providers_line(None, None, own_tutor=True)
    monkeypatch.delenv("TUTOR_LLM_PROVIDER")
    line = Command().providers_line(None, None, own_tutor=True)
    assert "is set, but no LLM is called" in line, line  # everything offline: that is true
