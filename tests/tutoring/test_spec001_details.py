"""Spec 001's details: the tutor's provider variables, a tutor that does not say what it runs, and the
line that names the providers in use."""

from io import StringIO

import pytest
from django.core.management import call_command

from evaluation.models import EvaluationRun
from evaluation.providers import resolve

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("EVAL_TUTOR_PROVIDER", "EVAL_LLM_PROVIDER", "TUTOR_LLM_PROVIDER", "APP_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_tutor_s_provider_comes_from_tutor_llm_provider_then_app_llm_provider(clean_env):
    assert resolve("tutor").provider == "offline" and resolve("tutor").source == "default"
    clean_env.setenv("EVAL_LLM_PROVIDER", "replay")
    assert resolve("tutor").provider == "replay"
    clean_env.setenv("APP_LLM_PROVIDER", "anthropic")
    assert resolve("tutor").provider == "anthropic" and resolve("judge").provider == "replay"
    clean_env.setenv("TUTOR_LLM_PROVIDER", "openai/gpt-5-mini")
    assert resolve("tutor").label == "openai/gpt-5-mini" and resolve("tutor").source == "environment"
    clean_env.setenv("EVAL_TUTOR_PROVIDER", "offline")
    assert resolve("tutor").provider == "offline"
    assert resolve("simulator").provider == "replay"


@pytest.mark.parametrize("label", ["", "openai"])
def test_a_tutor_reached_by_url_that_does_not_report_itself_is_not_recorded_as_the_reference_tutor(
    catalog, fake_tutor, clean_env, label
):
    if label:
        clean_env.setenv("TUTOR_LLM_PROVIDER", label)
    url = fake_tutor("stops")
    call_command(
        "run_evaluation",
        stdout=StringIO(),
        topic_id=TOPIC,
        provider="offline",
        persona="ace",
        max_turns=4,
        seed=1,
        turn_timeout=1.0,
        server_url=url,
    )
    run = EvaluationRun.objects.get()
    assert run.status == "completed", run.error
    tutor = run.config["llm"]["tutor"]
    assert tutor["provider"] == (label or "unknown") and tutor["model"] == "unknown"
    assert tutor["source"].startswith(f"not reported by the tutor at {url}")
    assert ("TUTOR_LLM_PROVIDER" in tutor["source"]) == bool(label)


def test_the_command_names_the_provider_in_use_and_a_key_it_leaves_unused(server, clean_env):
    clean_env.setenv("OPENAI_API_KEY", "sk-not-used")
    out = StringIO()
    call_command("run_evaluation", stdout=out, topic_id=TOPIC, persona="ace", max_turns=2, seed=3, skip_server=True)
    first = out.getvalue().splitlines()[0]
    assert first.startswith("Provider: offline for simulator and judge (default)")
    assert "OPENAI_API_KEY is set, but no LLM is called" in first and "--provider openai" in first
    assert f"the tutor is the server at {server}" in first
