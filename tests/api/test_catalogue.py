"""The read-only catalogue: the ids a start request names, and nothing secret about agents."""

import json

import pytest

from evaluation.models import Agent

pytestmark = pytest.mark.django_db


def results(response):
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_topics(api, catalog):
    topics = results(api.get("/api/catalogue/topics"))
    assert len(topics) == 4 and [t["grade"] for t in topics] == sorted(t["grade"] for t in topics)
    grade5 = results(api.get("/api/catalogue/topics?grade=5"))
    assert {t["topic_id"] for t in grade5} >= {"comparing-decimals"} and {t["grade"] for t in grade5} == {5}
    one = api.get("/api/catalogue/topics/comparing-decimals").json()
    assert one["name"] == "Comparing decimals" and "Order a list of decimals" in one["learning_objectives"]
    assert api.get("/api/catalogue/topics/nope").status_code == 404
    assert api.get("/api/catalogue/topics?grade=13").json()["fields"]["grade"]
    assert api.get("/api/catalogue/topics?approved=maybe").json()["fields"]["approved"]


def test_personas(api, catalog):
    personas = results(api.get("/api/catalogue/personas"))
    assert [p["persona_id"] for p in personas][:2] == ["ace", "average_student"] and len(personas) == 8
    ace = api.get("/api/catalogue/personas/ace.json").json()
    assert ace["name"] == "Arjun" and ace["response_style"]["max_words"] == 25
    assert api.get("/api/catalogue/personas/nobody").status_code == 404
    assert results(api.get("/api/catalogue/personas?limit=3&offset=6")) == personas[6:8]


def test_agents_by_kind_without_secrets(api, catalog, monkeypatch):
    monkeypatch.setenv("TUTOR_TOKEN", "Bearer sk-very-secret")
    Agent.objects.create(
        id="external",
        display_name="External tutor",
        kind="protocol",
        base_url="https://user:hunter2@tutor.example:8443/v1?api_key=sk-in-query#frag",
        auth_header="TUTOR_TOKEN",
        system_prompt="internal prompt",
        extra={"api_key": "sk-in-extra"},
    )
    everyone = api.get("/api/catalogue/agents")
    text = everyone.content.decode()
    for secret in ("sk-very-secret", "TUTOR_TOKEN", "hunter2", "user:", "sk-in-query", "sk-in-extra"):
        assert secret not in text, secret
    external = api.get("/api/catalogue/agents/external").json()
    assert external == {
        "id": "external",
        "display_name": "External tutor",
        "kind": "protocol",
        "base_url": "https://tutor.example:8443/v1",
        "model": "",
        "active": True,
        "sends_authorization": True,
    }
    characters = results(api.get("/api/catalogue/agents?kind=character"))
    assert {a["kind"] for a in characters} == {"character"} and "rex" in {a["id"] for a in characters}
    # the built-in tutors (the reference one and the one with faults for gate checks) are tutors over the
    # session protocol too, though no row stores them
    assert [a["id"] for a in results(api.get("/api/catalogue/agents?kind=protocol"))] == [
        "degraded-tutor",
        "external",
        "reference",
    ]
    assert api.get("/api/catalogue/agents?kind=robot").json()["fields"]["kind"]
    assert api.get("/api/catalogue/agents/nobody").status_code == 404
    assert json.loads(text)["count"] == Agent.objects.count() + 2


def test_the_reference_tutor_is_listed_shown_and_startable_by_its_id(api, catalog):
    listed = results(api.get("/api/catalogue/agents?kind=reference"))
    assert [(a["id"], a["kind"], a["active"]) for a in listed] == [
        ("degraded-tutor", "reference", True),
        ("reference", "reference", True),
    ]
    assert "reference" in {a["id"] for a in results(api.get("/api/catalogue/agents"))}
    assert "reference" not in {a["id"] for a in results(api.get("/api/catalogue/agents?active=false"))}
    assert "reference" not in {a["id"] for a in results(api.get("/api/catalogue/agents?kind=character"))}
    one = api.get("/api/catalogue/agents/reference").json()
    assert one["display_name"] == "Reference tutor (built in)" and one["sends_authorization"] is False
    started = api.post(
        "/api/evaluation/start",
        {"topic_id": "comparing-decimals", "persona_file": "ace", "target": "reference", "provider": "offline"},
        format="json",
    )
    assert started.status_code == 202, started.content
    run = api.get(f"/api/evaluation/runs/{started.json()['run_id']}").json()
    assert run["agent_id"] is None and run["config"]["target"] == "reference"


def test_a_stored_agent_named_reference_takes_the_built_in_ones_place(api, catalog):
    Agent.objects.create(id="reference", display_name="Our own", kind="protocol", base_url="http://127.0.0.1:9")
    listed = results(api.get("/api/catalogue/agents?kind=protocol"))
    assert [(a["id"], a["display_name"]) for a in listed] == [
        ("degraded-tutor", "Degraded tutor (built in: the reference tutor with faults)"),
        ("reference", "Our own"),
    ]
    assert api.get("/api/catalogue/agents/reference").json()["display_name"] == "Our own"
