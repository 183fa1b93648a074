"""Names for people, seen in Chromium at 1400 px (and a narrow window): run cards titled by persona and topic
with no word broken across lines, the source badge on one line, dimensions and root causes as words on the
dashboard, the run page and the comparison page, and admin pages that fit: the runs list inside its box,
a run's change page without screens of JSON, a suite's edit page no wider than the window, and a topic's
objectives edited one per line. Screenshots go to test-artifacts/names/."""

import os
from pathlib import Path

import pytest

from evaluation.models import DimensionScore, EvaluationRun, Persona, Problem, Suite, Topic
from tests.web import test_browser_dashboard as dashboard
from tests.web.test_browser_dashboard import ARTIFACTS, DIMS, make_run, open_page

staff, web, browser = dashboard.staff, dashboard.web, dashboard.browser
"""The dashboard's browser tests' fixtures: a staff user, the app under uvicorn, Chromium."""

CHROMIUM = os.environ.get("EVAL_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("EVAL_SCREENSHOTS", ARTIFACTS / "names"))
CAUSES = ["missed_student_signal", "wrong_pacing"]

pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)"),
]

BROKEN_WORDS = """(el) => {
  const broken = [];
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
  return broken;
}"""
"""The words of an element that are split over two or more lines."""

LINES = """(el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  return new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
}"""
"""On how many lines an element's text lies."""


def long_named_runs() -> list[EvaluationRun]:
    """Runs with the long ids the CLI writes (persona and topic in the id), in one group for a comparison."""
    runs = []
    for i, persona in enumerate(["simplicity_seeker", "confused_confident", "repetition_detector"]):
        run = make_run(persona=persona, group="names_group", scores=(6, 7, 5, 8, 6))
        run.run_id = f"run_20261127_0512{i}_{persona}_comparing-decimals_repeat1"
        run.topic = Topic.objects.get(topic_id="comparing-decimals")
        run.source = "simulated"
        run.save()
        Problem.objects.filter(run=run).update(root_cause=CAUSES[i % 2])
        runs.append(run)
    return runs


def visible_text(page) -> str:
    return page.inner_text("#content")


def assert_words_not_ids(text: str, where: str) -> None:
    """No id with an underscore, and no one-word dimension in lower case on a line of its own (a heading
    or a table cell); the judges' own prose may use the words."""
    for name in [*DIMS, *CAUSES]:
        if "_" in name:
            assert name not in text, f"{where} shows the id {name!r}"
        else:
            cells = [cell.strip() for line in text.splitlines() for cell in line.split("\t")]
            assert name not in cells, f"{where} shows the id {name!r}"


@pytest.mark.parametrize("width", [1400, 720])
def test_cards_are_titled_by_persona_and_topic_and_break_no_word(web, browser, width):
    runs = long_named_runs()
    page = open_page(browser, web)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{web}/admin/evaluation/")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"dashboard-{width}.png"), full_page=True)
    for run in runs:
        card = page.locator(f'.card[data-run="{run.run_id}"]')
        title = card.locator(".card-link").inner_text()
        assert title == f"{run.persona.name} · {run.topic.name}", title
        assert card.locator(".card-head").evaluate(BROKEN_WORDS) == [], run.run_id
        badge = card.locator(".badge")
        assert badge.inner_text() == "Simulated" and badge.evaluate(LINES) == 1
    assert_words_not_ids(visible_text(page), "the dashboard")


def test_run_and_comparison_pages_show_names_and_words(web, browser):
    runs = long_named_runs()
    run = runs[0]
    DimensionScore.objects.filter(run=run, dimension="explanation_quality").update(analysis="clear")
    page = open_page(browser, web)
    page.set_viewport_size({"width": 1400, "height": 900})
    SHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{web}/admin/evaluation/runs/{run.run_id}/")
    page.wait_for_selector(".scorebars")
    assert page.title().startswith(f"{run.persona.name} · {run.topic.name}")
    text = visible_text(page)
    assert "Explanation quality" in text and "Missed student signal" in text
    assert_words_not_ids(text, "the run page")
    assert page.locator(".report-head .badge").evaluate(LINES) == 1
    page.screenshot(path=str(SHOTS / "run-1400.png"), full_page=True)

    page.goto(f"{web}/admin/evaluation/comparisons/names_group/")
    text = visible_text(page)
    names = [Persona.objects.get(persona_id=p).name for p in ("simplicity_seeker", "confused_confident")]
    heads = page.locator("table.heat tbody th").all_inner_texts()
    assert all(name in heads for name in names) and "simplicity_seeker" not in heads, heads
    assert "Explanation quality" in text and "Wrong pacing" in text
    assert_words_not_ids(text, "the comparison page")
    assert "Explanation quality" in page.inner_text(".chart-wrap")  # the chart's axis and legend too
    page.screenshot(path=str(SHOTS / "comparison-1400.png"), full_page=True)


def test_admin_pages_fit_and_read(web, browser):
    runs = long_named_runs()
    run = runs[0]
    run.config = {
        "persona": "simplicity_seeker",
        "topic": "comparing-decimals",
        "max_turns": 20,
        "judge": {"provider": "offline", "model": "offline-rules-v1", "prompt_hash": "a" * 64},
        "server_url": "http://user:s3cret@127.0.0.1:9/",
    }
    run.save()
    suite = Suite.objects.create(name="greeter", path="skills/greeter")
    suite.cases.create(name="says hello " * 20, prompt="hi " * 200, expect="greets " * 200)
    page = open_page(browser, web)
    page.set_viewport_size({"width": 1400, "height": 900})
    SHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{web}/admin/evaluation/evaluationrun/")
    box = page.evaluate(
        "() => { const r = document.querySelector('#result_list');"
        " const c = document.querySelector('#changelist .results') || r.parentElement;"
        " return [r.getBoundingClientRect().width, c.getBoundingClientRect().width]; }"
    )
    page.screenshot(path=str(SHOTS / "admin-runs-1400.png"), full_page=True)
    assert box[0] <= box[1] + 1, f"the runs list is {box[0]} px in a {box[1]} px box"
    assert_words_not_ids(visible_text(page), "the admin's runs list")

    page.goto(f"{web}/admin/evaluation/evaluationrun/{run.pk}/change/")
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.screenshot(path=str(SHOTS / "admin-run-1400.png"), full_page=True)
    assert height < 4000, f"the run's change page is {height} px high"
    text = visible_text(page)
    assert "s3cret" not in page.content() and "Max turns" in text and "9 calls" in text

    page.goto(f"{web}/admin/evaluation/suite/{suite.pk}/change/")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    page.screenshot(path=str(SHOTS / "admin-suite-1400.png"), full_page=True)
    assert width <= 1400, f"the suite's edit page is {width} px wide"

    topic = Topic.objects.get(topic_id="comparing-decimals")
    page.goto(f"{web}/admin/evaluation/topic/{topic.pk}/change/")
    objectives = page.locator("textarea[name=learning_objectives]")
    assert objectives.input_value().splitlines() == list(topic.learning_objectives)
    objectives.fill("Compare tenths and hundredths\nOrder three decimals")
    page.locator("textarea[name=common_misconceptions]").fill("Longer means bigger")
    page.screenshot(path=str(SHOTS / "admin-topic-1400.png"), full_page=True)
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .success")
    topic.refresh_from_db()
    assert topic.learning_objectives == ["Compare tenths and hundredths", "Order three decimals"]
    assert topic.common_misconceptions == ["Longer means bigger"]
    assert page.locator("textarea[name=learning_objectives]").input_value().splitlines() == [
        "Compare tenths and hundredths",
        "Order three decimals",
    ]
