"""One site: every staff page sits in the admin's frame (its header with the site's name, the navigation
sidebar with the site's pages, the user links), the admin index links every page, the drift index lists
the character agents, a missing page gets the site's 404, a server error its 500 page, and /favicon.ico
answers. Checked in the HTML, and in Chromium (no console error, the policy included) when present."""

import json
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client, RequestFactory
from django.utils import timezone
from django.views import defaults

from evaluation.judging import services as judging_services
from evaluation.models import (
    Agent,
    CorrectionLog,
    DriftRun,
    EvaluationRun,
    JudgeConfiguration,
    SuiteRun,
    Transcript,
)
from tests.judging.synthetic import candidate_sets

CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SITE = "Agent evaluation"
PAGES = ["Dashboard", "Charts", "Judge cards", "Persona drift", "Suite runs", "API docs", "API reference"]


def drift_runs(agent: Agent) -> None:
    """A baseline run scored 6.0 a week ago and a later run scored 4.5, both completed, and one correction."""
    now = timezone.now()
    for run_id, score, baseline, age in (("drift_base", 6.0, True, 7), ("drift_late", 4.5, False, 1)):
        run = EvaluationRun.objects.create(
            run_id=run_id, kind="drift", source="drift", agent=agent, status="completed", overall_score=score
        )
        EvaluationRun.objects.filter(pk=run.pk).update(created_at=now - timedelta(days=age))
        DriftRun.objects.create(run=run, is_baseline=baseline, dimensions=["adherence"])
    CorrectionLog.objects.create(
        agent=agent, original_text="x", threshold=5, reasoning="r", attempt_number=1, outcome="corrected"
    )


def suite_run() -> EvaluationRun:
    run = EvaluationRun.objects.create(run_id="suite_layout", kind="suite", source="suite", status="completed")
    SuiteRun.objects.create(run=run, suite_path="skills/greeter")
    return run


def judged() -> JudgeConfiguration:
    judging_services.transcripts_import(json.dumps(candidate_sets(6, 3, seed=5)), file="synthetic.json")
    judging_services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=1, workers=1)
    return JudgeConfiguration.objects.get()


def site_paths(agent: Agent, suite: EvaluationRun, configuration: JudgeConfiguration) -> dict[str, str]:
    """Each staff page of the site and the title it carries before " | Agent evaluation"."""
    transcript = Transcript.objects.order_by("pk").first()
    assert transcript is not None
    return {
        "/admin/evaluation/": "Evaluation runs",
        "/admin/evaluation/charts/": "Score charts",
        "/admin/evaluation/judging/": "Judge cards",
        f"/admin/evaluation/judging/{configuration.pk}/": "Judge card: tutor-response v",
        f"/admin/evaluation/judging/transcripts/{transcript.pk}/": "Transcript ",
        "/admin/evaluation/drift/": "Persona drift",
        f"/admin/evaluation/drift/{agent.pk}/": "Persona drift: ",
        f"/admin/evaluation/suites/runs/{suite.run_id}/": "Suite greeter · ",
    }


def assert_in_frame(html: str, path: str, title: str) -> None:
    head = re.search(r"<title>(.*?)</title>", html, re.S)
    assert head and head.group(1).strip().startswith(title) and head.group(1).strip().endswith(f"| {SITE}"), (
        path,
        head and head.group(1),
    )
    assert f'<div id="site-name"><a href="/admin/">{SITE}</a></div>' in html, path
    assert "Django administration" not in html and "Django site admin" not in html, path
    assert 'id="user-tools"' in html and 'id="logout-form"' in html, path  # the user links
    assert 'id="nav-sidebar"' in html and 'id="site-pages"' in html, path  # the sidebar, with the site's pages
    for name in PAGES:
        assert f">{name}</a>" in html, (path, name)
    assert 'rel="icon"' in html, path


@pytest.mark.django_db
def test_every_staff_page_is_in_the_admins_frame_and_links_every_other(staff_client, catalog):
    agent = Agent.objects.get(pk="rex")
    drift_runs(agent)
    for path, title in site_paths(agent, suite_run(), judged()).items():
        response = staff_client.get(path)
        assert response.status_code == 200, path
        assert_in_frame(response.content.decode(), path, title)


@pytest.mark.django_db
def test_the_admin_index_links_every_page_and_files_judging_under_its_own_section(staff_client):
    response = staff_client.get("/admin/")
    html = response.content.decode()
    sections = [app["name"] for app in response.context["app_list"]]
    assert "Judging" in sections and "Other" not in sections, sections
    pages = {p["name"]: p["url"] for p in response.context["site_pages"]}
    assert list(pages) == PAGES
    assert pages["Persona drift"] == "/admin/evaluation/drift/" and pages["Suite runs"].endswith("?source=suite")
    for name, url in pages.items():
        assert f'<a href="{url}">{name}</a>' in html.replace("&amp;", "&"), name


@pytest.mark.django_db
def test_a_user_sees_only_the_pages_their_permissions_open(client, django_user_model):
    user = django_user_model.objects.create_user("nobody", password="pw-12345678", is_staff=True)
    client.force_login(user)
    pages = [p["name"] for p in client.get("/admin/").context["site_pages"]]
    assert pages == ["API docs", "API reference"]


