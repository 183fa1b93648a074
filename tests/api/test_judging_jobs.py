"""POST /api/judging/jobs: a judging job queued on a worker that stores its scores and reports its cost, the same
job priced first (dry_run) with nothing queued or sent, and bad input refused by field."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django_q.models import OrmQ, Task

from evaluation.models import JudgeScore
from tests.judging.test_judge import import_set

DIMENSIONS = 8  # the tutor-response rubric's
URL = "/api/judging/jobs"


@pytest.fixture
def prices(db):
    call_command("load_prices", stdout=StringIO())


def post(client, body):
    return client.post(URL, json.dumps(body), content_type="application/json")


def test_a_queued_job_judges_on_a_worker_and_reports_its_cost(
    staff_client, prices, loopback, q_sync, django_capture_on_commit_callbacks
):
    import_set()  # two candidate responses
    provider = f"openai/gpt-5.2@{loopback.openai_url}"
    with django_capture_on_commit_callbacks(execute=True):
        answer = post(staff_client, {"rubric": "tutor-response", "provider": provider, "repeats": 2})
    assert answer.status_code == 202, answer.content
    job = answer.json()
    assert {k: job[k] for k in ("rubric", "provider", "repeats", "batch", "again", "items")} == {
        "rubric": "tutor-response",
        "provider": "openai/gpt-5.2",
        "repeats": 2,
        "batch": False,
        "again": False,
        "items": 2,
    }
    assert loopback.count() == 4 and JudgeScore.objects.count() == 2 * 2 * DIMENSIONS
    task = Task.objects.get(name=job["task"])
    assert task.success, task.result
    billed = loopback.billed
    assert "4 judged, 0 already judged" in task.result
    assert f"4 calls, {billed['input_tokens']:,} input tokens ({billed['cached_input_tokens']:,} cached" in task.result
    assert "$0.0000" not in task.result and "$" in task.result

    # Again: what is judged under the same configuration is skipped, unless `again`.
    with django_capture_on_commit_callbacks(execute=True):
        second = post(staff_client, {"rubric": "tutor-response", "provider": provider, "repeats": 2}).json()
    assert "0 judged, 4 already judged; 0 calls" in Task.objects.get(name=second["task"]).result
    with django_capture_on_commit_callbacks(execute=True):
        third = post(staff_client, {"rubric": "tutor-response", "provider": provider, "repeats": 2, "again": True})
    assert "4 judged, 0 already judged; 4 calls" in Task.objects.get(name=third.json()["task"]).result
    assert loopback.count() == 8 and JudgeScore.objects.count() == 2 * 2 * DIMENSIONS


def test_a_job_by_batch_is_sent_and_its_scores_stored(staff_client, prices, q_sync, django_capture_on_commit_callbacks):
    import_set()
    with django_capture_on_commit_callbacks(execute=True):
        answer = post(staff_client, {"rubric": "tutor-response", "provider": "offline", "batch": True})
    assert answer.status_code == 202 and answer.json()["batch"] is True
    result = Task.objects.get(name=answer.json()["task"]).result
    assert "by offline batch offline-" in result  # the offline provider completes a batch at once
    assert JudgeScore.objects.count() == 2 * DIMENSIONS


def test_dry_run_prices_the_job_and_queues_nothing(staff_client, prices, loopback, django_capture_on_commit_callbacks):
    import_set()
    provider = f"anthropic/claude-opus-4-6@{loopback.anthropic_url}"
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answer = post(staff_client, {"rubric": "tutor-response", "provider": provider, "repeats": 3, "dry_run": True})
    assert answer.status_code == 200, answer.content
    found = answer.json()
    assert found["dry_run"] is True and found["calls"] == 6 and found["unpriced"] == []
    (role,) = found["roles"]
    assert (role["role"], role["model"], role["calls"]) == ("rubric_judge", "claude-opus-4-6", 6)
    assert found["batch_usd"]["low"] == pytest.approx(found["direct_usd"]["low"] / 2, abs=1e-6)
    assert "rubric_judge: 6 calls to anthropic/claude-opus-4-6" in found["text"]
    assert callbacks == [] and not OrmQ.objects.exists() and not Task.objects.exists()  # nothing queued
    assert loopback.count() == 0 and not JudgeScore.objects.exists()  # nothing sent or judged


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "queued"])
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rubric": "nope"}, "rubric"),
        ({"rubric": "tutor-response", "repeats": 0}, "repeats"),
        ({"rubric": "tutor-response", "repeats": 21}, "repeats"),
        ({"rubric": "tutor-response", "provider": "nobody"}, "provider"),
        ({}, "rubric"),
        ({"rubric": "tutor-response", "batch": "maybe"}, "batch"),
    ],
    ids=["unknown-rubric", "repeats-0", "repeats-21", "unknown-provider", "no-rubric", "batch-not-bool"],
)
def test_bad_input_is_refused_naming_the_field(
    staff_client, loopback, django_capture_on_commit_callbacks, body, field, dry_run
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answer = post(staff_client, {**body, "dry_run": dry_run})
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["fields"] and answer.json()["error"].startswith(field)
    assert callbacks == [] and not Task.objects.exists() and loopback.count() == 0


def test_a_missing_key_is_refused_before_anything_is_queued(
    staff_client, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answer = post(staff_client, {"rubric": "tutor-response", "provider": "openai/gpt-5.2"})
    assert answer.status_code == 400 and "OPENAI_API_KEY" in answer.json()["fields"]["provider"][0]
    assert callbacks == []


def test_a_viewer_may_not_start_judging(client, django_user_model, loopback):
    viewer = django_user_model.objects.create_user("looker", password="x" * 16, is_staff=True)
    client.force_login(viewer)
    answer = post(client, {"rubric": "tutor-response", "provider": "offline"})
    assert answer.status_code == 403 and "add_transcript" in answer.json()["error"]
