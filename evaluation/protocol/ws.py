"""WebSocket half of the session protocol: a student message in, the tutor's reply out."""

import asyncio
import contextvars
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import DatabaseError, close_old_connections, connection

from evaluation import limits
from evaluation.api.errors import DatabaseBusy, database_unavailable
from evaluation.conf import setting
from evaluation.errors import InvalidInput
from evaluation.models import TutoringSession
from evaluation.protocol import auth
from evaluation.providers import ProviderError
from evaluation.tutoring import selectors, services

DATABASE_BUSY = "database: busy, the turn was not completed; send the message again"
"""The error frame when the database refused a turn (locked, say): the socket stays open and what was
stored stays stored; the server's log has the database's own message."""

DATABASE_UNAVAILABLE = "database: {reason}; the turn was not completed; reconnect in {wait} s and send it again"
"""The error frame when the database cannot be reached (stopped, restarting, the connection lost, the
pool out of connections); the socket then closes with TRY_AGAIN_LATER."""

BINARY_FRAME = "frame: a binary frame; this protocol takes JSON text frames"

TRY_AGAIN_LATER = 1013
"""The WebSocket close code for a passing server condition (RFC 6455's registry: "Try Again Later")."""

log = logging.getLogger(__name__)

_turn_threads: ThreadPoolExecutor | None = None
_turn_threads_lock = threading.Lock()


def _turn_executor() -> ThreadPoolExecutor:
    """The process's threads for tutor turns, EVAL_TUTOR_TURN_THREADS of them. A turn waits on the
    tutor's LLM, so there must be one per session answering at once: asyncio's default pool (cores
    + 4 threads) made the sixth concurrent session's turn wait for a free thread."""
    global _turn_threads
    with _turn_threads_lock:
        if _turn_threads is None:
            _turn_threads = ThreadPoolExecutor(
                max_workers=max(1, int(setting("TUTOR_TURN_THREADS"))), thread_name_prefix="tutor-turn"
            )
        return _turn_threads


def _concurrent(fn: Any) -> Any:
    """Run fn on a tutor-turn thread: a turn waits on an LLM, and sessions must not queue behind each
    other on Django's single thread for sync code.

    On PostgreSQL the thread's connection goes back to the pool after each turn. A SQLite connection
    (a file handle, no server slot) stays with its thread: opening one costs more than the rest of a
    turn's database work, and the threads are a fixed few."""

    def wrapped(*args: Any) -> Any:
        if connection.vendor != "sqlite":
            close_old_connections()
        try:
            return fn(*args)
        finally:
            if connection.vendor != "sqlite":
                close_old_connections()
            elif connection.errors_occurred:
                connection.close()  # a fresh one for the next turn

    async def call(*args: Any) -> Any:
        # A plain executor call with the caller's contextvars: less per turn than asgiref's
        # sync_to_async, which also carries its `Local` storage over (nothing on a turn's path reads
        # one) and, when the socket goes away mid-turn, waits for the turn; here the turn still runs
        # to its end and stores what it stores, and the socket's task ends at once.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_turn_executor(), contextvars.copy_context().run, wrapped, *args)

    return call


_lookup = database_sync_to_async(selectors.session_lookup)


