"""The run kernel's one lifecycle, seen through every kind of run: queue, begin once, end, cancel, retry."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.errors import CapacityReached, RunBusy
from evaluation.models import EvaluationRun, RunMessage, Suite
from evaluation.runs import services as runs
from evaluation.runs.selectors import run_lookup
from evaluation.tasks import run_task
from evaluation.tutoring import services as tutoring
from evaluation.tutoring.pipeline import run_folder

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "two-digit-addition-regrouping"


@pytest.fixture
def anthropic_at_loopback(loopback, monkeypatch):
    """The real anthropic SDK, with its default endpoint moved to the loopback server (as a proxy would)."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.anthropic_url)
    return loopback


@pytest.mark.django_db
def test_a_suite_run_whose_model_has_no_key_ends_failed_with_the_reason(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-present-at-start")
    call_command("discover_suites", str(ROOT / "skills" / "greeter"), stdout=StringIO())
    suite = Suite.objects.get(name="greeter")
    from evaluation.suites import services as suites

    run = suites.suite_run_start(suite_id=suite.pk, model="anthropic:claude-sonnet-4-6", enqueue=False)
    assert run.status == "queued"
    # The start refuses a missing key; a key that goes after the start is found missing by the worker.
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert run_task(str(run.pk), run.attempt) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and run.stage == "failed" and "ANTHROPIC_API_KEY" in run.error
    assert run.completed_at is not None and run.error_traceback
    assert run_task(str(run.pk), run.attempt) == "skipped"  # delivered again: nothing happens


@pytest.mark.django_db
def test_run_suite_takes_spec_003s_vendor_colon_model(anthropic_at_loopback, monkeypatch):
    anthropic_at_loopback.script("Hello Sam, lovely to meet you!", "Hello there, nice to meet you.")
    out = StringIO()
    call_command(
        "run_suite",
        str(ROOT / "skills" / "greeter"),
        "--model",
        "anthropic:claude-sonnet-4-6",
        "--no-judge",
        stdout=out,
    )
    assert "2 passed, 0 failed" in out.getvalue()
    assert anthropic_at_loopback.count("messages") == 2
    assert {r.body["model"] for r in anthropic_at_loopback.requests} == {"claude-sonnet-4-6"}
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(CommandError, match="ANTHROPIC_API_KEY"):
        call_command("run_suite", str(ROOT / "skills" / "greeter"), "--model", "anthropic:claude-sonnet-4-6")
    with pytest.raises(CommandError, match="--model: unknown provider 'gemini'"):
        call_command("run_suite", str(ROOT / "skills" / "greeter"), "--model", "gemini:pro")


@pytest.mark.django_db
def test_cancel_a_queued_run_and_its_task_does_nothing(catalog):
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", max_turns=3, enqueue=False)
    runs.run_cancel(run)
    assert (run.status, run.stage) == ("cancelled", "cancelled")
    assert run_task(str(run.pk), run.attempt) == "skipped"
    with pytest.raises(RunBusy, match="only queued or running runs can be cancelled"):
        runs.run_cancel(run)


@pytest.mark.django_db(transaction=True)
def test_cancel_reaches_a_running_run_within_one_turn(server):
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", max_turns=12, provider="offline", enqueue=False)
    seen = []

    def cancel_at_turn_two(status):
        seen.append(status["turn"])
        if status["turn"] == 2 and status["run_status"] == "running":
            runs.run_cancel(run_lookup(status["run_id"]))

    (done,) = tutoring.runs_execute_here([run], listener=cancel_at_turn_two)
    assert done.status == "cancelled" and done.stage == "cancelled"
    assert max(seen) <= 3  # the worker stopped at its next unit of progress
    stored = list(RunMessage.objects.filter(run=done).order_by("turn").values_list("turn", "role"))
    assert [role for _, role in stored] == ["tutor"] + ["student", "tutor"] * ((len(stored) - 1) // 2)
    assert len(stored) <= 1 + 2 * 4  # the cancel took effect within one turn of the turn it came in
    # What arrived before the worker stopped is stored all the same: every message the run logged.
    logged = [line for line in (run_folder(done) / "run.log").read_text().splitlines() if " [" in line]
    assert len([line for line in logged if line.split(" ", 2)[2].startswith(("STUDENT [", "TUTOR ["))]) == len(stored)
    assert not done.dimension_scores.exists()


@pytest.mark.django_db(transaction=True)
def test_retry_is_a_new_attempt_whose_messages_never_mix(server):
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", max_turns=3, provider="offline", enqueue=False)
    tutoring.runs_execute_here([run])
    run.refresh_from_db()
    first = list(RunMessage.objects.filter(run=run).values_list("attempt", "turn", "role"))
    assert run.status == "completed"
    # A completed run may be run again as a new attempt; the old attempt's messages stay with it.
    run = runs.run_requeue(run)
    assert (run.status, run.attempt) == ("queued", 2)
    assert run_task(str(run.pk), 1) == "skipped"  # the old attempt's task, delivered late (and sent without its kind)
    assert run_task(str(run.pk), 2, "execute", "tutor") == "completed"  # as a task is sent now: with the run's kind
    rows = list(RunMessage.objects.filter(run=run).values_list("attempt", "turn", "role"))
    assert [r for r in rows if r[0] == 1] == first
    second = [r for r in rows if r[0] == 2]
    assert second and len({(turn, role) for _, turn, role in second}) == len(second)  # no turn stored twice
    report = json.loads((Path(run.artifacts_dir) / "conversation.json").read_text())
    assert len(report["messages"]) == len(second)


@pytest.mark.django_db
def test_capacity_counts_queued_and_running_runs(catalog, settings):
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 2}
    tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    with pytest.raises(CapacityReached, match="limit is 2"):
        tutoring.run_start(topic_id=TOPIC, persona="ace", runs_per_persona=2, enqueue=False)
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    runs.run_cancel(run)  # cancelled runs free their slot
    tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    assert EvaluationRun.objects.filter(status="queued").count() == 2


@pytest.mark.django_db
def test_a_stale_heartbeat_is_interrupted_and_can_be_retried(catalog):
    from datetime import timedelta

    from django.utils import timezone

    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    # A worker took the run and then died: its last heartbeat is five minutes old.
    EvaluationRun.objects.filter(pk=run.pk).update(
        status="running", worker="gone:1", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    assert runs.runs_interrupt_stale(stale_after=60) == [run.run_id]
    run.refresh_from_db()
    assert run.status == "interrupted" and "gone:1" in run.error and "EVAL_RUN_STALE_AFTER" in run.error
    assert runs.runs_interrupt_stale(stale_after=60) == []
    run = runs.run_requeue(run)
    assert (run.status, run.attempt, run.error) == ("queued", 2, "")


@pytest.mark.django_db
def test_a_stale_run_whose_worker_lives_on_this_host_is_said_to_be_given_up_not_killed(catalog):
    """A worker that lives (this process) but beats neither beat for the run let it go (a database outage longer
    than the limit, say): the reason says so, not that the worker was killed; one that has ended is named so."""
    import os
    import socket
    from datetime import timedelta

    from django.utils import timezone

    first, second = tutoring.run_start(topic_id=TOPIC, persona="ace", runs_per_persona=2, enqueue=False)
    old = timezone.now() - timedelta(minutes=5)
    here = f"{socket.gethostname()}:{os.getpid()}"
    EvaluationRun.objects.filter(pk=first.pk).update(status="running", worker=here, heartbeat_at=old)
    ended = f"{socket.gethostname()}:{2**22 + 12345}"  # above Linux's largest pid: no such process
    EvaluationRun.objects.filter(pk=second.pk).update(status="running", worker=ended, heartbeat_at=old)
    assert sorted(runs.runs_interrupt_stale(stale_after=60)) == sorted([first.run_id, second.run_id])
    first.refresh_from_db()
    second.refresh_from_db()
    assert f"its worker process {here} lives but no longer works on the run" in first.error
    assert "killed" not in first.error
    assert f"its worker process {ended} has ended" in second.error


def test_run_ids_never_carry_a_slash():
    assert runs.safe_run_id("suite_20260101_x/y") == "suite_20260101_x_y"
    assert "/" not in runs.safe_run_id("../../etc/passwd")


@pytest.mark.django_db
def test_requeue_refuses_an_active_run(catalog):
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    with pytest.raises(RunBusy, match="only failed, interrupted or completed runs can be retried"):
        runs.run_requeue(run)


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_never_exceed_the_limit(catalog, settings):
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (SQLite serialises every write transaction anyway)")
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 5}

    def one(_):
        try:
            tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
            return "started"
        except CapacityReached:
            return "refused"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=20) as pool:
        outcomes = list(pool.map(one, range(20)))
    assert outcomes.count("started") == 5 and outcomes.count("refused") == 15
    assert EvaluationRun.objects.filter(status="queued").count() == 5


