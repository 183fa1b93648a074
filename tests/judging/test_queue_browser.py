"""A labelling queue in Chromium: two annotators label a 20-item queue blind with the keyboard alone and
disagree on some items, an adjudicator settles them on the queue's page, and the judge card's corrected interval
narrows. Prints seconds per label and the server's time per item. Screenshots go to test-artifacts/.

Runs once (on SQLite): a browser walk that does not depend on the database; the claims' conditional updates are
tested on both databases in test_queues.py."""

import json
import os
import re
import statistics
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from evaluation.judging import services
from evaluation.models import Adjudication, Annotation, Item, JudgeConfiguration, QueueLabel
from evaluation.tutoring.server import managed_server
from tests.browsers import CHROMIUM
from tests.judging.synthetic import candidate_sets
from tests.servers import SERVER_ENV, database_url_for_tests

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PASSWORD = "queue-pass-123"
ITEMS = 20
DIFFER_EVERY = 4
"""bob gives a different level on the first dimension of every fourth item he labels."""

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)"),
    pytest.mark.skipif(
        os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="a browser walk: runs once, on SQLite"
    ),
]


@pytest.fixture
def live_queue(transactional_db, role_groups, django_user_model, tmp_path, module_chromium):
    services.transcripts_import(json.dumps(candidate_sets(12, 8, seed=5)), file="synthetic.json")
    services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=1, workers=2)
    ids = sorted(Item.objects.values_list("pk", flat=True))
    Annotation.objects.filter(item_id__in=ids[24:]).delete()  # 24 items keep the import's labels
    operator = Group.objects.get(name="operator")
    for name in ("owner", "alice", "bob", "carol"):
        django_user_model.objects.create_user(name, f"{name}@example.com", PASSWORD, is_staff=True).groups.add(operator)
    configuration = JudgeConfiguration.objects.get()
    queue = services.queue_create(
        name="tone and guidance",
        rubric="tutor-response",
        owner=django_user_model.objects.get(username="owner"),
        origin="label-next",
        count=ITEMS,
        configuration=configuration.pk,
        annotators=["alice", "bob"],
        adjudicators=["carol"],
    )
    env = {**SERVER_ENV, "DATABASE_URL": database_url_for_tests(), "EVAL_RUNS_DIR": str(tmp_path / "runs")}
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        yield url, queue, configuration


def _page(browser, url, who, errors):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(90_000)  # a bound on failure: the judge card takes seconds on a busy machine
    page.on("console", lambda m: errors.append(f"{who}: {m.text}") if m.type == "error" else None)
    page.goto(f"{url}/admin/login/")
    page.fill("#id_username", who)
    page.fill("#id_password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/admin/$"))
    return page


def _fits(page):
    return page.evaluate("document.documentElement.scrollWidth") <= 1400


def _corrected_widths(page, url, configuration):
    page.goto(f"{url}/admin/evaluation/judging/{configuration.pk}/")
    out = {}
    for row in page.locator("#estimates-table tbody tr").all():
        dimension = row.get_attribute("id").removeprefix("estimate-")
        interval = row.locator("td.corrected .ci").inner_text()
        low, high = (float(x) for x in interval.strip("[]").split(","))
        out[dimension] = high - low
    return out


def _label_all(page, url, queue, pick, timings):
    """Label every item the page hands out with the keyboard alone; pick(item, dimension index) is the key."""
    page.goto(f"{url}/admin/evaluation/judging/queues/{queue.pk}/label")
    seen = []
    while page.locator("#label-form").count():
        item = int(page.locator("input[name=item]").get_attribute("value"))
        assert item not in seen, f"item {item} handed out twice"
        seen.append(item)
        yield page, item
        dims = page.locator("fieldset.dimension").count()
        started = time.perf_counter()
        for k in range(dims):
            page.keyboard.press(pick(len(seen), k))
        with page.expect_navigation():
            page.keyboard.press("Enter")
        page.wait_for_load_state("domcontentloaded")
        nav = page.evaluate(
            "(() => { const n = performance.getEntriesByType('navigation')[0];"
            " return [n.redirectEnd - n.redirectStart, n.responseStart - n.requestStart]; })()"
        )
        timings.append((time.perf_counter() - started, nav[0] + nav[1]))
    assert page.locator("#queue-empty").count() == 1


