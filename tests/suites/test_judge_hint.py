"""The offline judge's hint says how to get an LLM judge where the reader is: a flag on the command
line, a field or the Suite Judge role's LLM config on the web and the API."""

import contextlib
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvaluationRun, Suite

from .test_runner_and_cache import responder

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.fixture
def q_sync(monkeypatch):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


def test_the_web_and_the_api_name_the_role_config_not_a_cli_flag(
    staff_client, q_sync, loopback, django_capture_on_commit_callbacks
):
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    suite = Suite.objects.get(name="greeter")
    loopback.responder = responder()
    body = {"model": f"openai/m@{loopback.openai_url}"}
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(f"/api/suites/{suite.pk}/run", json.dumps(body), content_type="application/json")
    run = EvaluationRun.objects.get(kind="suite")
    page = staff_client.get(f"/admin/evaluation/suites/runs/{run.run_id}/").content.decode()
    api = staff_client.get(f"/api/suites/runs/{run.run_id}").json()["judged_by"]
    for text in (page, api):
        assert "offline rule-based judge (no judge model set" in text
        assert "--judge-model" not in text
        assert "Suite Judge role" in text


def test_the_cli_keeps_its_flag(loopback):
    loopback.responder = responder()
    out = StringIO()
    with contextlib.suppress(CommandError):
        call_command(
            "run_suite", str(ROOT / "skills" / "greeter"), "--model", f"openai/m@{loopback.openai_url}", stdout=out
        )
    assert "offline rule-based judge (no judge model set: pass --judge-model" in out.getvalue()
