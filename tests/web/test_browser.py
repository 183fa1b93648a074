"""The dashboard in a real browser: Playwright drives Debian's Chromium against the app on loopback,
with a real django-q2 worker running the evaluations. Screenshots go to test-artifacts/."""

import os
from pathlib import Path

import pytest
from django.utils import timezone

from evaluation.models import EvaluationRun, Persona, RunMessage, Topic
from evaluation.tutoring.server import managed_server
from tests.servers import SERVER_ENV, database_url_for_tests, qcluster_worker

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)"),
]


@pytest.fixture
def live_app(transactional_db, catalog, django_user_model, tmp_path, monkeypatch):
    """uvicorn serving the app (dashboard and reference tutor) plus a qcluster worker, on the test database."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop in this thread
    django_user_model.objects.create_user("staff", "s@example.com", "staff-pass-123", is_staff=True, is_superuser=True)
    env = {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
    }
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        with qcluster_worker({**env, "EVAL_SERVER_URL": url}, tmp_path / "worker.log"):
            yield url


@pytest.fixture
def page(module_chromium):
    """A page of its own in the module's Chromium."""
    ARTIFACTS.mkdir(exist_ok=True)
    context = module_chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def login(page, url):
    page.goto(f"{url}/admin/evaluation/")
    assert "/admin/login/" in page.url  # anonymous visitors are sent to the login page
    page.fill("#id_username", "staff")
    page.fill("#id_password", "staff-pass-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{url}/admin/evaluation/")


def test_staff_start_watch_report_and_compare(live_app, page):
    url = live_app
    login(page, url)
    page.check("input[name=personas][value=ace]")
    page.check("input[name=personas][value=quiet_one]")
    page.eval_on_selector("input[name=max_turns]", "el => { el.value = 6; el.dispatchEvent(new Event('input')); }")
    page.fill("#tab-simulate input[name=provider]", "offline")
    page.click("#tab-simulate button[type=submit]:not([name=price])")  # Start, not Price it
    page.wait_for_selector(".messagelist .success")
    assert page.locator(".card").count() == 2
    first_statuses = page.locator("[data-status]").all_inner_texts()
    assert any(status != "Completed" for status in first_statuses), first_statuses  # caught while queued or running
    # The page polls every 2 s and reloads itself when both runs have finished.
    page.wait_for_selector(".card.status-completed >> nth=1", timeout=90_000)
    assert page.locator(".card.status-completed").count() == 2
    page.screenshot(path=str(ARTIFACTS / "run-list.png"), full_page=True)

    page.click(".card >> nth=0")
    page.wait_for_selector(".scorebars")
    assert "offline rule-based judge" in page.inner_text(".scores")
    assert page.locator(".scorebars tr").count() == 5
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    link = page.locator(".turn-links a").first
    turn = link.inner_text()
    link.click()
    assert page.url.endswith(f"#message-{turn}")
    assert page.evaluate("() => document.querySelector(':target').id") == f"message-{turn}"

    page.click("text=comparison")
    page.wait_for_selector("table.heat")
    assert page.locator("table.heat tbody tr").count() == 2 and page.locator("svg.chart").count() == 1
    page.screenshot(path=str(ARTIFACTS / "comparison.png"), full_page=True)


def test_xss_in_a_transcript_renders_inert(live_app, page):
    run = EvaluationRun.objects.create(
        run_id="run_xss",
        persona=Persona.objects.get(persona_id="ace"),
        topic=Topic.objects.first(),
        status="completed",
        stage="completed",
    )
    payload = 'Hi <script>window.__xss = 1</script> <img src=x onerror="window.__xss = 2"> **bold**'
    RunMessage.objects.create(run=run, turn=1, role="student", content=payload, timestamp=timezone.now())
    login(page, live_app)
    page.goto(f"{live_app}/admin/evaluation/runs/run_xss/")
    page.wait_for_selector("#message-1")
    assert page.evaluate("() => window.__xss") is None
    text = page.inner_text("#message-1 .body")
    assert "<script>window.__xss = 1</script>" in text and 'onerror="window.__xss = 2"' in text
    assert page.locator("#message-1 .body strong").inner_text() == "bold"
    assert page.locator("#message-1 .body script, #message-1 .body img").count() == 0
    page.screenshot(path=str(ARTIFACTS / "report-xss.png"), full_page=True)
