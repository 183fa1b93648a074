"""Batches queue instead of failing: beyond EVAL_MAX_ACTIVE_RUNS runs wait `queued` and start, oldest
first, as slots free; only a queue beyond EVAL_MAX_QUEUED_RUNS is refused."""

import json
import shutil
import time
from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone
from django_q.models import OrmQ, Task
from rest_framework.authtoken.models import Token

from evaluation.errors import CapacityReached
from evaluation.models import EvaluationRun, RunEvent
from evaluation.runs import services as runs
from evaluation.tutoring import services as tutoring
from evaluation.tutoring.server import managed_server
from tests.servers import SERVER_ENV, database_url_for_tests, qcluster_worker, redis_server

TOPIC = "two-digit-addition-regrouping"


@pytest.fixture
def real_queue(monkeypatch):
    """Tasks go to the ORM broker (a row each) instead of running in the calling process."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)


def sent(run_ids):
    return sorted(EvaluationRun.objects.filter(run_id__in=run_ids, sent_attempt=1).values_list("run_id", flat=True))


@pytest.mark.django_db
def test_runs_beyond_the_limit_wait_and_the_oldest_starts_when_a_slot_frees(
    catalog, settings, real_queue, django_capture_on_commit_callbacks
):
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 2}
    with django_capture_on_commit_callbacks(execute=True):
        created = tutoring.run_start(topic_id=TOPIC, persona="ace", runs_per_persona=5)
    ids = [r.run_id for r in created]
    assert sent(ids) == sorted(ids[:2]) and OrmQ.objects.count() == 2  # two tasks; three runs wait
    assert runs.occupancy() == runs.Occupancy(holding=2, waiting=3)

    # A worker runs the first one to the end: its slot goes to the oldest waiting run.
    with django_capture_on_commit_callbacks(execute=True):
        runs.run_execute(created[0].pk, 1, lambda handle: {})
    assert EvaluationRun.objects.get(run_id=ids[0]).status == "completed"
    assert sent(ids) == sorted(ids[:3]) and OrmQ.objects.count() == 3

    # Cancelling a waiting run frees no slot; cancelling one that holds a slot hands it on.
    with django_capture_on_commit_callbacks(execute=True):
        runs.run_cancel(created[4])
    assert sent(ids) == sorted(ids[:3])
    with django_capture_on_commit_callbacks(execute=True):
        runs.run_cancel(created[1])
    assert sent(ids) == sorted(ids[:4]) and OrmQ.objects.count() == 4


@pytest.mark.django_db
def test_a_queue_beyond_its_limit_is_refused_naming_the_limit(catalog, settings):
    settings.EVALUATION = {**settings.EVALUATION, "MAX_ACTIVE_RUNS": 2, "MAX_QUEUED_RUNS": 3}
    tutoring.run_start(topic_id=TOPIC, persona="ace", runs_per_persona=5)  # 2 take the slots, 3 wait
    with pytest.raises(CapacityReached, match=r"the queue limit is 3 \(EVAL_MAX_QUEUED_RUNS\)"):
        tutoring.run_start(topic_id=TOPIC, persona="ace")
    assert EvaluationRun.objects.count() == 5


@pytest.mark.django_db
def test_a_task_the_broker_lost_is_sent_again(catalog, real_queue, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        (run,) = tutoring.run_start(topic_id=TOPIC, persona="ace")
    assert OrmQ.objects.count() == 1
    OrmQ.objects.all().delete()  # the broker lost it (a cluster killed with it prefetched, say)
    assert runs.runs_resend_lost(stale_after=60) == []  # sent just now: it may still be on its way
    EvaluationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert runs.runs_resend_lost(stale_after=60) == [run.run_id]
    assert OrmQ.objects.count() == 1


BATCH, LIMIT = 64, 8


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed (.ci/run installs it)")
@pytest.mark.django_db(transaction=True)
def test_a_64_run_batch_with_a_limit_of_8_completes_on_redis_with_at_most_8_running(catalog, staff_user, tmp_path):
    """Two real qcluster processes of 5 workers (10 in all, more than the limit) on a real Redis
    broker, a uvicorn web process that takes the start and serves the reference tutor."""
    with redis_server(tmp_path) as redis_url:
        env = _cluster_env(redis_url, tmp_path, max_active_runs=LIMIT, workers=5)
        token = Token.objects.create(user=staff_user).key
        with managed_server(env, log_path=tmp_path / "web.log") as url:
            worker_env = {**env, "EVAL_SERVER_URL": url}
            with (
                qcluster_worker(worker_env, tmp_path / "q1.log"),
                qcluster_worker(worker_env, tmp_path / "q2.log"),
            ):
                _until_clusters_are_up(redis_url, 2)
                started = time.monotonic()
                response = post_start(url, token, persona_file="all", runs_per_persona=BATCH // 8, max_turns=2)
                assert len(response["run_ids"]) == BATCH, response
                peak_running, peak_holding = 0, 0
                while time.monotonic() - started < 110:
                    active = EvaluationRun.objects.filter(status__in=("queued", "running"))
                    peak_running = max(peak_running, active.filter(status="running").count())
                    peak_holding = max(peak_holding, runs.occupancy().holding)
                    if not active.exists():
                        break
                    time.sleep(0.05)
                results = _task_results_once_saved(BATCH)
    logs = "\n".join((tmp_path / name).read_text(errors="replace")[-1500:] for name in ("q1.log", "q2.log"))
    outcome = _statuses()
    assert outcome == {"completed": BATCH}, f"{outcome}\n{logs}"
    assert peak_running <= LIMIT and peak_holding <= LIMIT
    # The same from the stored transitions: no moment when more than 8 runs were between begin and end.
    intervals = EvaluationRun.objects.values_list("started_at", "completed_at")
    edges = sorted(
        [(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
    )  # at a tie, an end (-1) sorts before a start
    overlap = peak_overlap = 0
    for _, step in edges:
        overlap += step
        peak_overlap = max(peak_overlap, overlap)
    assert peak_overlap <= LIMIT, peak_overlap
    assert peak_overlap >= LIMIT // 2, f"the workers never ran the batch in parallel ({peak_overlap} at most)"
    workers = set(EvaluationRun.objects.values_list("worker", flat=True))
    assert len(workers) > 5, f"the batch ran on {len(workers)} worker processes: {workers}"
    # A copy of each run's task went to each of the two clusters: one copy began the run, the other
    # found it begun and did nothing. Runs dispatched while a process read one live cluster (stats
    # older than their 3 s expiry under load, kept for 10 s) went once, so at least a quarter, not all.
    # A worker that ended a run (or skipped a copy) began the oldest sent run itself: that run's
    # copies were all skipped, and the task's result names it after its own.
    began = RunEvent.objects.filter(status="running").values("run").annotate(n=Count("id"))
    assert len(began) == BATCH and {row["n"] for row in began} == {1}
    assert _ended(results, "completed") == BATCH, results
    assert _ended(results, "skipped") >= BATCH // 4, results
    assert all(isinstance(r, str) and r.split(";")[0] in ("completed", "skipped") for r in results), results


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed (.ci/run installs it)")
@pytest.mark.django_db(transaction=True)
def test_a_worker_that_ends_a_run_begins_the_sent_runs_itself_and_their_tasks_do_nothing(catalog, staff_user, tmp_path):
    """The hand-over, on a real qcluster of one worker (Redis broker) with one slot: the worker that
    ends a run begins the next run sent to the workers itself, in the same task, while that run's own
    task waits behind it in the cluster's queue; delivered afterwards, those tasks do nothing."""
    with redis_server(tmp_path) as redis_url:
        env = _cluster_env(redis_url, tmp_path, max_active_runs=1, workers=1)
        token = Token.objects.create(user=staff_user).key
        with managed_server(env, log_path=tmp_path / "web.log") as url:
            with qcluster_worker({**env, "EVAL_SERVER_URL": url}, tmp_path / "q1.log"):
                _until_clusters_are_up(redis_url, 1)
                response = post_start(url, token, persona_file="ace", runs_per_persona=3, max_turns=1)
                deadline = time.monotonic() + 90
                while EvaluationRun.objects.filter(status__in=("queued", "running")).exists():
                    assert time.monotonic() < deadline, _statuses()
                    time.sleep(0.1)
                deadline = time.monotonic() + 30
                while Task.objects.filter(func=runs.TASK).count() < 3 and time.monotonic() < deadline:
                    time.sleep(0.1)  # the cluster's monitor stores each result after its task returned
                results = sorted(str(task.result) for task in Task.objects.filter(func=runs.TASK))
    log = (tmp_path / "q1.log").read_text(errors="replace")[-2000:]
    assert _statuses() == {"completed": 3}, log
    ordered = list(EvaluationRun.objects.order_by("started_at").values_list("run_id", flat=True))
    assert ordered == response["run_ids"]  # oldest first
    assert results == ["completed; handed over: completed, completed", "skipped", "skipped"], log
    assert len(set(EvaluationRun.objects.values_list("worker", flat=True))) == 1


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed (.ci/run installs it)")
@pytest.mark.django_db(transaction=True)
def test_the_copies_of_a_task_follow_the_clusters_that_are_up_within_a_second(tmp_path, monkeypatch):
    """Each run's task goes once to every live qcluster: a cluster that has just started is counted
    within a second (a count kept longer sent one copy to two clusters, and a worker of the new one
    idled for a whole run while a run waited in the other), and a stopped one stops being counted."""
    from django_q.conf import Conf
    from django_q.status import Stat

    with redis_server(tmp_path) as redis_url:
        # This process sends through the same Redis as the clusters, as the web process does.
        monkeypatch.setattr(Conf, "SYNC", False)
        monkeypatch.setattr(Conf, "ORM", None)
        monkeypatch.setattr(Conf, "REDIS", redis_url)
        monkeypatch.setattr(runs, "_broker", None)
        monkeypatch.setattr(runs, "_clusters", (-runs._CLUSTERS_KEPT_FOR, 1))
        env = _cluster_env(redis_url, tmp_path, max_active_runs=2, workers=1)
        with qcluster_worker(env, tmp_path / "q1.log"):
            _until_clusters_are_up(redis_url, 1)
            assert runs.task_copies() == 1
            with qcluster_worker(env, tmp_path / "q2.log"):
                _until_clusters_are_up(redis_url, 2)
                # As if the count had been taken just before the second cluster's stats appeared:
                # a second later it must be taken again.
                monkeypatch.setattr(runs, "_clusters", (time.monotonic(), 1))
                assert runs.task_copies() == 1
                time.sleep(1.0)
                assert runs.task_copies() == 2
                assert runs.live_clusters() == len(Stat.get_all(runs.broker())) == 2
            deadline = time.monotonic() + 15  # the stopped cluster's stats expire 3 s after its last refresh
            while runs.task_copies() != 1:
                assert time.monotonic() < deadline, "a stopped qcluster was still counted after 15 s"
                time.sleep(0.2)


