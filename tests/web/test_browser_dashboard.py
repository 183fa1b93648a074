"""The run list, a report, the charts, the export and the existing-session picker in a real browser
(Playwright driving Debian's Chromium against uvicorn on the test database), and live updates that fall
back to polling when the WebSocket cannot connect. Screenshots go to test-artifacts/."""

import csv
import io
import json
import os
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from evaluation.models import DimensionScore, EvaluationRun, Persona, Problem, RunMessage, Topic, TutoringSession
from evaluation.tutoring.server import free_port, managed_server
from tests.servers import SERVER_ENV, database_url_for_tests

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")
DIMS = ["responsiveness", "explanation_quality", "emotional_attunement", "pacing", "authenticity"]

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)"),
]


def make_run(persona="ace", status="completed", days_ago=0, scores=(6, 7, 8, 9, 5), **fields):
    run = EvaluationRun.objects.create(
        run_id=f"run_browser_{uuid.uuid4().hex[:8]}",
        persona=Persona.objects.get(persona_id=persona),
        topic=Topic.objects.filter(approved=True).first(),
        status=status,
        stage=status if status != "running" else "running_session",
        overall_score=sum(scores) / len(scores) if status == "completed" else None,
        judge_label="offline/offline-rules-v1",
        token_usage={"calls": 9, "input_tokens": 4000, "output_tokens": 300, "by_provider": {"offline": 9}},
        **fields,
    )
    EvaluationRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    if status == "completed":
        for dim, score in zip(DIMS, scores, strict=True):
            DimensionScore.objects.create(run=run, dimension=dim, score=score, analysis=f"about {dim}")
        Problem.objects.create(
            run=run, rank=1, title="rushes", turns=[1], quote="hello", severity="major", root_cause="wrong_pacing"
        )
    RunMessage.objects.create(run=run, turn=1, role="student", content="hello", timestamp=timezone.now())
    return run


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


def open_page(browser, url, **context):
    page = browser.new_context(viewport={"width": 1280, "height": 900}, **context).new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{url}/admin/login/?next=/admin/evaluation/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", "staff-pass-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{url}/admin/evaluation/")
    return page


CUT_PLACEHOLDERS = """() => [...document.querySelectorAll('input[placeholder]')].filter(i => i.offsetParent).filter(i => {
    const c = document.createElement('canvas').getContext('2d'), s = getComputedStyle(i);
    c.font = `${s.fontSize} ${s.fontFamily}`;
    return c.measureText(i.placeholder).width > i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
}).map(i => i.placeholder)"""
"""The placeholders of the visible inputs that do not fit their input (the hidden tab's are measured when shown)."""


def test_list_report_and_charts(web, browser):
    good = make_run(scores=(9, 8, 7, 9, 8))
    make_run(persona="struggler", scores=(4, 5, 6, 5, 3), days_ago=2)
    running = make_run(persona="quiet_one", status="running", detail="Turn 3/20")
    page = open_page(browser, web)
    page.goto(f"{web}/admin/evaluation/")
    card = page.locator(f'.card[data-run="{good.run_id}"]')
    assert card.locator("[data-status]").inner_text() == "Completed"
    assert "completed" not in card.inner_text().replace("Completed", "")  # the status, once
    assert card.locator(".score-badge").inner_text() == "8.2"
    assert card.locator(".minibar-value").all_inner_texts() == ["9.0", "8.0", "7.0", "9.0", "8.0"]
    assert card.locator(".minibar-name").all_inner_texts() == ["resp", "expl", "emot", "pace", "auth"]
    assert page.locator(f'.card[data-run="{running.run_id}"] [data-status]').inner_text() == "Turn 3/20"
    # every placeholder fits its input, and the filter form's dates and button stay together at 1400 px
    cut = page.evaluate(CUT_PLACEHOLDERS)
    assert cut == [], cut
    tops = {round(page.locator(f".filters {s}").bounding_box()["y"]) for s in ("[name=date_from]", "[name=date_to]")}
    button = page.locator(".filters button").bounding_box()
    assert len(tops) == 1 and abs(button["y"] + button["height"] / 2 - (tops.pop() + 10)) < 15
    page.screenshot(path=str(ARTIFACTS / "dashboard-list.png"), full_page=True)

    card.click()
    page.wait_for_selector(".scorebars")
    assert page.locator("[data-status]").inner_text() == "Completed"
    assert page.locator(".scorebars td.value").all_inner_texts() == ["9.0/10", "8.0/10", "7.0/10", "9.0/10", "8.0/10"]
    usage = page.inner_text(".usage-line")
    assert usage.startswith("Offline: no LLM was called") and "LLM calls" not in usage
    page.screenshot(path=str(ARTIFACTS / "dashboard-report.png"), full_page=True)

    page.goto(f"{web}/admin/evaluation/")
    page.click("text=charts")
    page.wait_for_selector("#chart-by-persona svg")
    assert page.locator("svg.chart").count() == 3
    assert page.locator("#chart-over-time polyline").count() == len(DIMS)  # two days: one line per dimension
    legend = page.inner_text("#chart-by-persona")
    assert "Arjun" in legend and "Priya" in legend
    assert "Reference tutor" in page.inner_text("#chart-by-tutor")
    page.screenshot(path=str(ARTIFACTS / "dashboard-charts.png"), full_page=True)
    # a bar names its persona, dimension and value when pointed at
    titles = page.locator("#chart-by-persona svg rect title").all_text_contents()
    assert "Priya / Responsiveness: 4" in titles


