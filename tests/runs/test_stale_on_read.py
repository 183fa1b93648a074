"""A status read tells the truth about a run whose worker is gone: it marks the run interrupted itself."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from evaluation.models import EvaluationRun
from evaluation.runs import services as runs
from evaluation.tutoring import services as tutoring

TOPIC = "two-digit-addition-regrouping"


@pytest.fixture
def every_read_marks(monkeypatch):
    """No pause between two reads' marks: each read of the test marks (a deployment waits a few seconds)."""
    monkeypatch.setattr(runs, "STALE_ON_READ_EVERY", 0.0)


def abandoned_run(settings) -> EvaluationRun:
    """A run a worker took and then died with: its last heartbeat is older than EVAL_RUN_STALE_AFTER, and
    no worker (nor sweep) is alive to notice."""
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    old = timezone.now() - timedelta(seconds=float(settings.EVALUATION["RUN_STALE_AFTER"]) + 5)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running", worker="gone:1", heartbeat_at=old)
    return run


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/api/evaluation/runs/{run_id}/status",
        "/api/evaluation/runs/{run_id}",
        "/api/evaluation/runs",
        "/api/evaluation/status?run_id={run_id}",
        "/admin/evaluation/",
        "/admin/evaluation/runs/{run_id}/",
        "/admin/evaluation/runs/{run_id}/live.json",
    ],
)
def test_a_status_read_marks_a_run_whose_worker_is_gone(staff_client, catalog, settings, every_read_marks, path):
    run = abandoned_run(settings)
    response = staff_client.get(path.format(run_id=run.run_id))
    assert response.status_code == 200, response.content[:500]
    run.refresh_from_db()
    assert run.status == "interrupted" and "EVAL_RUN_STALE_AFTER" in run.error
    assert run.events.filter(status="interrupted", actor="sweeper").count() == 1


@pytest.mark.django_db
def test_a_read_shows_the_run_it_marked(staff_client, catalog, settings, every_read_marks):
    run = abandoned_run(settings)
    status = staff_client.get(f"/api/evaluation/runs/{run.run_id}/status").json()
    assert status["run_status"] == "interrupted" and "gone:1" in status["error"]


@pytest.mark.django_db
def test_a_live_run_is_not_marked_by_a_read(staff_client, catalog, settings, every_read_marks):
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running", worker="alive:1", heartbeat_at=timezone.now())
    assert staff_client.get(f"/api/evaluation/runs/{run.run_id}/status").json()["run_status"] == "running"


@pytest.mark.django_db
def test_reads_mark_at_most_once_in_the_pause(staff_client, catalog, settings, monkeypatch):
    monkeypatch.setattr(runs, "STALE_ON_READ_EVERY", 3600.0)
    monkeypatch.setattr(runs, "_stale_read_at", -3600.0)
    staff_client.get("/api/evaluation/runs")  # marks (nothing is stale yet) and starts the pause
    run = abandoned_run(settings)
    assert staff_client.get(f"/api/evaluation/runs/{run.run_id}/status").json()["run_status"] == "running"


@pytest.mark.django_db(transaction=True)
def test_the_read_answers_when_the_mark_fails(staff_client, catalog, settings, every_read_marks):
    run = abandoned_run(settings)
    # The database refuses the mark (as a read-only replica or a failing disk would): the read still answers.
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute(
                "CREATE FUNCTION refuse_interrupt() RETURNS trigger AS $$ BEGIN "
                "IF NEW.status = 'interrupted' THEN RAISE EXCEPTION 'writes refused'; END IF; RETURN NEW; "
                "END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER refuse_interrupt BEFORE UPDATE ON evaluation_evaluationrun "
                "FOR EACH ROW EXECUTE FUNCTION refuse_interrupt()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER refuse_interrupt BEFORE UPDATE ON evaluation_evaluationrun "
                "WHEN NEW.status = 'interrupted' BEGIN SELECT RAISE(ABORT, 'writes refused'); END"
            )
    try:
        for path in (f"/api/evaluation/runs/{run.run_id}/status", "/api/evaluation/runs", "/admin/evaluation/"):
            response = staff_client.get(path)
            assert response.status_code == 200, (path, response.content[:500])
        run.refresh_from_db()
        assert run.status == "running"
    finally:
        with connection.cursor() as cursor:
            if postgres:
                cursor.execute("DROP TRIGGER refuse_interrupt ON evaluation_evaluationrun")
                cursor.execute("DROP FUNCTION refuse_interrupt()")
            else:
                cursor.execute("DROP TRIGGER refuse_interrupt")