@pytest.mark.django_db
def test_the_drift_index_lists_agents_with_latest_run_baseline_and_change(staff_client, catalog, settings, tmp_path):
    agent = Agent.objects.get(pk="rex")
    drift_runs(agent)
    (tmp_path / "rex.json").write_text(json.dumps({"agent": "rex", "dimensions": {"adherence": 6.0}}))
    settings.EVALUATION = {**settings.EVALUATION, "BASELINES_DIR": tmp_path}  # the baseline file drift_run reads
    html = staff_client.get("/admin/evaluation/drift/").content.decode()
    row = re.search(r'<tr id="drift-rex">(.*?)</tr>', html, re.S)
    assert row, html
    cells = re.sub(r"<[^>]+>", "|", row.group(1))
    assert "4.50" in cells and "6.00" in cells and "-1.50" in cells, cells
    assert f'href="/admin/evaluation/drift/{agent.pk}/"' in row.group(1)
    assert re.search(r"<td>2</td>\s*<td>1</td>", row.group(1)), row.group(1)  # two runs, one correction
    # every character agent of the cast is listed, with or without runs
    for other in Agent.objects.filter(kind="character").exclude(pk="rex"):
        assert f'id="drift-{other.pk}"' in html and "no completed run" in html


@pytest.mark.django_db
def test_a_missing_page_is_the_sites_404_and_the_api_keeps_its_json(staff_client):
    response = staff_client.get("/admin/evaluation/no/such/page/")
    html = response.content.decode()
    assert response.status_code == 404
    assert f"<title>Page not found | {SITE}</title>" in html and f">{SITE}</a></div>" in html
    assert "/admin/evaluation/no/such/page/" in html and 'id="site-pages"' in html and 'id="logout-form"' in html
    client = Client()
    anonymous = client.get("/nowhere")
    assert anonymous.status_code == 404 and f">{SITE}</a></div>" in anonymous.content.decode()
    assert "Sign in" in anonymous.content.decode() and 'id="nav-sidebar"' not in anonymous.content.decode()
    api = client.get("/api/nowhere")
    assert api.status_code == 404 and api.json() == {"error": "no API operation at /api/nowhere"}


@pytest.mark.django_db
def test_the_500_page_needs_no_database_and_no_request_context(django_assert_num_queries):
    with django_assert_num_queries(0):
        response = defaults.server_error(RequestFactory().get("/admin/evaluation/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert f"<title>Server error | {SITE}</title>" in html and f">{SITE}</a></div>" in html
    assert "/static/admin/css/base.css" in html


@pytest.mark.django_db
def test_favicon_ico_answers_for_everyone(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body[:4] == b"\x00\x00\x01\x00"  # an ICO file
    assert "max-age=86400" in response["Cache-Control"]
    assert client.post("/favicon.ico").status_code == 405


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")
def test_chromium_shows_every_page_in_the_frame_without_console_errors(live_server, catalog, django_user_model):
    playwright_api = pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_user("staff", "s@example.com", "staff-pass-123", is_staff=True, is_superuser=True)
    agent = Agent.objects.get(pk="rex")
    drift_runs(agent)
    paths = site_paths(agent, suite_run(), judged())
    url = live_server.url
    ARTIFACTS.mkdir(exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(20_000)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))

        page.goto(f"{url}/admin/login/?next=/admin/")
        assert page.inner_text("#site-name") == SITE
        page.fill("#id_username", "staff")
        page.fill("#id_password", "staff-pass-123")
        page.click("input[type=submit]")
        page.wait_for_url(f"{url}/admin/")
        page.click("#content-main #site-pages a:text-is('Persona drift')")
        page.wait_for_url(f"{url}/admin/evaluation/drift/")

        for path, title in paths.items():
            response = page.goto(url + path)
            assert response is not None and response.status == 200, path
            assert page.title().startswith(title) and page.title().endswith(f"| {SITE}"), (path, page.title())
            assert page.inner_text("#site-name") == SITE, path
            assert page.is_visible("#user-tools") and page.is_visible("#logout-form button"), path
            assert page.is_visible("#nav-sidebar #site-pages"), path
            sidebar = page.locator("#nav-sidebar #site-pages th a").all_inner_texts()
            assert sidebar == PAGES, (path, sidebar)
            # the page's content starts beside the sidebar, not under it
            box = page.locator("#content").bounding_box()
            nav = page.locator("#nav-sidebar").bounding_box()
            assert box and nav and box["x"] >= nav["x"] + nav["width"] - 1, path
            icon = page.evaluate("() => fetch(document.querySelector('link[rel=icon]').href).then(r => r.status)")
            assert icon == 200, path
        page.goto(f"{url}/admin/evaluation/drift/")
        page.screenshot(path=str(ARTIFACTS / "drift-index.png"), full_page=True)

        assert page.goto(f"{url}/favicon.ico").status == 200
        missing = page.goto(f"{url}/admin/evaluation/nothing-here/")
        assert missing is not None and missing.status == 404
        assert page.inner_text("#site-name") == SITE and page.is_visible("#site-pages")
        page.screenshot(path=str(ARTIFACTS / "not-found.png"), full_page=True)
        browser.close()
    # A missing page's own 404 is the one error the browser reports; nothing else, no policy violation.
    assert [e for e in errors if "404 (Not Found)" not in e] == [], errors


@pytest.mark.django_db
def test_a_database_outage_met_outside_a_view_is_a_503_and_any_other_error_the_500_page():
    from django.db import OperationalError
    from psycopg_pool import PoolTimeout

    from evaluation.web.site import server_error

    try:
        raise OperationalError("couldn't get a connection after 10.00 sec") from PoolTimeout("timeout")
    except OperationalError:
        busy = server_error(RequestFactory().get("/admin/evaluation/"))
    assert busy.status_code == 503 and busy["Retry-After"] == "2" and b"database" in busy.content
    try:
        raise ValueError("a bug")
    except ValueError:
        other = server_error(RequestFactory().get("/admin/evaluation/"))
    assert other.status_code == 500 and b"Server error" in other.content
