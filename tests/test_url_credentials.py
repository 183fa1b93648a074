"""A provider URL with credentials (user:pw@host) never shows them: a start whose endpoint does not answer
fails, and the error is masked in the API (status, detail, list, export), error.txt, run.log and every
report file, the dashboard, the run page, the admin, and the log lines the console handler writes."""

import io
import json
import logging
from pathlib import Path

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from evaluation.models import EvaluationRun
from evaluation.tutoring.pipeline import run_folder
from evaluation.tutoring.server import free_port

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "user:pw"


@pytest.fixture
def console():
    """The console handler the settings configure (with its redacting filter), writing into a buffer."""
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "name", "") == "console")
    buffer = io.StringIO()
    old = handler.setStream(buffer)
    try:
        yield buffer
    finally:
        handler.setStream(old)


def test_a_provider_url_with_credentials_never_shows_them(
    server, staff_user, staff_client, q_sync, monkeypatch, console, django_capture_on_commit_callbacks
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-nothing-listens")
    provider = f"openai/gpt-x@http://{SECRET}@127.0.0.1:{free_port()}/v1"
    token = Token.objects.create(user=staff_user).key
    api = {"HTTP_AUTHORIZATION": f"Token {token}"}
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            "/api/evaluation/start",
            json.dumps({"topic_id": "comparing-decimals", "persona_file": "ace", "max_turns": 2, "provider": provider}),
            content_type="application/json",
            **api,
        )
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
    assert run.status == "failed", (run.status, run.error)
    assert "connection failed" in run.error, run.error
    run_id = run.run_id

    seen = {
        "run.error": run.error,
        "run.error_traceback": run.error_traceback,
    }
    for path in ("/api/evaluation/runs/{id}", "/api/evaluation/runs/{id}/status", "/api/evaluation/runs"):
        seen[path] = staff_client.get(path.format(id=run_id), **api).content.decode()
    seen["export"] = b"".join(
        staff_client.get("/api/evaluation/runs/export?format=csv", **api).streaming_content
    ).decode()
    for name, kwargs in (
        ("evaluation-dashboard", {}),
        ("evaluation-runs-status", {}),
        ("evaluation-run-report", {"run_id": run_id}),
    ):
        page = staff_client.get(reverse(name, kwargs=kwargs))
        assert page.status_code == 200, (name, page.status_code)
        seen[name] = page.content.decode()
    for url in (
        reverse("admin:evaluation_evaluationrun_changelist"),
        reverse("admin:evaluation_evaluationrun_change", args=[run.pk]),
    ):
        page = staff_client.get(url)
        assert page.status_code == 200, url
        seen[url] = page.content.decode()
    folder = Path(run.artifacts_dir) if run.artifacts_dir else run_folder(run)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    assert any(p.name == "error.txt" for p in files), files
    for path in files:
        seen[str(path.name)] = path.read_text(errors="replace")
        page = staff_client.get(reverse("evaluation-run-file", kwargs={"run_id": run_id, "name": path.name}))
        if page.status_code == 200:
            seen[f"page {path.name}"] = b"".join(getattr(page, "streaming_content", [page.content])).decode(
                errors="replace"
            )
    seen["console log"] = console.getvalue()

    leaks = [where for where, text in seen.items() if SECRET in text]
    assert not leaks, f"'{SECRET}' shows in: {leaks}: " + " | ".join(
        seen[w][max(0, seen[w].find(SECRET) - 300) : seen[w].find(SECRET) + 50] for w in leaks
    )


def test_a_failed_runs_error_and_traceback_mask_url_credentials(catalog):
    """Whatever a run fails with (here an error quoting its endpoint), the stored error and traceback show
    the URL without its user:password."""
    from evaluation.runs import services as runs
    from evaluation.tutoring import services as tutoring

    (run,) = tutoring.run_start(topic_id="two-digit-addition-regrouping", persona="ace", enqueue=False)

    def work(handle):
        raise ConnectionError(f"cannot reach http://{SECRET}@127.0.0.1:9/v1")

    runs.run_execute(run.pk, run.attempt, work)
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == "ConnectionError: cannot reach http://***@127.0.0.1:9/v1"
    assert SECRET not in run.error_traceback and "http://***@127.0.0.1:9/v1" in run.error_traceback


def test_log_lines_and_their_tracebacks_mask_url_credentials(console):
    log = logging.getLogger("evaluation.tests")
    log.warning("calling %s", f"https://{SECRET}@llm.example/v1")
    try:
        raise ConnectionError(f"no answer from https://{SECRET}@llm.example/v1")
    except ConnectionError:
        log.exception("the call failed")
    written = console.getvalue()
    assert SECRET not in written
    assert "calling https://***@llm.example/v1" in written
    assert "ConnectionError: no answer from https://***@llm.example/v1" in written
