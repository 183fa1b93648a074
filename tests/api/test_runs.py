"""Runs of every kind through the API: list and its filters, detail, status, cancel, retry, export."""

import csv
import io
import json

import pytest

from evaluation.models import EvaluationRun, RunMessage

from .conftest import make_run

pytestmark = pytest.mark.django_db


def ids(response):
    assert response.status_code == 200, response.content
    return [r["run_id"] for r in response.json()["results"]]


def test_list_holds_runs_of_every_kind_newest_first_with_scores(api, runs):
    response = api.get("/api/evaluation/runs")
    body = response.json()
    assert body["count"] == 4 and ids(response)[-1] == "run_old"
    assert set(ids(response)) == {"run_ace", "run_struggler", "run_old", "drift_rex"}
    ace = next(r for r in body["results"] if r["run_id"] == "run_ace")
    assert ace["kind"] == "tutor" and ace["persona_id"] == "ace" and ace["topic_id"] == "comparing-decimals"
    assert ace["scores"] == {"responsiveness": 8.0, "pacing": 6.0} and ace["avg_score"] == 7.0
    assert ace["group"] is None and ace["agent_id"] is None and ace["message_count"] == 0
    drift = next(r for r in body["results"] if r["run_id"] == "drift_rex")
    assert drift["kind"] == "drift" and drift["agent_id"] == "rex" and drift["persona_id"] is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("kind=drift", {"drift_rex"}),
        ("kind=tutor&persona=ace", {"run_ace", "run_old"}),
        ("status=failed", {"run_struggler"}),
        ("agent=rex", {"drift_rex"}),
        ("topic=comparing-decimals&status=completed", {"run_ace", "run_old"}),
        ("date_to=2000-01-01", set()),
        ("", {"run_ace", "run_struggler", "run_old", "drift_rex"}),  # no filter: all
    ],
)
def test_list_filters(api, runs, query, expected):
    assert set(ids(api.get(f"/api/evaluation/runs?{query}"))) == expected


@pytest.mark.parametrize("query", ["kind=", "persona=", "date_from=", "status=&topic=x"])
def test_an_empty_filter_is_refused_naming_it(api, runs, query):
    """A parameter sent is a value: an empty one names nothing, so it is a 400, not a silent 'all'."""
    response = api.get(f"/api/evaluation/runs?{query}")
    assert response.status_code == 400
    field = query.split("=")[0]
    assert field in response.json()["fields"], response.json()


def test_date_filters_are_whole_inclusive_days(api, runs):
    old_day = EvaluationRun.objects.get(run_id="run_old").created_at.date()
    assert ids(api.get(f"/api/evaluation/runs?date_from={old_day}&date_to={old_day}")) == ["run_old"]
    assert ids(api.get("/api/evaluation/runs?date_from=2999-01-01")) == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=abc", "limit"),
        ("limit=0", "limit"),
        ("offset=-1", "offset"),
        ("date_to=2026-13-45", "date_to"),
        ("date_from=yesterday", "date_from"),
        ("date_from=2026-02-01&date_to=2026-01-01", "date_to"),
        ("kind=robot", "kind"),
        ("status=done", "status"),
        ("source=email", "source"),
    ],
)
def test_list_refuses_bad_filters_naming_the_field(api, runs, query, field):
    response = api.get(f"/api/evaluation/runs?{query}")
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body["fields"]) == [field] and body["fields"][field] and field in body["error"]


def test_list_pages(api, runs):
    first = api.get("/api/evaluation/runs?limit=2").json()
    second = api.get("/api/evaluation/runs?limit=2&offset=2").json()
    assert first["count"] == 4 and len(first["results"]) == 2 and "offset=2" in first["next"]
    assert second["next"] is None and second["previous"]
    assert {r["run_id"] for r in first["results"] + second["results"]} == {
        "run_ace",
        "run_struggler",
        "run_old",
        "drift_rex",
    }
    assert len(api.get("/api/evaluation/runs?limit=100000").json()["results"]) == 4  # lowered to the maximum


