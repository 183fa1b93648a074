"""The scale-out configuration for real: Redis as django-q2's broker and the Channels layer, a
uvicorn web process and a separate qcluster worker. A staff browser's WebSocket at /ws/runs/
receives the run's progress as the worker broadcasts it."""

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from rest_framework.authtoken.models import Token

from evaluation.tutoring.server import managed_server
from tests.servers import SERVER_ENV, database_url_for_tests, qcluster_worker, redis_server

ROOT = Path(__file__).resolve().parents[2]
REDIS = shutil.which("redis-server")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (.ci/run installs it)"),
]


@pytest.fixture
def redis_url(tmp_path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


def test_worker_progress_reaches_a_staff_websocket_through_redis(catalog, staff_user, client, redis_url, tmp_path):
    env = {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "DATABASE_URL": database_url_for_tests(),
        "REDIS_URL": redis_url,
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
    }
    token = Token.objects.create(user=staff_user).key
    client.force_login(staff_user)
    session_cookie = client.cookies["sessionid"].value
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        with qcluster_worker({**env, "EVAL_SERVER_URL": url}, tmp_path / "worker.log"):

            async def watch() -> list[dict]:
                headers = {"Cookie": f"sessionid={session_cookie}", "Origin": url}
                async with websockets.connect(
                    url.replace("http", "ws") + "/ws/runs/", additional_headers=headers
                ) as ws:
                    loop = asyncio.get_running_loop()
                    response = await loop.run_in_executor(None, start_run, url, token)
                    assert response["status"] == "queued", response
                    events = []
                    while True:
                        event = json.loads(await asyncio.wait_for(ws.recv(), 60))
                        events.append(event)
                        if event["run_id"] == response["run_id"] and event["status"] in ("completed", "failed"):
                            return events

            events = asyncio.run(watch())
    stages = [e["status"] for e in events]
    assert stages[-1] == "completed", (events[-1], (tmp_path / "worker.log").read_text()[-2000:])
    assert "running_session" in stages and "evaluating" in stages
    # In the order they happened; turns within a second of each other are paced to the newest
    # (tests/runs/test_broadcast.py), and the last turn's progress leaves before the next stage.
    details = [e["detail"] for e in events if e["run_id"] == events[-1]["run_id"]]
    assert details.index("Turn 3/3") < details.index("Judging the conversation"), details


def start_run(url: str, token: str) -> dict:
    import urllib.request

    body = json.dumps({"topic_id": "comparing-decimals", "persona_file": "ace", "max_turns": 3, "seed": 5}).encode()
    request = urllib.request.Request(
        f"{url}/api/evaluation/start",
        data=body,
        method="POST",
        headers={"content-type": "application/json", "Authorization": f"Token {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_anonymous_websocket_is_refused(catalog, redis_url, tmp_path):
    env = {**SERVER_ENV, "DATABASE_URL": database_url_for_tests(), "REDIS_URL": redis_url}
    with managed_server(env, log_path=tmp_path / "web.log") as url:

        async def connect() -> int:
            try:
                async with websockets.connect(url.replace("http", "ws") + "/ws/runs/"):
                    return 101
            except websockets.InvalidStatus as exc:
                return exc.response.status_code

        assert asyncio.run(connect()) == 403  # refused at the handshake: closed before accept