class TutorSessionConsumer(AsyncJsonWebsocketConsumer):
    channel_layer_alias = None
    """No channel layer: a tutor socket hears only its client. With one, Channels gives every socket a
    channel of its own and a receive task on the layer (on Redis, a share of a blocking pop) that
    nothing here ever sends to."""
    authorized = False
    held: TutoringSession | None = None
    """The session as this socket's last turn stored it (the next turn starts from it, reading nothing)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Channels' `__call__` for a consumer without a channel layer, as a plain loop: Channels waits on
        its one source through `await_many_dispatch`, a new task and an `asyncio.wait` for every frame.
        Frames are handled one at a time, in order, as there."""
        self.scope = scope
        self.channel_layer = None
        self.base_send = send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its per-frame `close_old_connections` (a hop to the sync thread
        and back for every frame): this socket touches the database only through `_lookup`, which
        refreshes its connection itself, and the turn threads, which manage theirs (`_concurrent`)."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        self.session_id = str(self.scope["url_route"]["kwargs"]["session_id"])
        await self.accept()  # accepted first, so the refusal can say why and close with a code of its own
        if not auth.session_token_ok(self.session_id, auth.socket_credential(self.scope)):
            await self.send_json({"type": "error", "message": auth.SOCKET_REFUSED})
            await self.close(code=4401)  # before any tutor turn: an anonymous socket costs no LLM call
            return
        self.authorized = True
        try:
            session = await _lookup(self.session_id)
        except DatabaseError as exc:
            await self._database_failed(exc, "lookup")
            return
        if session is None:
            await self.send_json({"type": "error", "message": f"session_id: no session {self.session_id}"})
            await self.close(code=4404)
            return
        await self.send_json({"type": "state_update", "state": selectors.session_public_state(session)})
        if not session.full_conversation_log:
            await self.send_json({"type": "typing"})
            try:
                opened = await _concurrent(services.session_open)(self.session_id, session)
            except ProviderError as exc:
                await self.send_json({"type": "error", "message": f"tutor: {exc}"})
                return
            except DatabaseError as exc:
                await self._database_failed(exc, "opening not stored")
                return
            if opened:
                self.held = opened.session  # the first turn starts from it, reading nothing
                entry = opened.entry
                await self.send_json(
                    {"type": "assistant", "content": entry["content"], "turn": entry["turn"], "is_complete": False}
                )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """A frame: JSON text of a bounded size (Channels' own raises on a binary or empty frame, which
        dropped the socket unanswered). A refused frame gets an `error` frame; the socket stays open."""
        if not self.authorized:
            return  # frames sent before the refusal's close arrived: not even read
        if text_data is None:
            await self.send_json({"type": "error", "message": BINARY_FRAME})
            return
        longest = limits.message_frame_max()
        if len(text_data) > longest:
            message = f"frame: {len(text_data)} characters: the limit is {longest} (EVAL_MESSAGE_MAX_CHARS)"
            await self.send_json({"type": "error", "message": message})
            return
        await self.receive_json(await self.decode_json(text_data))

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "student_message":
            await self.send_json({"type": "error", "message": 'type: expected "student_message"'})
            return
        text = content.get("content")
        if not isinstance(text, str) or not text.strip():
            await self.send_json({"type": "error", "message": "content: a non-empty string is required"})
            return
        most = limits.limit("MESSAGE_MAX_CHARS")
        if len(text) > most:  # refused before it is stored or reaches the tutor's LLM
            message = f"content: {len(text)} characters: the limit is {most} (EVAL_MESSAGE_MAX_CHARS)"
            await self.send_json({"type": "error", "message": message})
            return
        await self.send_json({"type": "typing"})
        try:
            # A turn that fails may leave the held copy ahead of what was stored: the next turn reads anew.
            held, self.held = self.held, None
            done = await _concurrent(services.session_advance)(self.session_id, text.strip(), held)
        except services.SessionComplete as exc:
            await self.send_json({"type": "error", "message": str(exc)})
            return
        except ProviderError as exc:
            await self.send_json({"type": "error", "message": f"tutor: {exc}"})
            return
        except DatabaseError as exc:
            await self._database_failed(exc, "turn not completed")
            return
        self.held = done.session
        await self.send_json(
            {
                "type": "assistant",
                "content": done.entry["content"],
                "turn": done.entry["turn"],
                "is_complete": done.is_complete,
            }
        )
        await self.send_json({"type": "state_update", "state": done.state})

    async def _database_failed(self, exc: DatabaseError, what: str) -> None:
        """One log line and an error frame; a database that cannot be reached also closes the socket
        (TRY_AGAIN_LATER), since every later frame would fail the same way."""
        reason = database_unavailable(exc)
        log.warning("session %s: %s: %s", self.session_id, what, str(exc).strip())
        # retry_after: a client tells this passing condition from the tutor failing, and sends the turn again
        if reason is None:
            await self.send_json({"type": "error", "message": DATABASE_BUSY, "retry_after": DatabaseBusy.wait})
            return
        message = DATABASE_UNAVAILABLE.format(reason=reason.removeprefix("the database is "), wait=DatabaseBusy.wait)
        await self.send_json({"type": "error", "message": message, "retry_after": DatabaseBusy.wait})
        await self.close(code=TRY_AGAIN_LATER)

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        try:
            return orjson.dumps(content).decode()  # the frames in a tenth of json.dumps's time
        except orjson.JSONEncodeError:
            # What orjson refuses and json.dumps writes (a lone surrogate in a tutor's reply, say) is
            # sent as Channels would send it.
            return json.dumps(content)

    async def decode_json(self, text_data: str) -> Any:
        try:
            return limits.json_loads(text_data)
        except InvalidInput:
            return None  # answered as a frame of the wrong type