def _cluster_env(redis_url: str, tmp_path, *, max_active_runs: int, workers: int) -> dict[str, str]:
    """The environment of a web process and qcluster processes on a real Redis broker."""
    return {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "DATABASE_URL": database_url_for_tests(),
        "REDIS_URL": redis_url,
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
        "EVAL_MAX_ACTIVE_RUNS": str(max_active_runs),
        "EVAL_Q_WORKERS": str(workers),
    }


def _ended(results: list[object], status: str) -> int:
    """How many runs the tasks ended with this status: a task's own run, then those handed over to it
    ("completed; handed over: completed, failed")."""
    parts = [p.strip() for r in results for p in str(r).replace("; handed over:", ",").split(",")]
    return parts.count(status)


def _task_results_once_saved(completed: int) -> list[object]:
    """The run tasks' results as django-q2 stored them. A cluster's monitor saves a task's result after
    the task has returned, so the last runs can read `completed` before their results are stored:
    wait (within 30 s, while the clusters still run) for `completed` results and for the copies
    still queued behind them to finish."""
    deadline = time.monotonic() + 30
    while True:
        results = [task.result for task in Task.objects.filter(func=runs.TASK)]
        settled = _ended(results, "completed") >= completed and len(results) >= 2 * completed - 8
        if settled or time.monotonic() > deadline:
            return results
        time.sleep(0.2)