@pytest.mark.django_db(transaction=True)
def test_a_judge_that_cannot_be_made_fails_the_re_evaluation_at_evaluating(server, monkeypatch):
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", max_turns=1, provider="offline", enqueue=False)
    (run,) = tutoring.runs_execute_here([run])
    assert run.status == "completed"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    EvaluationRun.objects.filter(pk=run.pk).update(config={**run.config, "provider": "openai/gpt-probe"})
    run = runs.run_requeue(run, action="evaluate")
    assert run_task(str(run.pk), run.attempt, "evaluate") == "failed"
    run.refresh_from_db()
    assert (run.stage, run.detail) == ("failed", "failed at evaluating") and "OPENAI_API_KEY" in run.error


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_holds_no_database_connection_between_beats(catalog, settings):
    """A qcluster worker's pool is small (EVAL_DB_WORKER_POOL_MAX 3) and a running run's own thread and
    its message store hold two of it: a heartbeat that kept its connection left none for the sweeper and
    the price table, and every LLM call then waited out the pool's timeout."""
    import threading
    import time
    from datetime import timedelta

    from django.db.backends.signals import connection_created
    from django.utils import timezone

    settings.EVALUATION = {**settings.EVALUATION, "RUN_STALE_AFTER": 2}  # a beat every 0.5 s
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)
    long_ago = timezone.now() - timedelta(minutes=1)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running", worker="here:1", heartbeat_at=long_ago)
    run.refresh_from_db()
    wrappers = []

    def opened(sender, connection, **kwargs):
        if threading.current_thread().name.startswith("heartbeat-"):
            wrappers.append(connection)

    connection_created.connect(opened)
    held = []
    try:
        with runs._heartbeat(runs.RunHandle(run)):
            time.sleep(0.75)
            for _ in range(3):  # halfway between two beats: 0.75 s, 1.25 s, 1.75 s
                held.append(bool(wrappers) and wrappers[-1].connection is not None)
                time.sleep(0.5)
    finally:
        connection_created.disconnect(opened)
    assert len(wrappers) >= 3, f"one connection per beat from the pool, not one kept: {len(wrappers)}"
    assert held == [False, False, False]
    run.refresh_from_db()
    assert run.heartbeat_at > long_ago


@pytest.mark.django_db
def test_a_time_limit_that_a_library_caught_still_names_the_time_limit(catalog):
    """django-q2 stops a task past EVAL_TASK_TIMEOUT by SIGALRM, raising TimeoutException wherever the
    worker's main thread is. Inside the conversation's event loop a library may catch it and fail in its own
    words; CI once saw such a run end 'the tutor became unreachable ... code 1006' instead of the limit."""
    import threading
    import time

    from django_q.exceptions import TimeoutException
    from django_q.timeout import TimeoutHandler

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")
    (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace", enqueue=False)

    def work(handle):
        try:
            time.sleep(5)
        except TimeoutException:
            raise ConnectionError("the connection dropped") from None  # a library's words for it
        return {}

    with TimeoutHandler(1):
        runs.task_time_limit_watch()
        runs.run_execute(run.pk, run.attempt, work)
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == "the task ran past its time limit (EVAL_TASK_TIMEOUT) and was stopped"
    runs.task_time_limit_watch()  # the next task starts with no alarm noted
    assert runs.failure_message(ConnectionError("x")) == "ConnectionError: x"