def test_export_downloads_the_filtered_runs(web, browser):
    failed = make_run(status="failed")
    done = make_run(persona="struggler")
    page = open_page(browser, web, accept_downloads=True)
    page.select_option("form.filters select[name=status]", "failed")
    page.click("form.filters button")
    page.wait_for_url("**status=failed**")
    assert page.locator(".card").count() == 1
    with page.expect_download() as download:
        page.click(".exports >> text=CSV")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert [r["run_id"] for r in rows] == [failed.run_id] and done.run_id not in str(rows)
    with page.expect_download() as download:
        page.click(".exports >> text=JSON")
    data = json.loads(Path(download.value.path()).read_text())
    assert data["count"] == 1 and data["results"][0]["run_id"] == failed.run_id


def test_the_existing_session_picker_offers_only_sessions_with_messages(web, browser):
    topic = Topic.objects.filter(approved=True).first()
    for _ in range(3):
        TutoringSession.objects.create(topic=topic)  # started, never spoken in
    talked = TutoringSession.objects.create(
        topic=topic, full_conversation_log=[{"role": "student", "content": "hi"}, {"role": "tutor", "content": "yo"}]
    )
    page = open_page(browser, web)
    page.click("button[data-tab=session]")
    assert page.is_visible("#tab-session") and not page.is_visible("#tab-simulate")
    options = page.locator("#tab-session select[name=session_id] option")
    assert options.count() == 1
    assert options.first.get_attribute("value") == str(talked.id) and "2 messages" in options.first.inner_text()
    cut = page.evaluate(CUT_PLACEHOLDERS)
    assert cut == [], cut
    page.screenshot(path=str(ARTIFACTS / "dashboard-session-picker.png"), full_page=True)


def test_live_updates_fall_back_to_polling_when_the_websocket_fails(staff, browser, tmp_path):
    # A channel layer on a Redis that is not there: the page is told to use the WebSocket, which
    # cannot connect, so live.js retries with backoff and polls meanwhile.
    env = server_env(tmp_path, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0", EVAL_REDIS_SOCKET_TIMEOUT="1")
    run = make_run(persona="distractor", status="running", detail="Turn 1/20")
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        page = open_page(browser, url)
        assert page.get_attribute(".eval-page", "data-live-socket") == "1"
        page.wait_for_function("() => document.querySelector('.eval-page').dataset.liveMode === 'polling'")
        EvaluationRun.objects.filter(pk=run.pk).update(detail="Turn 4/20", turn=4)
        status = page.locator(f'.card[data-run="{run.run_id}"] [data-status]')
        page.wait_for_function(
            f"() => document.querySelector('.card[data-run=\"{run.run_id}\"] [data-status]').textContent === 'Turn 4/20'"
        )
        page.wait_for_function("() => Number(document.querySelector('.eval-page').dataset.reconnects || 0) >= 2")
        EvaluationRun.objects.filter(pk=run.pk).update(status="completed", stage="completed", detail="Complete")
        page.wait_for_load_state()  # the list reloads once its active runs have ended
        page.wait_for_function(
            f"() => document.querySelector('.card[data-run=\"{run.run_id}\"] [data-status]').textContent === 'Completed'"
        )
        assert status.inner_text() == "Completed"
