"""The reference tutor answers many sessions at once: each turn waits on the tutor's LLM on a thread of
its own, so the sessions' turns overlap instead of queueing for a few shared threads."""

import asyncio
import json
import time

import pytest
import websockets

from evaluation.tutoring.server import managed_server
from tests.protocol.test_credentials import created_on
from tests.servers import SERVER_ENV, database_url_for_tests

pytestmark = pytest.mark.django_db(transaction=True)

SESSIONS = 18
LATENCY = 0.5


async def _assistant(ws) -> dict:
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert frame["type"] != "error", frame
        if frame["type"] == "assistant":
            return frame


def test_eighteen_sessions_turns_overlap_on_one_web_process(catalog, loopback, settings, tmp_path):
    env = {
        **SERVER_ENV,
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_TUTOR_PROVIDER": f"openai/tutor@{loopback.openai_url}",
        "EVAL_LLM_CONCURRENCY": "64",  # the per-provider bound on calls at once (8 by default) is not under test
    }
    key = settings.EVALUATION["PROTOCOL_KEY"]
    with managed_server(env, log_path=tmp_path / "daphne.log") as url:
        created = [created_on(url, key) for _ in range(SESSIONS)]
        loopback.latency = LATENCY

        async def talk() -> float:
            sockets = [
                await websockets.connect(
                    url.replace("http", "ws") + f"/sessions/ws/{c['session_id']}?token={c['session_token']}"
                )
                for c in created
            ]
            try:
                await asyncio.gather(*(_assistant(ws) for ws in sockets))  # every opening
                started = time.perf_counter()
                for ws in sockets:
                    await ws.send(json.dumps({"type": "student_message", "content": "Is it 42?"}))
                replies = await asyncio.gather(*(_assistant(ws) for ws in sockets))
                elapsed = time.perf_counter() - started
                assert all(r["content"] for r in replies)
                return elapsed
            finally:
                for ws in sockets:
                    await ws.close()

        elapsed = asyncio.run(talk())
    # Eighteen turns of 0.5 s each: together about 0.5 s. Queued on six threads (asyncio's default
    # pool on two cores, what the turns ran on before) they took three rounds, at least 1.5 s.
    assert elapsed < 2.4 * LATENCY, f"18 concurrent turns took {elapsed:.2f}s"
