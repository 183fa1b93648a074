"""The reference tutor answers many sessions at once: each turn waits on the tutor's LLM on a thread of
its own, so the sessions' turns overlap instead of queueing for a few shared threads."""

import asyncio
import json

import pytest
import websockets

from evaluation.tutoring.server import managed_server
from tests.protocol.test_credentials import created_on
from tests.servers import SERVER_ENV, database_url_for_tests

pytestmark = pytest.mark.django_db(transaction=True)

SESSIONS = 18


async def _assistant(ws) -> dict:
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert frame["type"] != "error", frame
        if frame["type"] == "assistant":
            return frame


def test_eighteen_sessions_turns_wait_on_their_llm_at_the_same_time(catalog, loopback, settings, tmp_path):
    env = {
        **SERVER_ENV,
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_TUTOR_PROVIDER": f"openai/tutor@{loopback.openai_url}",
        "EVAL_LLM_CONCURRENCY": "64",  # the per-provider bound on calls at once (8 by default) is not under test
        # nor is the web pool's 2 s wait for a connection: eighteen turns store at once, and on a loaded machine
        # (CI at load 10) some waited longer than 2 s and were told the database was busy
        "EVAL_DB_POOL_TIMEOUT": "60",
    }
    key = settings.EVALUATION["PROTOCOL_KEY"]
    with managed_server(env, log_path=tmp_path / "server.log") as url:
        created = [created_on(url, key) for _ in range(SESSIONS)]

        async def talk() -> list[dict]:
            sockets = [
                await websockets.connect(
                    url.replace("http", "ws") + f"/sessions/ws/{c['session_id']}?token={c['session_token']}"
                )
                for c in created
            ]
            try:
                await asyncio.gather(*(_assistant(ws) for ws in sockets))  # every opening
                loopback.reset()  # count the turns only
                # Long enough for every turn to be sent while the first waits, on a loaded 2-core machine
                # too (at 1 s, 17 of 18 were once seen waiting together while other tests ran).
                loopback.latency = 3.0
                for ws in sockets:
                    await ws.send(json.dumps({"type": "student_message", "content": "Is it 42?"}))
                return await asyncio.gather(*(_assistant(ws) for ws in sockets))
            finally:
                for ws in sockets:
                    await ws.close()

        replies = asyncio.run(talk())
    assert all(r["content"] for r in replies)
    assert loopback.count("chat") == SESSIONS
    # All eighteen of the tutor's LLM calls were waiting at once. On asyncio's default pool (cores + 4
    # threads: six on two cores), what the turns ran on before, at most six were.
    assert loopback.most_at_once == SESSIONS, loopback.most_at_once
