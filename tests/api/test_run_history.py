"""The API's run detail says who started a run and every change of its state (who cancelled or retried it,
when, with the note), with URL credentials masked; a viewer reads it as the run page does."""

import json

import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from evaluation.models import EvaluationRun, RunEvent

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("ops", password="x" * 16, is_staff=True)
    user.groups.add(Group.objects.get(name="operator"))
    return user


@pytest.fixture
def viewer(django_user_model):
    user = django_user_model.objects.create_user("reader", password="x" * 16, is_staff=True)
    user.groups.add(Group.objects.get(name="viewer"))
    return user


def test_the_detail_shows_the_owner_and_who_cancelled_and_retried(catalog, operator, viewer):
    ops = client_for(operator)
    started = ops.post(
        "/api/evaluation/start", {"topic_id": "comparing-decimals", "persona_file": "ace"}, format="json"
    )
    assert started.status_code == 202, started.content
    run_id = started.json()["run_id"]
    run = EvaluationRun.objects.get(run_id=run_id)
    EvaluationRun.objects.filter(pk=run.pk).update(status="failed", stage="failed", error="boom")
    RunEvent.objects.create(run=run, attempt=1, status="failed", actor="worker:host:1", note="boom")
    assert ops.post(f"/api/evaluation/runs/{run_id}/retry").status_code in (200, 202)
    assert ops.post(f"/api/evaluation/runs/{run_id}/cancel").status_code in (200, 202)

    detail = client_for(viewer).get(f"/api/evaluation/runs/{run_id}")
    assert detail.status_code == 200, detail.content
    body = detail.json()
    assert body["started_by"] == "ops"
    events = [(e["status"], e["actor"], e["attempt"]) for e in body["events"]]
    assert events == [
        ("queued", "user:ops", 1),
        ("failed", "worker:host:1", 1),
        ("queued", "user:ops", 2),
        ("cancelled", "user:ops", 2),
    ]
    assert all(e["at"] for e in body["events"])
    assert body["events"] == sorted(body["events"], key=lambda e: e["at"])


def test_a_run_from_the_command_line_has_no_owner_and_notes_are_masked(viewer):
    run = EvaluationRun.objects.create(run_id="run_cli", status="failed", stage="failed")
    RunEvent.objects.create(run=run, attempt=1, status="queued", actor="cli")
    RunEvent.objects.create(
        run=run,
        attempt=1,
        status="failed",
        actor="worker:host:1",
        note="ConnectError: http://user:pw@127.0.0.1:18999/v1/chat/completions refused",
    )
    body = client_for(viewer).get("/api/evaluation/runs/run_cli").json()
    assert body["started_by"] is None
    assert [e["actor"] for e in body["events"]] == ["cli", "worker:host:1"]
    assert "user:pw" not in json.dumps(body)
    assert body["events"][1]["note"] == "ConnectError: http://***@127.0.0.1:18999/v1/chat/completions refused"
