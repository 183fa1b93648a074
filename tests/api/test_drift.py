"""Persona drift through the API: ingest, evaluate, and the runtime checks."""

import json

import pytest

from evaluation.models import AgentMessage, EvaluationRun

pytestmark = pytest.mark.django_db


def post(api, url, body):
    return api.post(url, body, format="json")


def test_ingest_stores_json_lines_all_or_nothing(api, catalog):
    before = AgentMessage.objects.count()
    lines = "\n".join(json.dumps({"agent": "rex", "channel": "#general", "text": f"line {i}"}) for i in range(2))
    response = api.post("/api/drift/messages", lines, content_type="application/x-ndjson")
    assert response.status_code == 201 and response.json() == {"created": 2}
    bad = [{"agent": "rex", "channel": "general", "text": "fine"}, {"agent": "nobody", "channel": "c", "text": "t"}]
    response = post(api, "/api/drift/messages", bad)
    assert response.status_code == 400 and response.json()["fields"] == {"[1].agent": ["no agent 'nobody'"]}
    assert AgentMessage.objects.count() == before + 2


def test_ingest_refuses_a_body_over_the_upload_limit(api, catalog, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    body = json.dumps({"agent": "rex", "channel": "general", "text": "x" * 200})
    response = api.post("/api/drift/messages", body, content_type="application/json")
    assert response.status_code == 413 and "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["error"]


def test_evaluate_queues_a_drift_run(api, catalog, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        response = post(api, "/api/drift/agents/rex/evaluate", {"dimensions": ["fluency"], "judge": "offline"})
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert run.kind == "drift" and run.agent_id == "rex" and response.json()["kind"] == "drift" and len(queued) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"dimensions": ["charm"]}, "dimensions"),
        ({"dimensions": "fluency"}, "dimensions"),
        ({"sample_size": 0}, "sample_size"),
        ({"judge": "gemini"}, "judge"),
    ],
)
def test_evaluate_refuses_bad_input(api, catalog, body, field):
    response = post(api, "/api/drift/agents/rex/evaluate", body)
    assert response.status_code == 400 and field in response.json()["fields"], response.content
    assert not EvaluationRun.objects.exists()


def test_evaluate_with_a_judge_whose_key_is_missing_names_the_variable(api, catalog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    response = post(api, "/api/drift/agents/rex/evaluate", {"judge": "openai/gpt-5-mini"})
    assert response.status_code == 400
    assert response.json()["fields"]["judge"] == [
        "role 'proposition_judge' uses openai/gpt-5-mini (override) but OPENAI_API_KEY is not set"
    ]


def test_unknown_agent_is_404_everywhere(api, catalog):
    for path, body in (
        ("evaluate", {}),
        ("gate", {"text": "x", "channel": "general"}),
        ("pre-invocation", {"channel": "general"}),
    ):
        response = post(api, f"/api/drift/agents/nobody/{path}", body)
        assert response.status_code == 404 and response.json() == {"error": "agent: no agent 'nobody'"}, path


def test_gate_commits_when_the_gate_is_off(api, catalog):
    response = post(api, "/api/drift/agents/rex/gate", {"text": "Fine.", "channel": "general"})
    assert response.status_code == 200
    assert response.json() == {
        "commit": True,
        "score": None,
        "threshold": 5.0,
        "attempt": 1,
        "max_attempts": 2,
        "reasoning": "the action gate is off for this agent",
        "feedback": "",
        "outcome": None,
    }
    bad = post(api, "/api/drift/agents/rex/gate", {"text": "x", "channel": "general", "attempt": 99})
    assert bad.status_code == 400 and "attempt" in bad.json()["fields"]


def test_pre_invocation_answers_a_nudge_and_phrases(api, catalog):
    response = post(api, "/api/drift/agents/rex/pre-invocation", {"channel": "#general"})
    assert response.status_code == 200 and set(response.json()) == {"nudge", "avoid_phrases", "recent_messages"}
    assert post(api, "/api/drift/agents/rex/pre-invocation", {}).json()["fields"] == {
        "channel": ["This field is required."]
    }
