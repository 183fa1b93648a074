"""A qcluster stops within seconds on SIGTERM, whether to its whole process group (systemd's default
KillMode=control-group, `docker stop` under an init) or to its main process alone, while a run is in
progress: a real `manage.py qcluster` in a process group of its own, real signals. Its run ends
`interrupted` saying that its worker was stopped, at once, not EVAL_RUN_STALE_AFTER later by a sweep.

Before, the group's SIGTERM killed the sentinel, and the main process then waited for ever for the dead
sentinel to acknowledge the stop; SIGTERM to the main process alone let the run go on to its end."""

import json
import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest
from rest_framework.authtoken.models import Token

from evaluation.models import EvaluationRun
from evaluation.tutoring.server import managed_server
from tests.servers import SERVER_ENV, database_url_for_tests, qcluster_worker, worker_env

TOPIC = "two-digit-addition-regrouping"
GONE_WITHIN = 45.0
"""Seconds within which the whole group must be gone: the stop takes 2-3 s (the workers' grace is 10 s at
most); generous for a busy 2-core machine, and no bound at all for a cluster that never stops."""


def group_members(pgid: int) -> list[int]:
    """Processes of the group that have not ended (zombies left to a reaper that does not reap are gone)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


@pytest.mark.parametrize("target", ["group", "main process"])
@pytest.mark.django_db(transaction=True)
def test_a_qcluster_stops_within_seconds_on_sigterm_and_its_run_says_so(
    target, catalog, staff_user, loopback, tmp_path
):
    loopback.latency = 0.3
    token = Token.objects.create(user=staff_user).key
    # A sweep must not be what ends the run: the worker does, at once.
    env = worker_env(tmp_path, loopback.openai_url, workers=2, stale_after=600)
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        env["EVAL_SERVER_URL"] = url
        with qcluster_worker(env, tmp_path / "q.log") as cluster:
            response = httpx.post(
                f"{url}/api/evaluation/start",
                content=json.dumps({"topic_id": TOPIC, "persona_file": "ace", "seed": 4, "max_turns": 60}),
                headers={"Content-Type": "application/json", "Authorization": f"Token {token}"},
                timeout=60,
            )
            assert response.status_code == 202, response.text
            run = EvaluationRun.objects.get(run_id=response.json()["run_id"])
            deadline = time.monotonic() + 120
            while not EvaluationRun.objects.filter(pk=run.pk, status="running", turn__gte=2).exists():
                assert time.monotonic() < deadline, (tmp_path / "q.log").read_text(errors="replace")[-3000:]
                time.sleep(0.1)
            members = group_members(cluster.pid)
            assert len(members) >= 5, members  # main, sentinel, 2 workers, monitor, pusher
            if target == "group":
                os.killpg(cluster.pid, signal.SIGTERM)
            else:
                os.kill(cluster.pid, signal.SIGTERM)
            sent = time.monotonic()
            while group_members(cluster.pid) or cluster.poll() is None:
                took = time.monotonic() - sent
                assert took < GONE_WITHIN, (
                    f"{target} SIGTERM: still running {took:.0f} s later: {group_members(cluster.pid)}\n"
                    + (tmp_path / "q.log").read_text(errors="replace")[-3000:]
                )
                time.sleep(0.1)
            log = (tmp_path / "q.log").read_text(errors="replace")
    run.refresh_from_db()
    # it says it starts and is ready (django-q2's lines), and that it stopped
    assert re.search(r"Q Cluster \S+ starting\.", log) and "ready for work" in log, log[-3000:]
    assert "qcluster stopped" in log, log[-3000:]
    assert run.status == "interrupted", (run.status, run.turn, run.error, log[-3000:])
    assert "its worker was stopped (SIGTERM)" in run.error and f"turn {run.turn}" in run.error, run.error
    assert "Retry" in run.error
    assert run.events.filter(status="interrupted").exists()
    assert (tmp_path / "runs" / run.run_id / "error.txt").exists()


def test_compose_stops_its_services_the_way_the_stop_test_above_exercises():
    """`docker stop` sends SIGTERM to a container's first process and SIGKILLs it after the grace period. With
    compose's init (tini) that SIGTERM reaches the qcluster's or uvicorn's main process: the "main process" case
    above. The grace period leaves the workers their STOP_GRACE to mark their runs, and uvicorn bounds its wait
    for requests in progress (without it, it waits for ever). (No Docker daemon runs where the tests run: this
    reads the file the daemon would.)"""
    import yaml

    from evaluation.runs.stopping import STOP_GRACE

    compose = yaml.safe_load((Path(__file__).resolve().parents[2] / "compose.yaml").read_text())
    for name in ("worker", "web"):
        service = compose["services"][name]
        assert service["init"] is True, name
        grace = service["stop_grace_period"]
        assert grace.endswith("s") and float(grace[:-1]) >= STOP_GRACE + 5, (name, grace)
    assert compose["services"]["worker"]["command"] == ["python", "manage.py", "qcluster"]
    web = compose["services"]["web"]["command"]
    assert float(web[web.index("--timeout-graceful-shutdown") + 1]) <= STOP_GRACE


@pytest.mark.django_db(transaction=True)
def test_the_web_process_stops_within_seconds_on_sigterm_to_its_group_with_a_socket_open(catalog, tmp_path):
    """uvicorn as compose and the systemd unit run it (2 workers, graceful shutdown bounded at 5 s) with a
    session's WebSocket open: a SIGTERM to the whole group ends every process within the bound (uvicorn closes
    WebSockets on shutdown; the 5 s bound is for HTTP requests in progress, which it would otherwise wait for)."""
    import socket
    import subprocess
    import sys

    import websockets.sync.client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "stop-test-protocol-key"
    env = {**os.environ, **SERVER_ENV, "DATABASE_URL": database_url_for_tests(), "EVAL_PROTOCOL_KEY": key}
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--workers", "2", "--timeout-graceful-shutdown", "5"]
            + ["--port", str(port), "evalproject.asgi:application"],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health/db", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and web.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        answer = httpx.post(
            f"{url}/sessions", json={"topic_id": TOPIC}, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        assert answer.status_code == 201, answer.text
        created = answer.json()
        socket_open = websockets.sync.client.connect(
            f"ws://127.0.0.1:{port}/sessions/ws/{created['session_id']}",
            additional_headers={"Authorization": f"Bearer {created['session_token']}"},
        )
        socket_open.recv(timeout=30)  # the tutor's opening: the socket is live
        assert len(group_members(web.pid)) >= 3, group_members(web.pid)  # the supervisor and its 2 workers
        os.killpg(web.pid, signal.SIGTERM)
        sent = time.monotonic()
        while group_members(web.pid) or web.poll() is None:
            assert time.monotonic() - sent < GONE_WITHIN, log.read_text(errors="replace")[-3000:]
            time.sleep(0.1)
        socket_open.close()
    finally:
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()
