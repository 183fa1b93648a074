"""A killed worker's run is marked interrupted within EVAL_RUN_STALE_AFTER plus one sweep interval, by the
sweeper thread of any worker process still alive (not the once-a-minute schedule)."""

import json
import os
import shutil
import signal
import time

import httpx
import pytest
from rest_framework.authtoken.models import Token

from evaluation.models import EvaluationRun
from evaluation.tutoring.server import managed_server
from tests.servers import qcluster_worker, redis_server, worker_env

TOPIC = "two-digit-addition-regrouping"
STALE_AFTER = 6.0
SWEEP_EVERY = STALE_AFTER / 4  # evaluation.runs.services.sweep_interval


def until_clusters(redis_url: str, count: int) -> None:
    """Wait until this many qcluster processes have published their stats (once their workers are up)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 90
    while len(client.keys("django_q:evaluation:cluster:*")) < count:
        assert time.monotonic() < deadline, f"{count} qcluster processes did not come up within 90 s"
        time.sleep(0.1)
    time.sleep(1)  # their workers' own first sweep (post_spawn) is over


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed (.ci/run installs it)")
@pytest.mark.django_db(transaction=True)
def test_a_killed_clusters_run_is_interrupted_by_another_clusters_sweeper(catalog, staff_user, loopback, tmp_path):
    loopback.latency = 0.3
    token = Token.objects.create(user=staff_user).key
    with redis_server(tmp_path) as redis_url:
        env = worker_env(tmp_path, loopback.openai_url, workers=1, stale_after=STALE_AFTER, REDIS_URL=redis_url)
        with managed_server(env, log_path=tmp_path / "web.log") as url:
            env["EVAL_SERVER_URL"] = url
            with (
                qcluster_worker(env, tmp_path / "q1.log") as first,
                qcluster_worker(env, tmp_path / "q2.log") as second,
            ):
                until_clusters(redis_url, 2)
                response = httpx.post(
                    f"{url}/api/evaluation/start",
                    content=json.dumps({"topic_id": TOPIC, "persona_file": "ace", "seed": 4, "max_turns": 40}),
                    headers={"Content-Type": "application/json", "Authorization": f"Token {token}"},
                    timeout=60,
                )
                assert response.status_code == 202, response.text
                run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
                deadline = time.monotonic() + 90
                while not EvaluationRun.objects.filter(pk=run.pk, status="running", turn__gte=2).exists():
                    assert time.monotonic() < deadline, (tmp_path / "q1.log").read_text(errors="replace")[-3000:]
                    time.sleep(0.1)
                # The cluster whose worker runs it is killed whole (its process group); the other lives on.
                worker_pid = int(EvaluationRun.objects.get(pk=run.pk).worker.rpartition(":")[2])
                doomed, survivor = (first, second) if os.getpgid(worker_pid) == first.pid else (second, first)
                assert os.getpgid(worker_pid) == doomed.pid
                os.killpg(doomed.pid, signal.SIGKILL)
                doomed.wait(10)
                killed_at = time.monotonic()
                # Read from the database, not through the API: a status read would mark the run itself.
                while EvaluationRun.objects.get(pk=run.pk).status == "running":
                    took = time.monotonic() - killed_at
                    assert took < STALE_AFTER + 30, f"still running {took:.0f} s after the kill"
                    time.sleep(0.2)
                took = time.monotonic() - killed_at
                assert survivor.poll() is None
    run.refresh_from_db()
    assert run.status == "interrupted" and "EVAL_RUN_STALE_AFTER" in run.error, run.error
    # The sweeper, not the schedule (every minute): within the limit plus an interval (and some slack).
    assert took < STALE_AFTER + SWEEP_EVERY + 5, f"interrupted {took:.1f} s after the kill"
