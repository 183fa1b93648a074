"""The dashboard's kind filters, its run controls and its charts in a real browser (Playwright driving
Debian's Chromium against uvicorn on the test database, a real qcluster worker for the running run).
Screenshots go to test-artifacts/."""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from evaluation.models import Agent, EvaluationRun, Problem
from evaluation.runs import selectors as run_selectors
from evaluation.tutoring.server import managed_server
from tests.servers import SERVER_ENV, database_url_for_tests, qcluster_worker
from tests.web.test_browser_dashboard import make_run

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)"),
]


def server_env(tmp_path, **extra):
    return {**SERVER_ENV, "DATABASE_URL": database_url_for_tests(), "EVAL_RUNS_DIR": str(tmp_path / "runs"), **extra}


@pytest.fixture
def staff(transactional_db, catalog, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop here
    django_user_model.objects.create_user("staff", "s@example.com", "staff-pass-123", is_staff=True, is_superuser=True)


@pytest.fixture
def web(staff, tmp_path):
    with managed_server(server_env(tmp_path), log_path=tmp_path / "web.log") as url:
        yield url


@pytest.fixture
def browser(module_chromium):
    """The module's Chromium; the contexts the test opened are closed after it."""
    ARTIFACTS.mkdir(exist_ok=True)
    yield module_chromium
    for context in module_chromium.contexts:
        context.close()


def open_page(browser, url):
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{url}/admin/login/?next=/admin/evaluation/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", "staff-pass-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{url}/admin/evaluation/")
    return page


def test_the_suite_and_drift_filters_list_those_runs_as_the_api_does(web, browser):
    tutor = make_run()
    agent = Agent.objects.filter(kind=Agent.Kind.CHARACTER).first()
    suites = [
        EvaluationRun.objects.create(run_id=f"suite_filter_{i}", kind="suite", source="suite", status="completed")
        for i in range(2)
    ]
    drifts = [
        EvaluationRun.objects.create(
            run_id=f"drift_filter_{i}", kind="drift", source="drift", agent=agent, status="completed", overall_score=6
        )
        for i in range(3)
    ]
    page = open_page(browser, web)
    # with no filter the list shows every kind, as the API's run list does
    assert page.locator(".card").count() == 1 + len(suites) + len(drifts) == run_selectors.run_list().count()
    assert page.locator("#problems-by-tutor").count() == 1  # the tutor run's problem is charted

    page.select_option("select[name=source]", label="EVAL.md suite")
    page.click(".filters button")
    page.wait_for_url("**source=suite**")
    shown = sorted(page.locator(".card").evaluate_all("cards => cards.map(c => c.dataset.run)"))
    assert shown == sorted(r.run_id for r in suites) == sorted(r.run_id for r in run_selectors.run_list(source="suite"))
    assert page.inner_text("p.count").startswith("2 runs")
    # the root-cause chart follows the filter: suite runs have no tutor problems
    assert page.locator("#problems-by-tutor").count() == 0
    assert "No problems found" in page.inner_text("#problem-trends")
    page.click(f'.card[data-run="{suites[0].run_id}"] .card-link')
    page.wait_for_url(f"**/suites/runs/{suites[0].run_id}/")

    page.goto(f"{web}/admin/evaluation/")
    page.select_option("select[name=source]", label="Agent messages (drift)")
    page.click(".filters button")
    page.wait_for_url("**source=drift**")
    shown = sorted(page.locator(".card").evaluate_all("cards => cards.map(c => c.dataset.run)"))
    assert shown == sorted(r.run_id for r in drifts) == sorted(r.run_id for r in run_selectors.run_list(source="drift"))
    assert tutor.run_id not in shown
    page.screenshot(path=str(ARTIFACTS / "dashboard-drift-filter.png"), full_page=True)


@pytest.fixture
def worker_app(staff, loopback, tmp_path):
    """uvicorn and a real qcluster worker; the run's LLM is the loopback server, slowed to keep it running."""
    env = server_env(tmp_path, EVAL_Q_SYNC="0")
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        with qcluster_worker({**env, "EVAL_SERVER_URL": url}, tmp_path / "worker.log"):
            yield url


def test_cancel_ends_a_running_run_and_the_button_goes(worker_app, loopback, browser):
    loopback.latency = 1.5  # every LLM call takes 1.5 s: the run is still running when Cancel is pressed
    page = open_page(browser, worker_app)
    page.check("input[name=personas][value=ace]")
    page.fill("#tab-simulate input[name=provider]", f"openai/slow-model@{loopback.openai_url}")
    page.click("#tab-simulate button[type=submit]:not([name=price])")  # Start, not Price it
    page.wait_for_selector(".messagelist .success")
    run = EvaluationRun.objects.get()
    card = page.locator(f'.card[data-run="{run.run_id}"]')
    # queued or running: Cancel is offered
    assert card.locator("form.run-cancel button").is_visible()
    deadline = timezone.now() + timedelta(seconds=60)
    while EvaluationRun.objects.get(pk=run.pk).status != "running":
        assert timezone.now() < deadline, "the worker never started the run"
        page.wait_for_timeout(250)
    page.reload()
    assert page.inner_text(f'.card[data-run="{run.run_id}"] [data-status]') != "Cancelled"
    page.screenshot(path=str(ARTIFACTS / "dashboard-running-run.png"), full_page=True)
    page.click(f'.card[data-run="{run.run_id}"] form.run-cancel button')
    page.wait_for_selector(".messagelist .success")
    assert f"Cancelled {run.run_id}." in page.inner_text(".messagelist")
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert page.inner_text(f'.card[data-run="{run.run_id}"] [data-status]') == "Cancelled"
    assert page.locator(f'.card[data-run="{run.run_id}"] form.run-cancel').count() == 0
    # the run page of an ended run offers Retry and Evaluate again, not Cancel
    page.goto(f"{worker_app}/admin/evaluation/runs/{run.run_id}/")
    assert not page.locator("form.run-cancel").is_visible()
    assert page.locator("form.run-retry").is_visible() and page.locator("form.run-again").is_visible()


def test_the_run_page_offers_cancel_only_while_the_run_is_active(web, browser):
    running = make_run(persona="quiet_one", status="running", detail="Turn 2/20", heartbeat_at=timezone.now())
    page = open_page(browser, web)
    page.goto(f"{web}/admin/evaluation/runs/{running.run_id}/")
    assert page.locator("form.run-cancel").is_visible()
    assert not page.locator("form.run-retry").is_visible() and not page.locator("form.run-again").is_visible()
    # the run ends while the page is open: the live script swaps the controls (and then reloads)
    EvaluationRun.objects.filter(pk=running.pk).update(status="completed", stage="completed", detail="Complete")
    page.wait_for_function("() => document.querySelector('[data-status]').textContent === 'Completed'")
    page.wait_for_selector("form.run-retry", state="visible")
    assert not page.locator("form.run-cancel").is_visible()

    other = make_run(persona="ace", status="running", detail="Turn 1/20", heartbeat_at=timezone.now())
    page.goto(f"{web}/admin/evaluation/runs/{other.run_id}/")
    page.click("form.run-cancel button")
    page.wait_for_selector(".messagelist .success")
    assert page.inner_text("[data-status]") == "Cancelled"
    assert not page.locator("form.run-cancel").is_visible() and page.locator("form.run-retry").is_visible()
    assert EvaluationRun.objects.get(pk=other.pk).status == "cancelled"


def test_one_period_draws_bars_not_dots(web, browser):
    run = make_run()  # one completed run, one problem: one week and one point in time
    assert Problem.objects.filter(run=run).count() == 1
    page = open_page(browser, web)
    trend = page.locator("#problem-trends svg")
    assert trend.locator("rect title").count() == 1  # a bar, with its value in the tooltip
    assert trend.locator("circle").count() == 0
    box = trend.locator("rect:has(title)").bounding_box()
    assert box is not None and box["height"] > 20 and box["width"] > 5

    page.goto(f"{web}/admin/evaluation/charts/")
    over_time = page.locator("#chart-over-time svg")
    assert over_time.locator("rect title").count() == 5  # one bar per dimension
    assert over_time.locator("circle").count() == 0
    page.screenshot(path=str(ARTIFACTS / "charts-one-period.png"), full_page=True)
