"""The suite run page in Chromium: pass^k per case with its interval, and the judge that ran."""

import os
from pathlib import Path

import pytest

from evaluation.models import Case, CaseResult, EvaluationRun, Suite, SuiteRun

CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def a_run_with_repeats() -> EvaluationRun:
    """Three repeats of two cases: the first passes all three, the second fails its third."""
    suite = Suite.objects.create(path="skills/greeter/EVAL.md", name="greeter")
    greets = Case.objects.create(suite=suite, name="greets by name", prompt="Hi", expect="Greets", line=1)
    polite = Case.objects.create(suite=suite, name="stays polite", prompt="Hello", expect="Polite", line=6)
    run = EvaluationRun.objects.create(
        run_id="suite_20260101_000000_greeter", kind="suite", status="completed", detail="1/2 cases pass^3"
    )
    SuiteRun.objects.create(run=run, suite=suite, suite_path=suite.path, repeats=3)
    for case, verdicts in ((greets, (True, True, True)), (polite, (True, True, False))):
        for repeat, passed in enumerate(verdicts, start=1):
            CaseResult.objects.create(
                run=run,
                case=case,
                passed=passed,
                repeat=repeat,
                agent_model="openai/agent",
                judge_model="offline/offline-rules-v1",
                checks=[{"name": "completion", "passed": True, "detail": ""}],
            )
    return run


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")
def test_the_page_shows_pass_k_the_interval_and_the_offline_judge(live_server, transactional_db, django_user_model):
    playwright_api = pytest.importorskip("playwright.sync_api")
    django_user_model.objects.create_user("staff", "s@example.com", "staff-pass-123", is_staff=True, is_superuser=True)
    run = a_run_with_repeats()
    ARTIFACTS.mkdir(exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        violations: list[str] = []
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(f"{live_server.url}/admin/login/?next=/admin/evaluation/suites/runs/{run.run_id}/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", "staff-pass-123")
        page.click("input[type=submit]")
        page.wait_for_selector("table.summary")
        rows = page.eval_on_selector_all(
            "table.summary tbody tr", "trs => trs.map(tr => [...tr.cells].map(td => td.innerText.trim()))"
        )
        assert rows == [
            ["greets by name", "PASS", "3/3", "1.00 (0.44-1.00)"],
            ["stays polite", "FAIL", "2/3", "0.67 (0.21-0.94)"],
        ]
        assert page.inner_text(".meta .judge").startswith("offline rule-based judge (no judge model set")
        assert "1/2 passed (pass^3: all 3 repeats)" in page.inner_text(".meta")
        page.screenshot(path=str(ARTIFACTS / "suite_run_repeats.png"), full_page=True)
        browser.close()
    assert violations == []
