"""The session protocol of the reference tutor, driven by the websockets client against uvicorn."""

import asyncio
import json
import urllib.error
import urllib.request
import uuid

import pytest
import websockets
from django.conf import settings

from evaluation.protocol.auth import session_token

pytestmark = pytest.mark.django_db(transaction=True)


def http(method, url, body=None, token=None):
    """A request with the credential the protocol asks for: the protocol key to create a session,
    the session's token (from creation, or derived for an id that does not exist) to read one."""
    if token is None:
        token = settings.EVALUATION["PROTOCOL_KEY"] if method == "POST" else session_token(url.rsplit("/", 1)[1])
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_health_and_session_rest(server):
    assert http("GET", f"{server}/health/db") == (
        200,
        {"status": "ok", "database": http("GET", f"{server}/health/db")[1]["database"]},
    )
    status, created = http("POST", f"{server}/sessions", {"topic_id": "comparing-decimals"})
    assert status == 201 and created["user"] == "eval-student" and created["problem_count"] == 8
    status, state = http("GET", f"{server}/sessions/{created['session_id']}")
    assert status == 200 and state["full_conversation_log"] == [] and state["is_complete"] is False


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        ({"topic_id": "no-such-topic"}, 404, "no topic 'no-such-topic'"),
        ({}, 400, "topic_id: is required"),
        ({"topic_id": "comparing-decimals", "seed": "7"}, 400, "seed: must be an integer"),
        ({"topic_id": "comparing-decimals", "seed": True}, 400, "seed: must be an integer"),
    ],
)
def test_session_create_bad_input(server, body, code, needle):
    status, answer = http("POST", f"{server}/sessions", body)
    assert status == code and needle in answer["error"]


def test_a_seeded_session_has_the_same_exercises_every_time(server):
    """A seed (a simulated run's) decides the exercises; sessions without one differ by their id."""
    from evaluation.models import TutoringSession

    ids = [http("POST", f"{server}/sessions", {"topic_id": "comparing-decimals", "seed": 5})[1]["session_id"]]
    ids += [http("POST", f"{server}/sessions", {"topic_id": "comparing-decimals", "seed": 5})[1]["session_id"]]
    ids += [http("POST", f"{server}/sessions", {"topic_id": "comparing-decimals"})[1]["session_id"]]
    problems = [TutoringSession.objects.get(pk=i).state["problems"] for i in ids]
    assert problems[0] == problems[1] != problems[2]


def test_unknown_session_is_404(server):
    status, answer = http("GET", f"{server}/sessions/{uuid.uuid4()}")
    assert status == 404 and "no session" in answer["error"]


async def frames_until(ws, kind, timeout=10):
    seen = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        seen.append(frame)
        if frame["type"] == kind:
            return seen


def test_websocket_conversation(server):
    _, created = http("POST", f"{server}/sessions", {"topic_id": "two-digit-addition-regrouping"})
    url = server.replace("http", "ws") + f"/sessions/ws/{created['session_id']}?token={created['session_token']}"

    async def talk():
        async with websockets.connect(url) as ws:
            opening = await frames_until(ws, "assistant")
            assert [f["type"] for f in opening] == ["state_update", "typing", "assistant"]
            question = opening[-1]["content"]
            assert question.startswith("Hi!") and "What is" in question
            a, b = (int(x) for x in question.split("What is ")[1].rstrip("?").split(" + "))
            await ws.send(json.dumps({"type": "student_message", "content": f"It's {a + b}"}))
            reply = await frames_until(ws, "assistant")
            assert [f["type"] for f in reply] == ["typing", "assistant"]
            assert reply[-1]["is_complete"] is False and str(a + b) in reply[-1]["content"] and reply[-1]["turn"] == 3
            state = json.loads(await ws.recv())
            assert state["type"] == "state_update" and state["state"]["problem_index"] == 1
            await ws.send("not json")
            assert json.loads(await ws.recv()) == {"type": "error", "message": 'type: expected "student_message"'}
            await ws.send(json.dumps({"type": "student_message", "content": "  "}))
            assert "content: a non-empty string" in json.loads(await ws.recv())["message"]

    asyncio.run(talk())
    _, state = http("GET", f"{server}/sessions/{created['session_id']}")
    assert [m["role"] for m in state["full_conversation_log"]] == ["tutor", "student", "tutor"]
    assert [m["role"] for m in state["conversation_history"]] == ["teacher", "student", "teacher"]


def test_two_sockets_taking_turns_on_one_session_keep_every_message_in_order(server):
    """A socket keeps its session between turns instead of reading it again; a turn on another socket
    in between must not be overwritten by the first socket's next turn."""
    _, created = http("POST", f"{server}/sessions", {"topic_id": "two-digit-addition-regrouping"})
    url = server.replace("http", "ws") + f"/sessions/ws/{created['session_id']}?token={created['session_token']}"

    async def say(ws, text):
        await ws.send(json.dumps({"type": "student_message", "content": text}))
        reply = (await frames_until(ws, "assistant"))[-1]
        await frames_until(ws, "state_update")
        return reply["turn"]

    async def talk():
        async with websockets.connect(url) as first:
            await frames_until(first, "assistant")
            assert await say(first, "one") == 3
            assert await say(first, "two") == 5
            async with websockets.connect(url) as second:
                await frames_until(second, "state_update")
                assert await say(second, "three") == 7
            assert await say(first, "four") == 9

    asyncio.run(talk())
    _, state = http("GET", f"{server}/sessions/{created['session_id']}")
    log = state["full_conversation_log"]
    assert [m["content"] for m in log if m["role"] == "student"] == ["one", "two", "three", "four"]
    assert [m["turn"] for m in log] == list(range(1, 10))
    assert [m["role"] for m in log] == ["tutor", "student"] * 4 + ["tutor"]
    assert len(state["conversation_history"]) == 9
    # "four" was answered from the session as stored, not from the first socket's copy of it
    assert state["turn"] == 5, state  # the opening and four answers


def test_websocket_unknown_session_closes_with_4404(server):
    async def talk():
        unknown = uuid.uuid4()
        url = server.replace("http", "ws") + f"/sessions/ws/{unknown}?token={session_token(unknown)}"
        async with websockets.connect(url) as ws:
            frame = json.loads(await ws.recv())
            assert frame["type"] == "error" and "no session" in frame["message"]
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 4404

    asyncio.run(talk())


@pytest.mark.parametrize(
    "topic_id",
    ["two-digit-addition-regrouping", "adding-fractions-like-denominators", "comparing-decimals", "area-and-perimeter"],
)
def test_an_exercise_as_stored_in_the_session_state_carries_every_field(topic_id):
    from dataclasses import asdict

    from evaluation.tutoring.exercises import exercises_for

    for exercise in exercises_for(topic_id, "seed", 5):
        assert exercise.as_dict() == asdict(exercise)


def test_a_healthy_tutor_is_checked_once_for_back_to_back_conversations_and_a_failed_check_is_not_kept(monkeypatch):
    import http.server
    import threading

    from evaluation.tutoring import client

    asked = []

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            body = json.dumps({"status": "ok" if len(asked) < 3 else "down"}).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert client.healthy(url) and client.healthy(url) and asked == ["/health/db"]
        monkeypatch.setattr(client, "HEALTH_KEPT_FOR", 0.0)
        assert client.healthy(url) and len(asked) == 2
        monkeypatch.setattr(client, "HEALTH_KEPT_FOR", 10.0)
        client.forget_health(url)
        assert not client.healthy(url) and not client.healthy(url) and len(asked) == 4
    finally:
        server.shutdown()
        client.forget_health(url)