def test_list_answers_what_the_summary_serializer_writes(api, runs, django_assert_max_num_queries, stale_mark_made):
    """The list builds its page from plain columns; each row is exactly RunSummaryOutput's shape."""
    import uuid

    from django.utils import timezone

    from evaluation.api.serializers import RunSummaryOutput
    from evaluation.runs import selectors

    EvaluationRun.objects.filter(run_id="run_ace").update(
        group="cmp-1", source_session_id=uuid.uuid4(), completed_at=timezone.now(), attempt=2, repeat_index=3
    )
    for turn, role in enumerate(["student", "tutor", "student"], start=1):
        RunMessage.objects.create(run=runs["ace"], turn=turn, role=role, content="hi", timestamp=timezone.now())
    expected = RunSummaryOutput(selectors.run_list(), many=True).data
    with django_assert_max_num_queries(5):  # token, count, page, message counts, scores
        body = api.get("/api/evaluation/runs").json()
    assert json.loads(json.dumps(body["results"])) == json.loads(json.dumps(expected))
    assert [list(row) for row in body["results"]] == [list(row) for row in expected]  # same keys, same order
    ace = next(r for r in body["results"] if r["run_id"] == "run_ace")
    assert ace["message_count"] == 3 and ace["group"] == "cmp-1" and ace["attempt"] == 2
    assert ace["completed_at"] and ace["source_session_id"] and list(ace["scores"]) == ["responsiveness", "pacing"]
    page = api.get("/api/evaluation/runs?limit=1&offset=1&kind=tutor").json()
    tutor_runs = [r["run_id"] for r in expected if r["kind"] == "tutor"]
    assert [r["run_id"] for r in page["results"]] == tutor_runs[1:2] and page["count"] == len(tutor_runs) == 3


def test_list_builds_no_run_instances(api, runs):
    """A page of the list is read as plain columns: no run (with its JSON columns) is built per row."""
    from django.db.models.signals import post_init

    built = []

    def count(sender, instance, **kwargs):
        built.append(instance)

    post_init.connect(count, sender=EvaluationRun)
    try:
        body = api.get("/api/evaluation/runs").json()
    finally:
        post_init.disconnect(count, sender=EvaluationRun)
    assert len(body["results"]) == 4 and built == []


def test_dashboard_and_api_share_the_filter(staff_client, api, runs):
    # An impossible date is refused on both doors, naming it, rather than ignored.
    refused = staff_client.get("/admin/evaluation/?persona=ace&date_to=2026-13-45")
    assert refused.status_code == 400 and b"date_to" in refused.content
    assert "date_to" in api.get("/api/evaluation/runs?persona=ace&date_to=2026-13-45").json()["fields"]
    page = staff_client.get("/admin/evaluation/?persona=ace")
    assert page.status_code == 200
    shown = {c.run.run_id for c in page.context["cards"]}
    assert shown == set(ids(api.get("/api/evaluation/runs?persona=ace"))) == {"run_ace", "run_old"}


def test_detail_has_messages_evaluation_and_status(api, runs):
    run = runs["ace"]
    RunMessage.objects.create(run=run, turn=1, role="tutor", content="Hi!", timestamp=run.created_at)
    body = api.get(f"/api/evaluation/runs/{run.run_id}").json()
    assert body["messages"] == [
        {"turn": 1, "role": "tutor", "content": "Hi!", "timestamp": run.created_at.isoformat(), "metadata": {}}
    ]
    assert body["evaluation"]["scores"] == body["scores"] == {"responsiveness": 8.0, "pacing": 6.0}
    assert [p["title"] for p in body["evaluation"]["problems"]] == ["Ignores the doubt", "=1+1"]
    assert body["status_detail"]["run_status"] == "completed" and body["message_count"] == 1
    assert api.get(f"/api/evaluation/runs/{run.id}").json()["run_id"] == run.run_id  # by UUID too
    assert api.get(f"/api/evaluation/runs/{runs['struggler'].run_id}").json()["evaluation"] is None


def test_status_keeps_spec_001_shape(api, runs):
    body = api.get("/api/evaluation/runs/run_struggler/status").json()
    assert body == {
        "stage": "failed",
        "run_status": "failed",
        "status": "failed",
        "run_id": "run_struggler",
        "kind": "tutor",
        "attempt": 1,
        "detail": "",
        "turn": 0,
        "max_turns": 20,
        "error": "judge broke",
    }


def test_current_status_idle_then_newest_active(api, db):
    idle = api.get("/api/evaluation/status").json()
    assert idle["status"] == "idle" and idle["run_id"] is None and idle["active_runs"] == 0
    make_run("run_done")
    make_run("run_busy", status="running", detail="Turn 2/20", turn=2)
    busy = api.get("/api/evaluation/status").json()
    assert (busy["status"], busy["run_status"], busy["run_id"], busy["turn"]) == (
        "running_session",
        "running",
        "run_busy",
        2,
    )
    assert busy["active_runs"] == 1 and busy["detail"] == "Turn 2/20"
    assert api.get("/api/evaluation/status?run_id=run_done").json()["run_id"] == "run_done"


@pytest.mark.parametrize(
    "url",
    [
        "/api/evaluation/runs/run_nope",
        "/api/evaluation/runs/run_nope/status",
        "/api/evaluation/status?run_id=run_nope",
    ],
)
def test_unknown_run_is_404(api, db, url):
    response = api.get(url)
    assert response.status_code == 404 and response.json() == {"error": "run: no run 'run_nope'"}


