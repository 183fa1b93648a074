"""Live progress over a real Redis: a staff WebSocket on /ws/runs/ that stays quiet for longer than
redis-py's socket timeout still receives the event a worker broadcasts at the end."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from evaluation.models import EvaluationRun
from evaluation.tutoring.server import managed_server
from tests.servers import SERVER_ENV, database_url_for_tests, redis_server

ROOT = Path(__file__).resolve().parents[2]
REDIS = shutil.which("redis-server")
QUIET_SECONDS = 30
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (.ci/run installs it)"),
]


@pytest.fixture
def redis_url(tmp_path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


BROADCAST = """
from evaluation.models import EvaluationRun
from evaluation.runs.broadcast import broadcast
run = EvaluationRun.objects.get(run_id="quiet_run")
run.detail = "Turn 9/9"
broadcast(run)
"""


def test_a_quiet_staff_websocket_still_receives_progress_through_redis(staff_user, client, redis_url, tmp_path):
    EvaluationRun.objects.create(run_id="quiet_run", status="running", stage="running_session", detail="Turn 9/9")
    env = {**SERVER_ENV, "DATABASE_URL": database_url_for_tests(), "REDIS_URL": redis_url}
    client.force_login(staff_user)
    session_cookie = client.cookies["sessionid"].value
    with managed_server(env, log_path=tmp_path / "web.log") as url:

        def worker_broadcasts() -> None:
            # Another process, as a worker is: the project's settings with REDIS_URL, through broadcast().
            done = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", BROADCAST],
                cwd=ROOT,
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr[-2000:]

        async def watch() -> dict:
            headers = {"Cookie": f"sessionid={session_cookie}", "Origin": url}
            async with websockets.connect(url.replace("http", "ws") + "/ws/runs/", additional_headers=headers) as ws:
                started = time.monotonic()
                try:
                    early = await asyncio.wait_for(ws.recv(), QUIET_SECONDS)
                    pytest.fail(f"an event arrived while nothing was sent: {early}")
                except TimeoutError:
                    pass
                except websockets.ConnectionClosed as exc:
                    log = (tmp_path / "web.log").read_text(errors="replace")[-2000:]
                    pytest.fail(
                        f"the server closed the quiet WebSocket after {time.monotonic() - started:.1f} s "
                        f"({exc}); server log:\n{log}"
                    )
                await asyncio.get_running_loop().run_in_executor(None, worker_broadcasts)
                return json.loads(await asyncio.wait_for(ws.recv(), 20))

        event = asyncio.run(watch())
    assert event["run_id"] == "quiet_run" and event["detail"] == "Turn 9/9", event
