"""Swagger UI and Redoc load under the Content-Security-Policy: their pages get a per-response nonce for
what they must run or style inline, the rest of the site keeps the strict policy, and Chromium shows
the documentation with no console error."""

from pathlib import Path

import pytest
from django.test import Client

from tests.web.test_csp import CHROMIUM, policy

EXTERNAL = ("/favicon.ico]",)


def nonce_of(directive: list[str]) -> str:
    nonces = [v for v in directive if v.startswith("'nonce-")]
    assert len(nonces) == 1, directive
    return nonces[0][len("'nonce-") : -1]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_the_docs_pages_allow_their_own_inline_code_by_nonce_only(path):
    first, second = Client().get(path), Client().get(path)
    assert first.status_code == 200
    directives = policy(first)
    for name in ("script-src", "style-src"):
        assert "'unsafe-inline'" not in directives[name], (path, name, directives[name])
        assert directives[name][0] == "'self'"
    assert nonce_of(policy(first)["style-src"]) != nonce_of(policy(second)["style-src"])  # fresh per response
    html = first.content.decode()
    nonce = nonce_of(directives["style-src"])
    assert "<style>" not in html and "<script>" not in html  # every inline element carries the nonce
    if path == "/api/redoc/":
        assert f'<style nonce="{nonce}">' in html and f'<script nonce="{nonce_of(directives["script-src"])}">' in html


@pytest.mark.django_db
def test_other_pages_keep_the_strict_policy(staff_client):
    directives = policy(staff_client.get("/admin/evaluation/"))
    assert directives["script-src"] == ["'self'"] and directives["style-src"] == ["'self'"]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")
@pytest.mark.parametrize(
    "path, ready",
    [("/api/docs/", ".swagger-ui .opblock-tag"), ("/api/redoc/", "[role=menuitem], .menu-content li")],
)
def test_chromium_shows_the_docs_with_no_console_error(live_server, module_chromium, path, ready):
    context = module_chromium.new_context()
    try:
        page = context.new_page()
        errors: list[str] = []
        failed: list[str] = []
        page.on(
            "console",
            lambda m: (
                errors.append(f"{m.text} [{m.location.get('url', '')}]") if m.type in ("error", "warning") else None
            ),
        )
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.on("requestfailed", lambda r: failed.append(f"{r.failure} {r.url}"))
        page.goto(live_server.url + path)
        page.wait_for_selector(ready, timeout=30_000)
        body = page.inner_text("body")
        images = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.src, i.naturalWidth])")
    finally:
        context.close()
    assert "Something went wrong" not in body, body[:500]
    assert [f for f in failed if not f.endswith("/favicon.ico")] == []
    # Redoc's menu logo, written into its bundle as a CDN address, comes from this site and is drawn.
    assert all(src.startswith(live_server.url) and width > 0 for src, width in images), images
    if path == "/api/redoc/":
        assert images, "Redoc's menu shows its logo"
    # Not the docs' own: the browser's favicon request.
    errors = [e for e in errors if not (e.startswith("Failed to load resource") and e.endswith(EXTERNAL))]
    assert errors == [], "\n".join(e[:300] for e in errors)