def test_cancel_then_409_once_ended(api, db):
    make_run("run_waiting", status="queued")
    response = api.post("/api/evaluation/runs/run_waiting/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert EvaluationRun.objects.get(run_id="run_waiting").status == "cancelled"
    again = api.post("/api/evaluation/runs/run_waiting/cancel")
    assert again.status_code == 409 and "only queued or running runs can be cancelled" in again.json()["error"]
    assert api.post("/api/evaluation/runs/run_nope/cancel").status_code == 404


def test_retry_queues_a_new_attempt_of_a_failed_run(api, db, django_capture_on_commit_callbacks):
    make_run("run_broke", kind="drift", status="failed", error="boom")
    with django_capture_on_commit_callbacks() as queued:
        response = api.post("/api/evaluation/runs/run_broke/retry")
    assert response.status_code == 202, response.content
    assert response.json() == {
        "run_id": "run_broke",
        "kind": "drift",
        "status": "queued",
        "run_status": "queued",
        "stage": "queued",
        "attempt": 2,
    }
    assert len(queued) == 1  # handed to a worker once committed
    busy = api.post("/api/evaluation/runs/run_broke/retry")
    assert busy.status_code == 409 and "is queued" in busy.json()["error"]
    assert api.post("/api/evaluation/runs/run_nope/retry").status_code == 404


def test_retry_is_refused_at_capacity(api, db, settings):
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 1, "MAX_QUEUED_RUNS": 0}
    make_run("run_busy", status="running")
    make_run("run_broke", status="failed")
    response = api.post("/api/evaluation/runs/run_broke/retry")
    assert response.status_code == 409 and "EVAL_MAX_ACTIVE_RUNS" in response.json()["error"]


def read_csv(response):
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv") and response.streaming
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_export_csv_has_a_row_per_run_with_scores_and_problems(api, runs):
    rows = read_csv(api.get("/api/evaluation/runs/export?format=csv&kind=tutor"))
    assert [r["run_id"] for r in rows] == ["run_struggler", "run_ace", "run_old"]
    ace = rows[1]
    assert ace["score:responsiveness"] == "8.0" and ace["score:pacing"] == "6.0" and ace["avg_score"] == "7.0"
    assert ace["persona_id"] == "ace" and ace["status"] == "completed" and ace["problem_count"] == "2"
    assert ace["problems"].startswith("[critical] Ignores the doubt (missed_student_signal) | [minor] =1+1")
    assert rows[0]["error"] == "judge broke" and rows[0]["score:pacing"] == "" and rows[0]["problems"] == ""
    assert "score:adherence" not in rows[0]  # only the dimensions the exported runs have


def test_export_csv_quotes_cells_a_spreadsheet_would_run(api, db):
    make_run("run_evil", problems=[('=HYPERLINK("http://x")', "minor", "other")], error="@SUM(A1)")
    row = read_csv(api.get("/api/evaluation/runs/export?format=csv"))[0]
    assert row["error"] == "'@SUM(A1)"
    assert row["problems"] == '[minor] =HYPERLINK("http://x") (other)'  # starts with '[': not a formula


def test_export_json_is_filtered_like_the_list(api, runs):
    response = api.get("/api/evaluation/runs/export?format=json&persona=ace")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert body["count"] == 2 and [r["run_id"] for r in body["results"]] == ["run_ace", "run_old"]
    assert body["dimensions"] == ["responsiveness", "pacing"]
    assert body["results"][0]["problems"][0] == {
        "rank": 1,
        "title": "Ignores the doubt",
        "turns": [1],
        "description": "",
        "quote": "q",
        "quote_found": True,
        "severity": "critical",
        "root_cause": "missed_student_signal",
    }
    assert api.get("/api/evaluation/runs/export").json()["count"] == 4  # JSON by default


def test_export_refuses_more_runs_than_its_limit(api, runs, settings):
    settings.EVALUATION = {**settings.EVALUATION, "EXPORT_MAX_ROWS": 3}
    for fmt in ("csv", "json"):
        response = api.get(f"/api/evaluation/runs/export?format={fmt}")
        assert response.status_code == 400 and response["Content-Type"] == "application/json"
        assert "4 runs match and an export holds at most 3" in response.json()["error"]
    assert len(read_csv(api.get("/api/evaluation/runs/export?format=csv&kind=tutor"))) == 3


@pytest.mark.parametrize(
    ("query", "field"), [("format=xml", "format"), ("format=csv&date_from=2026-02-30", "date_from")]
)
def test_export_refuses_bad_parameters(api, db, query, field):
    response = api.get(f"/api/evaluation/runs/export?{query}")
    assert response.status_code == 400 and field in response.json()["fields"], response.content
