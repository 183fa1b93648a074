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
    assert [a["id"] for a in results(api.get("/api/catalogue/agents?kind=protocol"))] == ["external"]
    assert api.get("/api/catalogue/agents?kind=robot").json()["fields"]["kind"]
    assert api.get("/api/catalogue/agents/nobody").status_code == 404
    assert json.loads(text)["count"] == Agent.objects.count()
