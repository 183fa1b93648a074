"""The tutor socket refuses what it cannot take with an `error` frame and stays open: a binary frame, an
empty one, a frame longer than any message could make, and a student message over EVAL_MESSAGE_MAX_CHARS
(refused before it is stored or reaches the tutor's LLM); the evaluation's client refuses a tutor reply
over the same limit."""

import asyncio
import json

import pytest
import websockets

from evaluation import limits
from evaluation.models import TutoringSession
from tests.protocol.test_credentials import created_on

pytestmark = pytest.mark.django_db(transaction=True)


async def until(ws, kind):
    frames = []
    while not frames or frames[-1]["type"] != kind:
        frames.append(json.loads(await asyncio.wait_for(ws.recv(), 20)))
    return frames


def test_refused_frames_get_an_error_frame_and_the_socket_goes_on(server, settings):
    key = settings.EVALUATION["PROTOCOL_KEY"]
    created = created_on(server, key)
    url = server.replace("http", "ws") + f"/sessions/ws/{created['session_id']}?token={created['session_token']}"
    most = limits.limit("MESSAGE_MAX_CHARS")

    async def talk():
        answers = []
        async with websockets.connect(url, max_size=None) as ws:
            await until(ws, "assistant")  # the opening
            for frame in (
                b"\x00\x01binary",
                "",
                json.dumps({"type": "student_message", "content": "x" * (most + 1)}),
                "x" * (limits.message_frame_max() + 1),
            ):
                await ws.send(frame)
                answers.append((await until(ws, "error"))[-1]["message"])
            await ws.send(json.dumps({"type": "student_message", "content": "Is it 57?"}))
            answers.append((await until(ws, "assistant"))[-1]["type"])
        return answers

    binary, empty, long_message, long_frame, after = asyncio.run(talk())
    assert binary == "frame: a binary frame; this protocol takes JSON text frames"
    assert empty.startswith("body:") or empty.startswith("type:"), empty
    assert long_message == f"content: {most + 1} characters: the limit is {most} (EVAL_MESSAGE_MAX_CHARS)"
    assert long_frame.startswith(f"frame: {limits.message_frame_max() + 1} characters: the limit is")
    assert after == "assistant"
    log = TutoringSession.objects.get(pk=created["session_id"]).full_conversation_log
    assert [m["role"] for m in log] == ["tutor", "student", "tutor"]  # only the message within the limit
