"""A misbehaving tutor that speaks the session protocol, served by uvicorn in fault tests.

FAKE_TUTOR_MODE: "close" closes the socket after the first student message; "silent" never
answers it; "error" answers with an error frame; "stops" answers two student messages, then
never again.
"""

import json
import os
import uuid

DATABASE_AWAY = "database: unavailable: the connection to it was refused or lost; the turn was not completed"
_answered: dict[str, int] = {}  # student messages answered, by session (a reconnect goes on counting)
_refusals = {"outage": 2, "down": 10**9}


async def app(scope, receive, send):
    mode = os.environ.get("FAKE_TUTOR_MODE", "close")
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        while (await receive()).get("more_body"):
            pass
        if scope["path"] == "/health/db":
            body = {"status": "ok"}
        elif scope["path"] == "/sessions" and scope["method"] == "POST":
            body = {"session_id": str(uuid.uuid4()), "is_complete": False}
        else:
            body = {"session_id": scope["path"].rsplit("/", 1)[-1], "is_complete": False}
        data = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 201 if scope["method"] == "POST" else 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})
        return
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        session = scope["path"]
        if session not in _answered or mode not in _refusals:  # the opening, once a session
            await send(
                {
                    "type": "websocket.send",
                    "text": json.dumps({"type": "assistant", "content": "Hello! What is 2 + 3?", "is_complete": False}),
                }
            )
        answered = _answered.setdefault(session, 0)
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            if mode in _refusals:
                if answered >= 2 and _refusals[mode] > 0:
                    _refusals[mode] -= 1
                    frame = {"type": "error", "message": DATABASE_AWAY, "retry_after": 0}
                    await send({"type": "websocket.send", "text": json.dumps(frame)})
                    await send({"type": "websocket.close", "code": 1013})
                    return
                answered = _answered[session] = answered + 1
                reply = {"type": "assistant", "content": f"Right. Next: what is {answered} + 5?", "is_complete": False}
                await send({"type": "websocket.send", "text": json.dumps(reply)})
                continue
            if mode == "stops" and answered < 2:
                answered += 1
                reply = {
                    "type": "assistant",
                    "content": f"Good try. Next: what is {answered} + 4?",
                    "is_complete": False,
                }
                await send({"type": "websocket.send", "text": json.dumps(reply)})
                continue
            if mode == "close":
                await send({"type": "websocket.close", "code": 1011})
                return
            if mode == "error":
                await send(
                    {"type": "websocket.send", "text": json.dumps({"type": "error", "message": "tutor crashed"})}
                )
            # "silent": say nothing
