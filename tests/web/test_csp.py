"""The Content-Security-Policy: every page says the browser may run, style, load and connect only to
the app itself, and the pages need nothing else (checked in the HTML, and in Chromium when present)."""

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.test import Client

from tests.web.test_pages import make_runs

CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")


def policy(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy", "")
    assert header, f"{response.request['PATH_INFO']}: no Content-Security-Policy header"
    return {name: values for name, *values in (part.split() for part in header.split(";") if part.strip())}


class InlineCode(HTMLParser):
    """Collects what a policy without 'unsafe-inline' scripts would block: inline scripts and on* handlers."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.found += [f"<{tag} {name}=...>" for name in attrs if name.startswith("on")]
        if tag == "style":
            self.found.append("<style>")
        if tag == "script" and not attrs.get("src") and attrs.get("type") != "application/json":
            self._in_script = True

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.found.append(f"<script>{data.strip()[:60]}")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False


def staff_pages(run, group):
    return [
        "/admin/",
        "/admin/evaluation/",
        f"/admin/evaluation/runs/{run.run_id}/",
        f"/admin/evaluation/comparisons/{group}/",
        "/admin/evaluation/persona/",
        "/admin/evaluation/persona/add/",
        f"/admin/evaluation/evaluationrun/{run.pk}/change/",
        "/admin/auth/user/",
        "/admin/password_change/",
    ]


@pytest.mark.django_db
def test_pages_allow_only_the_apps_own_scripts_styles_images_and_connections(staff_client, catalog):
    run = make_runs(3, group="csp_check")[0]
    responses = {url: staff_client.get(url) for url in staff_pages(run, "csp_check")}
    responses["/admin/login/"] = Client().get("/admin/login/")
    for url, response in responses.items():
        assert response.status_code == 200, url
        directives = policy(response)
        assert directives["default-src"] == ["'self'"], url
        assert directives["script-src"] == ["'self'"], url
        assert directives["style-src"] == ["'self'"], url
        assert directives["img-src"] == ["'self'"], url
        assert directives["connect-src"] == ["'self'"], url
        assert directives["object-src"] == ["'none'"] and directives["frame-ancestors"] == ["'none'"], url
        parser = InlineCode()
        parser.feed(response.content.decode())
        assert parser.found == [], f"{url}: the policy would block {parser.found}"


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")
def test_chromium_reports_no_policy_violation_and_the_pages_still_work(live_server, catalog, django_user_model):
    playwright_api = pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_user("staff", "s@example.com", "staff-pass-123", is_staff=True, is_superuser=True)
    run = make_runs(3, group="csp_browser")[0]
    url = live_server.url
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        violations: list[str] = []
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)

        page.goto(f"{url}/admin/login/?next=/admin/evaluation/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", "staff-pass-123")
        page.click("input[type=submit]")
        page.wait_for_url(f"{url}/admin/evaluation/")

        # The dashboard's script runs: the tabs switch and the turn slider shows its value.
        page.click("button[data-tab=session]")
        assert page.is_visible("#tab-session") and not page.is_visible("#tab-simulate")
        page.click("button[data-tab=simulate]")
        page.eval_on_selector("input[name=max_turns]", "el => { el.value = 7; el.dispatchEvent(new Event('input')); }")
        assert page.inner_text("input[name=max_turns] + output") == "7"
        # The live socket's address (same host, ws:) passes connect-src 'self'. The browser checks the
        # policy before it connects, so the WSGI live server not answering WebSockets does not matter.
        page.evaluate(
            "() => new Promise(done => { const ws = new WebSocket('ws://' + location.host + '/ws/runs/');"
            " ws.onopen = ws.onerror = ws.onclose = () => done(); })"
        )

        # Score bars keep their widths (inline style attributes are allowed, style elements are not):
        # make_runs scores the five dimensions 5, 6, 7, 8 and 9 out of 10.
        page.goto(f"{url}/admin/evaluation/runs/{run.run_id}/")
        fractions = page.eval_on_selector_all(
            ".scorebars .fill", "els => els.map(e => e.offsetWidth / e.parentElement.offsetWidth)"
        )
        assert sorted(round(f, 1) for f in fractions) == [0.5, 0.6, 0.7, 0.8, 0.9], fractions

        for path in staff_pages(run, "csp_browser"):
            page.goto(url + path)
            page.wait_for_load_state("load")
        browser.close()
    assert violations == []
