"""What the site crawl (tests/web/test_site_crawl.py) found, each checked here without a browser: no link to a page
its reader may not open, run lists that name runs instead of printing their ids, admin lists of fewer and
shorter columns, one status word per state, a stored session not called a real student, and comparisons that
name their judge and personas, show no spread for one run and no empty chart when no run was judged."""

import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from evaluation.models import (
    Annotation,
    DimensionScore,
    EvaluationRun,
    Item,
    ModelPrice,
    Persona,
    Rubric,
    RubricDimension,
    RubricVersion,
    Topic,
    Transcript,
)
from evaluation.templatetags.evaluation_extras import status_detail
from evaluation.tutoring.reports import write_comparison

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_client(django_user_model):
    """A member of the viewer group, in a client of its own (staff_client is the test's `client`)."""
    viewer = django_user_model.objects.create_user("viewer", password="x" * 16, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(viewer)
    return client


def test_the_judging_page_offers_the_upload_only_to_who_may_import(viewer_client, staff_client):
    upload = "/admin/evaluation/transcript/upload/"
    assert upload not in viewer_client.get("/admin/evaluation/judging/").content.decode()
    assert viewer_client.get(upload).status_code == 403
    assert upload in staff_client.get("/admin/evaluation/judging/").content.decode()


def labelled_item():
    rubric = Rubric.objects.create(slug="crawl-response", name="Crawl response", version=1)
    dimension = RubricDimension.objects.create(
        rubric=rubric, name="Mistake_Identification", scale_kind="categories", categories=["Yes", "No"]
    )
    version = RubricVersion.objects.create(rubric=rubric, number=1, unit="response", content_hash="h")
    transcript = Transcript.objects.create(source="example", external_id="example-1", messages=[])
    item = Item.objects.create(transcript=transcript, key="GPT4", response="Well done.")
    Annotation.objects.create(
        item=item, dimension=dimension, rubric_version=version, annotator="ann", value="Yes", score=1.0
    )
    return item


def test_an_items_labels_link_nowhere_a_viewer_may_not_go(viewer_client, django_user_model):
    item = labelled_item()
    Annotation.objects.update(user=django_user_model.objects.get(username="viewer"))  # a label with a user to link
    response = viewer_client.get(f"/admin/evaluation/item/{item.pk}/change/")
    html = response.content.decode()
    assert response.status_code == 200 and "crawl-response v1" in html
    assert "/admin/evaluation/rubricversion/" not in html and "/admin/auth/user/" not in html
    assert viewer_client.get("/admin/evaluation/rubricversion/1/change/").status_code == 403


def test_label_and_score_lists_name_items_and_dimensions_in_words(staff_client):
    labelled_item()
    html = staff_client.get("/admin/evaluation/annotation/").content.decode()
    rows = html.split("<tbody>")[1].split("</tbody>")[0]  # the list, not its filters
    assert "example-1 / GPT4" in rows and "Mistake Identification" in rows and ">v1<" in rows
    assert ">crawl-response.Mistake_Identification<" not in rows


def failed_run(**fields):
    return EvaluationRun.objects.create(
        run_id="run_20261201_213747_ace",
        persona=fields.pop("persona", None) or Persona.objects.get(persona_id="ace"),
        topic=Topic.objects.get(topic_id="comparing-decimals"),
        status="failed",
        stage="failed",
        error="the batch could not start: tutor unreachable",
        **fields,
    )


def test_run_lists_name_the_run_and_keep_its_id_for_hovering(staff_client, catalog):
    run = failed_run()
    html = staff_client.get("/admin/evaluation/failedrun/").content.decode()
    cell = html.split("<tbody>")[1].split("</th>")[0]
    assert f"{run.persona.name} · {run.topic.name}" in cell and "Tutor evaluation" in cell
    assert re.sub(r'(title|aria-label)="[^"]*"', "", cell).count(run.run_id) == 0, cell  # the id only on hover (title)


def test_a_stored_session_is_not_called_a_real_student(staff_client, catalog):
    run = EvaluationRun.objects.create(
        run_id="run_20261201_120000_session",
        topic=Topic.objects.get(topic_id="comparing-decimals"),
        source="existing_session",
        status="completed",
        stage="completed",
    )
    for url in ("/admin/evaluation/evaluationrun/", f"/admin/evaluation/runs/{run.run_id}/", "/admin/evaluation/"):
        html = staff_client.get(url).content.decode()
        assert "Stored session" in html or "stored session" in html, url
        assert "eal student" not in html, url


def test_a_run_detail_lists_column_names_the_run(staff_client, catalog):
    run = failed_run()
    DimensionScore.objects.create(run=run, dimension="pacing", score=6, analysis="")
    html = staff_client.get("/admin/evaluation/dimensionscore/").content.decode()
    cell = html.split("<tbody>")[1].split("</th>")[0]
    assert "Arjun · " in cell and re.sub(r'(title|aria-label)="[^"]*"', "", cell).count(run.run_id) == 0


def test_prices_are_listed_without_padding_zeros(staff_client):
    ModelPrice.objects.create(
        vendor="openai", model="gpt-x", effective_from="2026-01-01", input_per_mtok=Decimal("1.000000"),
        output_per_mtok=Decimal("10.000000"), cached_input_per_mtok=Decimal("0.075000"), cache_write_per_mtok=Decimal("1.25"),
    )  # fmt: skip
    rows = staff_client.get("/admin/evaluation/modelprice/").content.decode().split("<tbody>")[1]
    assert ">10<" in rows and ">0.075<" in rows and "1.000000" not in rows


@pytest.mark.parametrize(
    ("status", "stage", "detail", "shown"),
    [
        ("queued", "queued", "", ""),
        ("queued", "queued", "queued", ""),
        ("running", "running_session", "Turn 5/20", "Turn 5/20"),
        ("running", "evaluating", "", "Evaluating"),
    ],
)
def test_an_active_runs_status_line_says_each_thing_once(status, stage, detail, shown):
    assert status_detail(EvaluationRun(run_id="r", status=status, stage=stage, detail=detail)) == shown


def test_the_report_of_a_queued_run_says_queued_once(staff_client, catalog):
    run = failed_run(persona=None)
    EvaluationRun.objects.filter(pk=run.pk).update(status="queued", stage="queued", detail="", error="")
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    line = re.sub(r"<[^>]+>", "", "Status:" + html.split("Status:")[1].split("</p>")[0])
    assert line.lower().count("queued") == 1, line


def test_comparison_markdown_names_personas_causes_and_the_judge(tmp_path):
    runs = [
        {
            "run_id": f"r{i}",
            "persona_id": "repetition_detector",
            "status": "completed",
            "judge": "offline/offline-rules-v1",
            "scores": {"pacing": 6.0},
            "avg_score": 6.0,
            "root_causes": ["repetitive_approach"],
        }
        for i in range(2)
    ]
    write_comparison(tmp_path, "g", runs, min_coverage=0.0, names={"repetition_detector": "Vikram"})
    text = (tmp_path / "comparison.md").read_text()
    assert "| Vikram |" in text and "repetition_detector" not in text, text  # the table and the runs' headings
    assert "Judged by offline/offline-rules-v1 (the offline rule-based judge" in text
    assert "| Repetitive approach | 2 |" in text and "repetitive_approach" not in text


def make_group(statuses_scores):
    topic = Topic.objects.get(topic_id="comparing-decimals")
    for index, (persona_id, status, score) in enumerate(statuses_scores):
        run = EvaluationRun.objects.create(
            run_id=f"cmp_{index}",
            persona=Persona.objects.get(persona_id=persona_id),
            topic=topic,
            status=status,
            stage=status,
            overall_score=score,
            judge_label="offline/offline-rules-v1" if score is not None else "",
            group="cmp",
            repeat_index=index,
            max_turns=4,
        )
        if score is not None:
            DimensionScore.objects.create(run=run, dimension="pacing", score=score, analysis="")


def test_a_persona_with_one_run_shows_no_spread(staff_client, catalog):
    make_group([("ace", "completed", 6.0), ("quiet_one", "completed", 5.0), ("quiet_one", "completed", 7.0)])
    html = staff_client.get("/admin/evaluation/comparisons/cmp/").content.decode()
    rows = html.split('<table class="heat">')[1].split("</table>")[0]
    ace = rows.split(Persona.objects.get(persona_id="ace").name)[1].split("</tr>")[0]
    assert "±" not in ace and "n=1" in ace
    assert "± 1.0" in rows.split(Persona.objects.get(persona_id="quiet_one").name)[1].split("</tr>")[0]


def test_a_comparison_of_failed_runs_has_no_chart_and_says_nothing_was_judged(staff_client, catalog):
    make_group([("ace", "failed", None), ("quiet_one", "failed", None)])
    html = staff_client.get("/admin/evaluation/comparisons/cmp/").content.decode()
    assert 'id="nothing-judged"' in html
    assert "No problems identified" not in html and "Scores by dimension" not in html and "chart-wrap" not in html


def test_a_runs_config_reads_as_words_not_json(staff_client, catalog):
    run = failed_run()
    run.config = {
        "llm": {
            "simulator": {"provider": "offline", "model": "offline-rules-v1", "temperature": 0.9},
            "judge": {"provider": "openai", "model": "gpt-judge", "temperature": None},
        },
        "ended_by": "is_complete",
        "session_state": {"topic_id": "comparing-decimals", "problem_index": 3, "tutor": {"provider": "offline"}},
        "turn_decisions": [{"turn": 1}, {"turn": 2}],
    }
    run.save()
    html = staff_client.get(f"/admin/evaluation/evaluationrun/{run.pk}/change/").content.decode()
    summary = html.split('<dl class="summary">')[1].split("</dl>")[0]
    assert "Judge openai/gpt-judge; Simulator offline/offline-rules-v1" in summary  # by role, on both databases
    assert "Is complete" in summary and "is_complete" not in summary
    assert "Problem index 3" in summary and "2 items" in summary
    assert "{" not in summary and "[" not in summary, summary


def test_a_bad_date_is_named_as_the_form_names_it_and_the_list_says_why_it_is_empty(staff_client, catalog):
    failed_run()
    response = staff_client.get("/admin/evaluation/?date_to=31-12-2026")
    html = response.content.decode()
    assert response.status_code == 400
    assert "To date: &#x27;31-12-2026&#x27; is not a date (YYYY-MM-DD)" in html and "date_to:" not in html
    assert 'id="no-runs-refused"' in html and "No runs yet" not in html
    html = staff_client.get("/admin/evaluation/?date_from=2026-02-01&date_to=2026-01-01").content.decode()
    assert "To date: 2026-01-01 is before from date (2026-02-01)" in html


def test_an_active_runs_card_shows_its_turn_without_a_message_count_that_lags_it(staff_client, catalog):
    """A live card's turn follows the run (live.js) while its message count was the page's, read once:
    "0 messages · Turn 4/14". An active card shows the turn; the count comes with the ended run."""
    run = failed_run()
    EvaluationRun.objects.filter(pk=run.pk).update(
        status="running", stage="running_session", detail="Turn 4/14", turn=4, max_turns=14, error=""
    )
    card = staff_client.get("/admin/evaluation/").content.decode().split(f'title="{run.run_id}"')[1]
    meta = next(m.split("</div>")[0] for m in card.split('class="meta"')[1:] if "data-status" in m)  # the status line
    assert "Turn 4/14" in meta and "message" not in meta, meta


def test_a_live_report_names_messages_and_turns_apart_and_its_usage_follows_the_run(staff_client, catalog):
    """ "Turn 12/14" above "[Turn 25]": the progress counts the student's turns, the transcript numbered its
    messages and called them turns too. Messages are "Message N" now, problems and contradictions link to
    the message; and live.json carries the usage line, so the page's usage no longer stays at its first read."""
    from django.utils import timezone

    from evaluation.models import RunMessage

    run = failed_run()
    EvaluationRun.objects.filter(pk=run.pk).update(
        status="running", stage="running_session", detail="Turn 2/14", turn=2, max_turns=14, error=""
    )
    for n, role in enumerate(("tutor", "student", "tutor", "student", "tutor"), start=1):
        RunMessage.objects.create(run=run, turn=n, role=role, content=f"m{n}", timestamp=timezone.now())
    calls = {
        "calls": 4,
        "input_tokens": 400,
        "output_tokens": 40,
        "by_provider": {"openai": {"calls": 4}},
        "by_role": {"simulator": {"calls": 3}, "<script>x</script>": {"calls": 1}},
    }
    EvaluationRun.objects.filter(pk=run.pk).update(token_usage=calls, cost_usd=Decimal("0.01"))
    html = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/").content.decode()
    assert "Turn 2/14" in html and 'id="message-5"' in html and "Message 5 · TUTOR" in html
    assert "[Turn" not in html and "Usage so far" in html
    assert "4 LLM calls" in html.split("<div data-usage>")[1].split("</div>")[0]  # where live.js rewrites it
    live = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/live.json?after=3").json()
    assert [m["turn"] for m in live["messages"]] == [4, 5] and "4 LLM calls" in live["usage_html"]
    EvaluationRun.objects.filter(pk=run.pk).update(token_usage={**calls, "calls": 6})
    live = staff_client.get(f"/admin/evaluation/runs/{run.run_id}/live.json?after=5").json()
    assert live["messages"] == [] and "6 LLM calls" in live["usage_html"]
    assert "&lt;script&gt;x" in live["usage_html"] and "<script" not in live["usage_html"]  # escaped by the server
