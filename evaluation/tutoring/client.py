"""The session-protocol client: drives a conversation between the student simulator and a tutor agent.

Targets: a server speaking the session protocol (REST + WebSocket, docs/session-protocol.md,
the reference tutor included) and an OpenAI-compatible chat endpoint with a system prompt. The
runner reports every message through on_message as it happens, so nothing received is lost if
the conversation breaks, and logs every event to run.log with millisecond timestamps.
"""

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import websockets

from evaluation import limits
from evaluation.conf import setting
from evaluation.errors import PlainMessage
from evaluation.providers import LLM, CostLimitReached, Message, ProviderError
from evaluation.providers.base import AuthError, NoReplyError, RetriesExhausted
from evaluation.tutoring.simulator import StudentSimulator

OnMessage = Callable[[dict[str, Any]], Awaitable[None]]


class RunLog:
    """Append-only run.log with millisecond timestamps.

    The file stays open between lines (a conversation writes five a turn) and each line is flushed
    as it is written, so the log is whole whenever the run stops; close() ends it."""

    def __init__(self, path: Path | None):
        self.path = path
        self._file: IO[str] | None = None
        self._second, self._stamp = -1, ""
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, event: str) -> None:
        if self.path is None:
            return
        if self._file is None:
            self._file = self.path.open("a", encoding="utf-8", buffering=1)
        now = time.time()
        second = int(now)
        if second != self._second:  # strftime once a second: it was most of a line's cost
            self._second, self._stamp = second, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second))
        self._file.write(f"{self._stamp}.{int((now - second) * 1000):03d} {event}\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class TutorUnavailable(PlainMessage, Exception):
    """The tutor could not be reached, closed the conversation or stopped answering."""


@dataclass
class SessionResult:
    messages: list[dict[str, Any]] = field(default_factory=list)
    session_id: str | None = None
    final_state: dict[str, Any] = field(default_factory=dict)
    ended_by: str = ""
    """"max_turns", "is_complete", "tutor_stopped" (the tutor stopped answering: `error` says how) or
    "tutor_unreachable" (the connection to it failed: an infrastructure failure, not a measurement)."""
    error: str | None = None

    @property
    def turns_answered(self) -> int:
        """Student messages the tutor replied to."""
        roles = [m["role"] for m in self.messages]
        return sum(1 for a, b in zip(roles, roles[1:], strict=False) if a == "student" and b == "tutor")

    @property
    def judgeable(self) -> bool:
        """Is there something to judge: at least one tutor reply to something the student said?"""
        roles = [m["role"] for m in self.messages]
        return any(a == "student" and b == "tutor" for a, b in zip(roles, roles[1:], strict=False))


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _http_json(method: str, url: str, body: dict[str, Any] | None, headers: dict[str, str], timeout: float) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json", **headers}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def health_ok(base_url: str, timeout: float = 2.0) -> bool:
    try:
        return _http_json("GET", f"{base_url}/health/db", None, {}, timeout).get("status") == "ok"
    except (OSError, ValueError, urllib.error.URLError):
        return False


HEALTH_KEPT_FOR = 10.0
"""Seconds a tutor that answered its health check is taken as healthy by the next conversations of
this process, so back-to-back runs do not each pay a request for it; a tutor that went down since
still fails the run at `POST /sessions`, with the reason."""

_healthy_at: dict[str, float] = {}


def forget_health(base_url: str) -> None:
    """A server this process stopped: its next check asks again."""
    _healthy_at.pop(base_url, None)


def healthy(base_url: str) -> bool:
    """health_ok, taken from this process's last answer while it is under HEALTH_KEPT_FOR seconds old."""
    if time.monotonic() - _healthy_at.get(base_url, -HEALTH_KEPT_FOR) < HEALTH_KEPT_FOR:
        return True
    if not health_ok(base_url):
        _healthy_at.pop(base_url, None)
        return False
    _healthy_at[base_url] = time.monotonic()
    return True


class Conversation:
    """Shared loop bookkeeping: message numbering, on_message, logging."""

    def __init__(self, on_message: OnMessage, log: RunLog):
        self.on_message = on_message
        self.log = log
        self.result = SessionResult()

    async def add(self, role: str, content: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        message = {
            "turn": len(self.result.messages) + 1,
            "role": role,
            "content": content,
            "timestamp": _now(),
            "metadata": metadata or {},
        }
        self.result.messages.append(message)
        self.log(f"{role.upper()} [{message['turn']}] {content}")
        await self.on_message(message)
        return message

    def stopped(self, reason: str) -> None:
        """The tutor stopped answering: the session ends here, like at max turns, and says why."""
        self.result.ended_by = "tutor_stopped"
        self.result.error = reason
        self.log(f"tutor stopped answering: {reason}")

    def unreachable(self, reason: str) -> None:
        """The connection to the tutor failed mid-conversation (refused, reset, 5xx, an abnormal close):
        what arrived is kept, and the run fails with the reason instead of being judged."""
        self.result.ended_by = "tutor_unreachable"
        self.result.error = reason
        self.log(f"tutor unreachable: {reason}")


def refused_protocol_key(url: str, status: int) -> str:
    """Why a run's reference tutor refused to create a session: the server at url is not this install's."""
    return (
        f"the server at {url} refused this install's protocol key (POST /sessions answered {status}): "
        "it belongs to another install, or the key changed since it started. Point EVAL_SERVER_URL at this "
        "install's tutor server, restart that server with this install's settings, or give both installs the "
        "same EVAL_PROTOCOL_KEY"
    )


CLOSED_AS_PLANNED = (1000,)
"""WebSocket close codes by which a tutor ends a conversation itself (judged as far as it went); any other
close (a dropped connection, 1001 going away, 1011 server error, 1012 restart, 4401 refused) is the tutor
becoming unreachable."""


TRY_AGAIN_CLOSES = (1012, 1013)
"""Close codes that say "come back in a moment" (RFC 6455's registry: 1012 Service Restart, 1013 Try Again
Later; the reference tutor closes with 1013 when its database is away): the conversation reconnects and
sends its unanswered message again, for up to EVAL_RUN_STALE_AFTER."""


class _TryAgain(Exception):
    """The tutor cannot serve the turn now and says to come back (`wait` seconds later)."""

    def __init__(self, reason: str, wait: float):
        super().__init__(reason)
        self.wait = wait


@dataclass
class _Outage:
    """A tutor answering "come back later" since some moment: waited out until `deadline` (monotonic)."""

    deadline: float
    first: str
    """What the tutor said first, for the run's error if it never comes back."""

    async def wait(self, again: _TryAgain, log: RunLog) -> bool:
        """Sleep the wait the tutor asked for (0.5-10 s, never past the deadline) -> whether to try again:
        False once an attempt at or after the deadline failed too."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        pause = min(max(again.wait, 0.5), 10.0, left)
        log(f"tutor says to try again ({again}); trying again in {pause:.1f} s, for up to {left:.0f} s more")
        await asyncio.sleep(pause)
        return True


class ProtocolTarget:
    """A tutor reached as a real student reaches it: POST /sessions, then the WebSocket."""

    def __init__(self, base_url: str, auth_header: str = "", faults: list[str] | None = None):
        """auth_header: the Authorization value sent to create a session (the reference tutor's
        `Bearer <protocol key>`, or an external server's own credential); faults: the degraded tutor's,
        asked of the reference tutor when its session is created."""
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": auth_header} if auth_header else {}
        self.faults = list(faults or ())

    def session_headers(self, created: dict[str, Any]) -> dict[str, str]:
        """What reads the session and opens its socket: its own token when creation returned one
        (the reference tutor does), else the same credential as creation (external servers)."""
        token = created.get("session_token")
        return {"Authorization": f"Bearer {token}"} if isinstance(token, str) and token else self.headers

    @property
    def sends_protocol_key(self) -> bool:
        """Whether this target is reached with this install's protocol key (the reference tutor), not an
        external server's own credential: a refusal then means the server is not this install's."""
        return self.headers.get("Authorization") == f"Bearer {setting('PROTOCOL_KEY')}"

    @property
    def ws_base(self) -> str:
        return "ws" + self.base_url[len("http") :] if self.base_url.startswith("http") else self.base_url

    async def converse(
        self,
        simulator: StudentSimulator,
        topic_id: str,
        *,
        max_turns: int,
        turn_timeout: float,
        on_message: OnMessage,
        log: RunLog,
        on_session: Callable[[str], Awaitable[None]] | None = None,
    ) -> SessionResult:
        """on_session hears the session id as soon as the tutor made one, before any turn."""
        conv = Conversation(on_message, log)
        result = conv.result
        log(f"target {self.base_url}: health check")
        if not await asyncio.to_thread(healthy, self.base_url):
            raise TutorUnavailable(f"tutor unreachable: {self.base_url}/health/db did not answer ok")
        try:
            created = await asyncio.to_thread(
                _http_json,
                "POST",
                f"{self.base_url}/sessions",
                # The run's seed: a tutor that honours it (the reference tutor does) replays the same session.
                {
                    "topic_id": topic_id,
                    "user": "eval-student",
                    "seed": simulator.seed,
                    **({"faults": self.faults} if self.faults else {}),
                },
                self.headers,
                30,
            )
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403) and self.sends_protocol_key:
                raise TutorUnavailable(refused_protocol_key(self.base_url, exc.code)) from exc
            raise TutorUnavailable(
                f"POST /sessions answered HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
            ) from exc
        except OSError as exc:
            raise TutorUnavailable(f"POST /sessions failed: {exc}") from exc
        result.session_id = created["session_id"]
        log(f"session {result.session_id} created")
        if on_session is not None:
            await on_session(result.session_id)
        headers = self.session_headers(created)
        url = f"{self.ws_base}/sessions/ws/{result.session_id}"
        retry_for = float(setting("RUN_STALE_AFTER"))
        outage: _Outage | None = None
        """Set while the tutor answers "come back later" (its database is away, it is restarting)."""
        sent: str | None = None
        """A student message the tutor has not answered yet: sent again on the next socket."""
        opened = False
        turns = 0

        async def on_one_socket() -> None:
            nonlocal outage, sent, opened, turns
            try:
                # max_size: websockets closes with 1009 on a longer frame, before reading it whole
                async with websockets.connect(
                    url,
                    additional_headers=headers,
                    open_timeout=turn_timeout,
                    compression=None,
                    max_size=limits.message_frame_max(),
                ) as ws:
                    log(f"websocket open {url}")
                    reply: dict[str, Any] | None = None
                    if not opened:
                        reply = await self._await_assistant(ws, turn_timeout, log)
                        opened, outage = True, None
                        await conv.add("tutor", reply["content"])
                    elif sent is not None:  # a reconnect: the turn the outage cut short, sent again
                        reply = await self._send(ws, sent, turn_timeout, log)
                        sent, outage = None, None
                        await conv.add("tutor", reply["content"], {"is_complete": bool(reply.get("is_complete"))})
                    while True:
                        if reply is not None and reply.get("is_complete"):
                            result.ended_by = "is_complete"
                            return
                        if turns >= max_turns:
                            result.ended_by = "max_turns"
                            return
                        turns += 1
                        transcript = [{"role": m["role"], "content": m["content"]} for m in result.messages]
                        sent, decision = await simulator.respond(transcript, turns)
                        await conv.add("student", sent, {"turn_decision": decision.as_dict()})
                        reply = await self._send(ws, sent, turn_timeout, log)
                        sent, outage = None, None
                        await conv.add("tutor", reply["content"], {"is_complete": bool(reply.get("is_complete"))})
            except websockets.ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
                if code in TRY_AGAIN_CLOSES:
                    raise _TryAgain(f"the WebSocket closed with code {code}", 1.0) from exc
                raise
            except (OSError, websockets.InvalidHandshake) as exc:
                if outage is None:
                    raise TutorUnavailable(f"WebSocket {url} failed: {exc}") from exc
                # reconnecting through an outage: the tutor's server may be restarting too
                raise _TryAgain(f"WebSocket {url} failed: {exc}", 1.0) from exc

        while True:
            try:
                await on_one_socket()
            except _TryAgain as exc:
                outage = outage or _Outage(time.monotonic() + retry_for, str(exc))
                if await outage.wait(exc, log):
                    continue
                conv.unreachable(
                    f"the tutor could not serve the conversation for {retry_for:g} s (EVAL_RUN_STALE_AFTER): "
                    f"{outage.first}" + (f"; last: {exc}" if str(exc) != outage.first else "")
                )
            except websockets.ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
                if exc.sent is not None and exc.sent.code == 1009:  # the tutor's, not the connection's, fault
                    conv.stopped(
                        f"the tutor sent a frame over {limits.message_frame_max()} bytes (EVAL_MESSAGE_MAX_CHARS)"
                    )
                elif code in CLOSED_AS_PLANNED:
                    conv.stopped(f"the tutor closed the WebSocket (code {code})")
                else:
                    why = {None: "the connection dropped without a close frame", 4401: "credential refused"}
                    conv.unreachable(
                        f"the WebSocket closed abnormally (code {code or 1006}: "
                        f"{why.get(code, exc.rcvd.reason if exc.rcvd else '') or 'no reason given'})"
                    )
            except TutorUnavailable as exc:
                conv.stopped(str(exc))
            break
        log(f"conversation ended: {result.ended_by}" + (f" ({result.error})" if result.error else ""))
        try:
            result.final_state = await asyncio.to_thread(
                _http_json, "GET", f"{self.base_url}/sessions/{result.session_id}", None, headers, 30
            )
        except (OSError, ValueError) as exc:
            log(f"final state not fetched: {exc}")
        return result

    @classmethod
    async def _send(cls, ws: Any, text: str, timeout: float, log: RunLog) -> dict[str, Any]:
        """A student message out, the tutor's reply back."""
        await ws.send(json.dumps({"type": "student_message", "content": text}))
        return await cls._await_assistant(ws, timeout, log)

    @staticmethod
    async def _await_assistant(ws: Any, timeout: float, log: RunLog) -> dict[str, Any]:
        """Frames until the tutor's reply, all within `timeout` (one deadline for the whole wait, not a
        task per frame as asyncio.wait_for would make). An `error` frame with `retry_after` (the tutor's
        database is away, say) raises _TryAgain: the turn is sent again, not taken as the tutor stopping."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    frame = json.loads(await ws.recv())
                    kind = frame.get("type")
                    log(f"ws <- {kind}")
                    if kind == "assistant":
                        content = frame.get("content")
                        if not isinstance(content, str):
                            raise TutorUnavailable("the tutor's reply has no text content")
                        if len(content) > limits.limit("MESSAGE_MAX_CHARS"):
                            raise TutorUnavailable(
                                f"the tutor's reply is {len(content)} characters: the limit is "
                                f"{limits.limit('MESSAGE_MAX_CHARS')} (EVAL_MESSAGE_MAX_CHARS)"
                            )
                        return frame
                    if kind == "error":
                        wait = frame.get("retry_after")
                        if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait >= 0:
                            raise _TryAgain(f"tutor error: {frame.get('message')}", float(wait))
                        raise TutorUnavailable(f"tutor error: {frame.get('message')}")
        except TimeoutError:
            raise TutorUnavailable(f"no tutor reply within {timeout:g}s") from None


class ChatTarget:
    """An OpenAI-compatible chat endpoint with a system prompt: no server, the runner holds the history."""

    def __init__(self, llm: LLM, system_prompt: str):
        self.llm = llm
        self.system_prompt = system_prompt

    async def converse(
        self,
        simulator: StudentSimulator,
        topic_id: str,
        *,
        max_turns: int,
        turn_timeout: float,
        on_message: OnMessage,
        log: RunLog,
        on_session: Callable[[str], Awaitable[None]] | None = None,
    ) -> SessionResult:
        conv = Conversation(on_message, log)
        self.llm.timeout = turn_timeout
        history = [
            Message("system", self.system_prompt),
            Message("user", "(The student has joined. Greet them and begin.)"),
        ]
        conv.result.ended_by = "max_turns"
        for turn in range(max_turns + 1):
            try:
                reply = (await self.llm.acall(history, seed=simulator.seed * 1000 + turn)).text.strip()
            except CostLimitReached:
                raise
            except (RetriesExhausted, AuthError) as exc:
                if isinstance(exc, RetriesExhausted) and isinstance(exc.last, NoReplyError):
                    conv.stopped(f"the tutor's endpoint stopped answering: {exc}")
                else:  # refused, reset, 5xx or 429 through every retry, or the key was refused
                    conv.unreachable(f"the tutor's endpoint is unreachable: {exc}")
                break
            except ProviderError as exc:
                conv.stopped(f"the tutor's endpoint stopped answering: {exc}")
                break
            history.append(Message("assistant", reply))
            await conv.add("tutor", reply)
            if turn == max_turns:
                break
            transcript = [{"role": m["role"], "content": m["content"]} for m in conv.result.messages]
            text, decision = await simulator.respond(transcript, turn + 1)
            history.append(Message("user", text))
            await conv.add("student", text, {"turn_decision": decision.as_dict()})
        return conv.result
