"""The judge card in a real browser: Playwright drives Debian's Chromium against the app under uvicorn.
Screenshots go to test-artifacts/."""

import json
import os
from pathlib import Path

import pytest

from evaluation.judging import services
from evaluation.models import JudgeConfiguration
from evaluation.tutoring.server import managed_server
from tests.judging.synthetic import candidate_sets
from tests.servers import SERVER_ENV, database_url_for_tests

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)"),
]


@pytest.fixture
def live_card(transactional_db, django_user_model, tmp_path, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop here
    django_user_model.objects.create_user("staff", "s@example.com", "staff-pass-123", is_staff=True, is_superuser=True)
    services.transcripts_import(json.dumps(candidate_sets(36, 8, seed=5)), file="synthetic.json")
    services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=2, workers=2)
    env = {**SERVER_ENV, "DATABASE_URL": database_url_for_tests(), "EVAL_RUNS_DIR": str(tmp_path / "runs")}
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        yield url, JudgeConfiguration.objects.get()


@pytest.fixture
def page():
    ARTIFACTS.mkdir(exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(20_000)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.errors = errors
        yield page
        browser.close()


def test_staff_read_the_judge_card_and_follow_a_disagreement_to_its_transcript(live_card, page):
    url, configuration = live_card
    page.goto(f"{url}/admin/evaluation/judging/")
    assert "/admin/login/" in page.url
    page.fill("#id_username", "staff")
    page.fill("#id_password", "staff-pass-123")
    page.click("input[type=submit]")
    page.wait_for_selector("text=Judge cards")
    page.click(f"a[href='/admin/evaluation/judging/{configuration.pk}/']")
    page.wait_for_selector("table#agreement")
    assert page.inner_text("#configuration") == configuration.key
    rows = page.locator("table#agreement tbody tr")
    assert rows.count() == 8
    tone = page.inner_text("#dim-Tutor_Tone")
    assert "n=288" in tone and "[" in tone  # an estimate with its interval and n
    assert tone.startswith("Tutor Tone") and "Tutor_Tone" not in tone  # the dimension by its label
    matrices = page.locator("svg.confusion")
    assert matrices.count() == 8
    box = matrices.first.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 100  # drawn, not just present
    cells = page.locator("#matrix-Tutor_Tone svg text.cell").all_text_contents()
    assert len(cells) == 9 and sum(map(int, cells)) == 288
    page.screenshot(path=str(ARTIFACTS / "judge-card.png"), full_page=True)
    link = page.locator("#matrix-Tutor_Tone ul.disagreements a").first
    target = link.get_attribute("href").split("#")[1]
    link.click()
    page.wait_for_selector(f"#{target}")
    assert "judging/transcripts/" in page.url
    section = page.inner_text(f"#{target}")
    assert "Tutor Tone" in section and "Tutor_Tone" not in section and "ann:" in section
    page.screenshot(path=str(ARTIFACTS / "judged-transcript.png"), full_page=True)
    assert not [e for e in page.errors if "Content Security Policy" in e], page.errors