def test_two_people_label_a_queue_blind_by_keyboard_and_an_adjudicator_settles_it(live_queue, module_chromium):
    url, queue, configuration = live_queue
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    owner = _page(module_chromium, url, "owner", errors)
    before = _corrected_widths(owner, url, configuration)
    assert len(before) == 8

    timings: list[tuple[float, float]] = []
    alice = _page(module_chromium, url, "alice", errors)
    for page, _item in _label_all(alice, url, queue, lambda n, k: "1", timings):
        assert page.locator("#blind-note").count() == 1 and page.locator("#revealed").count() == 0
        assert _fits(page)
        if len(timings) == 1:
            page.screenshot(path=str(ARTIFACTS / "queue-labelling.png"), full_page=True)
    assert QueueLabel.objects.filter(entry__queue=queue, user__username="alice", seconds__isnull=False).count() == ITEMS
    # back (B) to her last item: now hers are in, so the judge's scores show; Enter saves it again
    alice.keyboard.press("b")
    alice.wait_for_selector("#already")
    assert alice.locator("#revealed").count() == 1 and "The judge" in alice.inner_text("#revealed")
    with alice.expect_navigation():
        alice.keyboard.press("Enter")
    assert alice.locator("#queue-empty").count() == 1

    bob = _page(module_chromium, url, "bob", errors)
    differ = []
    for page, item in _label_all(
        bob, url, queue, lambda n, k: "2" if k == 0 and n % DIFFER_EVERY == 0 else "1", timings
    ):
        text = page.content()
        # blind: alice labelled this item, yet nothing of hers (nor the judge's scores) is on bob's page
        assert "alice" not in text and page.locator("#revealed").count() == 0
        differ.append(item)
    differ = differ[DIFFER_EVERY - 1 :: DIFFER_EVERY]
    assert len(differ) == ITEMS // DIFFER_EVERY

    # the queue's page: per-person progress, agreement with its interval, the disagreements
    carol = _page(module_chromium, url, "carol", errors)
    carol.goto(f"{url}/admin/evaluation/judging/queues/{queue.pk}/")
    assert carol.inner_text("#person-alice .labelled") == str(ITEMS)
    assert carol.inner_text("#person-bob .labelled") == str(ITEMS)
    first = carol.locator("#agreement-table tbody tr").first
    assert re.search(r"\[-?\d\.\d\d, -?\d\.\d\d\] n=20", first.inner_text()), first.inner_text()
    listed = carol.locator("#disagreement-list li.disagreement")
    assert sorted(int(x.get_attribute("id").split("-")[1]) for x in listed.all()) == sorted(differ)
    assert _fits(carol)
    carol.screenshot(path=str(ARTIFACTS / "queue-page.png"), full_page=True)
    for item in differ:
        form = carol.locator(f"#disagreement-{item} form")
        select = form.locator("select").first
        select.select_option(index=2)
        with carol.expect_navigation():
            form.locator("button.settle").click()
        assert "adjudicated:" in carol.inner_text(f"#disagreement-{item}")
    assert Adjudication.objects.filter(queue=queue).count() == len(differ)
    assert carol.locator("#intervals").count() == 1

    # the judge card: the corrected intervals narrowed, and it says how many values are adjudicated
    after = _corrected_widths(owner, url, configuration)
    assert owner.inner_text("#estimates-adjudicated") == str(len(differ))
    narrower = [d for d in before if after[d] < before[d]]
    assert len(narrower) >= 6, (before, after)
    owner.screenshot(path=str(ARTIFACTS / "queue-judge-card.png"), full_page=True)
    assert not errors, errors

    per_label = [t[0] for t in timings]
    server = [t[1] for t in timings]
    print(
        f"\nqueue browser walk: {len(timings)} labels (8 dimensions each, keyboard only); "
        f"seconds per label (keys to next item shown) median {statistics.median(per_label):.3f} s, "
        f"max {max(per_label):.3f} s; server time per item (submit + next item) median "
        f"{statistics.median(server):.1f} ms, p90 {sorted(server)[int(0.9 * len(server))]:.1f} ms, "
        f"max {max(server):.1f} ms; corrected width of the widest dimension "
        f"{max(before.values()):.3f} -> {after[max(before, key=before.get)]:.3f}"
    )
