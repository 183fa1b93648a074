"""A suite run whose cases called tools, as a worker stores it offline: its page answers (each tool call with
its result), it is titled by the suite's name, and its dashboard card names the suite and shows the pass rate
banded on its own 0-1 scale (all passed is green, half is amber), not as a 0-10 score."""

import re

import pytest
from django.core.management import call_command

from evaluation.models import CaseResult, EvaluationRun, Suite
from evaluation.suites.services import suite_run_execute, suite_run_start
from evaluation.templatetags.evaluation_extras import percent, rate_band


def card_of(html: str, run_id: str) -> str:
    start = html.index(f'data-run="{run_id}"')
    return html[start : html.index('<div class="card ', start) if '<div class="card ' in html[start:] else None]


@pytest.mark.django_db
def test_a_suite_run_with_tool_calls_has_a_page_and_a_card_named_for_its_suite(staff_client, tmp_path):
    call_command("discover_suites", stdout=(tmp_path / "out.txt").open("w"))
    suite = Suite.objects.get(path="skills/fractions/tools.eval.md")
    queued = suite_run_start(suite_id=suite.pk, enqueue=False)
    suite_run_execute(queued.pk, queued.attempt)  # what the worker's task does
    run = EvaluationRun.objects.get(pk=queued.pk)
    assert run.status == "completed", run.error
    calls = [t for r in CaseResult.objects.filter(run=run) for t in (r.transcript or {}).get("tool_calls", [])]
    assert calls, "the offline agent called no tool: this test needs a case that calls one"
    assert all("error" not in t for t in calls)  # the page read t.error as a filter argument: a 500

    page = staff_client.get(f"/admin/evaluation/suites/runs/{run.run_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"Tool</b> {calls[0]['name']}(" in html
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert title.startswith("Suite fractions/tools · ") and run.run_id not in title, title

    dashboard = staff_client.get("/admin/evaluation/").content.decode()
    card = card_of(dashboard, run.run_id)
    link = re.search(r'class="card-link run-id"[^>]*>(.*?)</a>', card, re.S).group(1)
    assert link == "fractions/tools", link
    assert run.overall_score == 1.0
    assert 'class="score-badge s10"' in card and "100% passed" in card, card


def test_a_pass_rate_is_banded_on_its_own_scale():
    assert rate_band(1.0) == "s10" and rate_band(0.5) == "s5" and rate_band(0.0) == "s1" and rate_band(None) == ""
    assert percent(1.0) == "100%" and percent(0.5) == "50%" and percent(None) == "–"