def _until_clusters_are_up(redis_url: str, count: int) -> None:
    """Wait until this many qcluster processes have published their stats (django-q2 does so once its
    workers are up): before that the run kernel would count fewer clusters to send copies to."""
    import redis

    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 60
    while len(client.keys("django_q:evaluation:cluster:*")) < count:
        assert time.monotonic() < deadline, "the qcluster processes did not come up within 60 s"
        time.sleep(0.1)


def _statuses() -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in EvaluationRun.objects.values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    return counts


def post_start(url: str, token: str, **body) -> dict:
    import urllib.request

    request = urllib.request.Request(
        f"{url}/api/evaluation/start",
        data=json.dumps({"topic_id": TOPIC, "seed": 3, **body}).encode(),
        method="POST",
        headers={"content-type": "application/json", "Authorization": f"Token {token}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 202
        return json.loads(response.read())


def test_a_process_keeps_one_broker_and_a_forked_process_makes_its_own(db):
    import multiprocessing

    first = runs.broker()
    assert runs.broker() is first  # not a new client (and, on Redis, a new connection) per task sent

    def child(answers):
        answers.put(runs.broker() is not first and runs.broker() is runs.broker())

    answers = multiprocessing.get_context("fork").SimpleQueue()
    process = multiprocessing.get_context("fork").Process(target=child, args=(answers,))
    process.start()
    process.join(30)
    if process.exitcode is None:
        process.kill()
    assert process.exitcode == 0 and answers.get() is True
