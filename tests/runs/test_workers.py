"""Runs end whatever happens to their worker: real qcluster processes, killed for real, and task timeouts."""

import json
import os
import signal
import time

import pytest

from evaluation.models import EvaluationRun, RunMessage
from evaluation.tasks import run_task
from tests.servers import SERVER_ENV, database_url_for_tests, qcluster_worker

pytestmark = pytest.mark.django_db(transaction=True)
TOPIC = "two-digit-addition-regrouping"


@pytest.fixture
def real_queue(monkeypatch):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)


@pytest.fixture
def worker_env(server, loopback, tmp_path):
    """A worker whose student is an LLM behind the loopback server (slow enough to be caught mid-run)."""
    loopback.latency = 0.15
    return {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_SERVER_URL": server,
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
        "EVAL_SIMULATOR_PROVIDER": f"openai/student@{loopback.openai_url}",
        "EVAL_RUN_STALE_AFTER": "2",
    }


def start(client, **body):
    response = client.post(
        "/api/evaluation/start",
        json.dumps({"topic_id": TOPIC, "persona_file": "ace", "seed": 4, **body}),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    return response.json()["run_id"]


def wait_for(client, run_id, done, timeout, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get(f"/api/evaluation/runs/{run_id}/status").json()
        if done(status):
            return status
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting: {status}\n{log.read_text()[-3000:] if log.exists() else ''}")


def test_a_killed_worker_leaves_an_interrupted_run_that_retry_completes(staff_client, real_queue, worker_env, tmp_path):
    first_log, second_log = tmp_path / "q1.log", tmp_path / "q2.log"
    with qcluster_worker(worker_env, first_log) as cluster:
        run_id = start(staff_client, max_turns=20)
        wait_for(staff_client, run_id, lambda s: s["run_status"] == "running" and s["turn"] >= 3, 60, first_log)
        os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait(10)
        killed_at = time.monotonic()
    run = EvaluationRun.objects.get(run_id=run_id)
    assert run.status == "running"  # nobody is left to end it
    killed_turns = RunMessage.objects.filter(run=run).count()

    time.sleep(2.5)  # past EVAL_RUN_STALE_AFTER: a worker that starts now ends the dead worker's run
    with qcluster_worker(worker_env, second_log):
        status = wait_for(staff_client, run_id, lambda s: s["run_status"] != "running", 30, second_log)
        assert status["run_status"] == "interrupted" and "EVAL_RUN_STALE_AFTER" in status["error"]
        assert time.monotonic() - killed_at < 30
        # The killed attempt's task, handed out again by the broker, does nothing to the run.
        assert run_task(str(run.pk), 1) == "skipped"
        assert RunMessage.objects.filter(run=run).count() == killed_turns
        retry = staff_client.post(f"/api/evaluation/runs/{run_id}/retry")
        assert retry.status_code == 202 and retry.json()["attempt"] == 2, retry.content
        status = wait_for(staff_client, run_id, lambda s: s["run_status"] not in ("queued", "running"), 120, second_log)
    assert status["run_status"] == "completed", status
    # The worker says what it does: one line when it begins the run, one when it ends it.
    said = second_log.read_text()
    assert f"run {run_id} (tutor, attempt 2) began on " in said and f"run {run_id} completed after " in said, said
    messages = RunMessage.objects.filter(run__run_id=run_id)
    assert messages.filter(attempt=1).count() == killed_turns  # the first attempt's messages stay as they were
    for attempt in (1, 2):
        turns = list(messages.filter(attempt=attempt).values_list("turn", "role"))
        assert len(turns) == len(set(turns)), f"attempt {attempt} stored a turn twice"
    assert messages.filter(attempt=2, role="student").count() >= 1


def test_a_task_over_its_time_limit_ends_failed_never_running(staff_client, real_queue, worker_env, loopback, tmp_path):
    # At least 24 student turns (8 problems, 3 tries each at a wrong answer) x 0.3 s: well past 3 s,
    # however fast the harness gets.
    loopback.latency = 0.3
    log = tmp_path / "q.log"
    with qcluster_worker({**worker_env, "EVAL_TASK_TIMEOUT": "3"}, log):
        run_id = start(staff_client, max_turns=40)
        status = wait_for(staff_client, run_id, lambda s: s["run_status"] not in ("queued", "running"), 60, log)
    assert status["run_status"] == "failed", status
    assert "time limit" in status["error"] and "EVAL_TASK_TIMEOUT" in status["error"]
    assert RunMessage.objects.filter(run__run_id=run_id).exists()  # what was said before the limit is kept


def test_the_sweep_schedule_fired_by_a_real_cluster_interrupts_a_run_whose_worker_stopped(real_queue, tmp_path):
    """The periodic sweep: migration 0004's django-q2 schedule, fired by a real cluster's scheduler
    (not the sweep each worker makes when it starts, which is over before the stale run exists). The
    worker's own sweeper thread may mark the run first; then the schedule's sweep finds nothing to do."""
    import importlib

    from django.apps import apps
    from django.utils import timezone
    from django_q.models import Schedule, Task

    importlib.import_module("evaluation.migrations.0004_sweep_schedule").create_schedule(apps, None)
    schedule = Schedule.objects.get(func="evaluation.tasks.runs_sweep_task")
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == ("I", 1, -1)
    env = {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "EVAL_Q_WORKERS": "1",
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_RUN_STALE_AFTER": "2",
    }
    log = tmp_path / "q.log"
    with qcluster_worker(env, log):
        deadline = time.monotonic() + 60
        while "ready for work" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # the worker has started and made its own sweep (django-q2 logs, then sends post_spawn)
        run = EvaluationRun.objects.create(
            run_id="stale_run",
            status="running",
            stage="running_session",
            worker="gone:1",
            heartbeat_at=timezone.now() - timezone.timedelta(seconds=60),
        )
        due = timezone.now()
        Schedule.objects.filter(pk=schedule.pk).update(next_run=due)
        deadline = time.monotonic() + 90  # django-q2's sentinel looks at its schedules every 30 s
        while time.monotonic() < deadline and (
            EvaluationRun.objects.get(pk=run.pk).status == "running"
            or Schedule.objects.get(pk=schedule.pk).next_run <= due  # not fired yet (the sweeper may be first)
        ):
            time.sleep(0.5)
        fired = Schedule.objects.get(pk=schedule.pk)
        while time.monotonic() < deadline and not Task.objects.filter(id=fired.task).exists():
            time.sleep(0.5)  # the cluster's monitor stores the task's result once it has returned
    run.refresh_from_db()
    assert run.status == "interrupted", log.read_text()[-3000:]
    assert "no progress from worker gone:1" in run.error
    assert run.events.filter(status="interrupted", actor="sweeper").count() == 1
    task = Task.objects.get(id=fired.task)  # the schedule's own task did it
    assert task.func == "evaluation.tasks.runs_sweep_task" and task.success and task.result in (["stale_run"], [])
    assert fired.next_run > timezone.now() - timezone.timedelta(seconds=5)  # and it is due again in a minute
