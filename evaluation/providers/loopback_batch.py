"""The batch APIs on the loopback server: OpenAI's (files, batches, output file) and Anthropic's Message
Batches. Each request in a batch is answered as the matching single endpoint would answer it.

A batch's lines are answered when it is created (through the server's script, responder and faults,
exactly as the single endpoints answer); it then reports itself in progress for `polls_to_end`
retrievals before it ends, so a test can stop the process that waits on it. Lines whose custom id is
in `fail_ids` (or whose scripted reply has an error status) end as failed lines.

Strict as the vendors are: Anthropic refuses a batch whose request is not a BatchCreateParams (its
params a MessageCreateParamsNonStreaming), whose custom ids do not match ^[a-zA-Z0-9_-]{1,64}$ or repeat;
OpenAI fails a batch (status "failed", its errors naming the line) whose input file has a line whose body
is not the endpoint's request type, or a custom id twice. Anthropic counts no line (succeeded, errored)
until the whole batch has ended; OpenAI counts its completed lines as it goes.

What a batch's fate is, tests script with `fates` (one per batch created, in order): "failed" (OpenAI:
the batch fails as a whole, for an enqueued-token limit, and nothing is answered; Anthropic refuses such a
batch at creation, 413), "expired" (half its lines are answered, the rest expire), "cancelled" (as if
cancelled at the vendor: half answered, the rest cancelled). POST .../cancel cancels a batch on request, as the vendors' cancel endpoints do.
"""

import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

OPENAI_URLS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}
ANTHROPIC_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
FATES = ("failed", "expired", "cancelled")
ENQUEUED_LIMIT = (
    "Enqueued token limit reached for {model} in organization org-loopback. Please try again once some "
    "in_progress batches have been completed."
)


@dataclass
class LoopbackBatch:
    """One batch as the loopback server keeps it."""

    id: str
    vendor: str
    """"openai" or "anthropic"."""
    endpoint: str
    lines: list[dict[str, Any]]
    """The answered lines, in the vendor's output shape."""
    failed: int
    created_at: int
    polls: int = 0
    input_file_id: str = ""
    output_file_id: str = ""
    error_file_id: str = ""
    fate: str = ""
    """"" (it completes), or one of FATES."""
    unfinished: list[str] = field(default_factory=list)
    """Custom ids its fate leaves unanswered (expired or cancelled)."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI's batch-level errors (a batch that failed as a whole)."""


@dataclass
class BatchDesk:
    """The batch state of one loopback server, and the knobs tests turn (put back with reset())."""

    polls_to_end: int = 0
    """Retrievals a batch answers "in progress" before it ends."""
    fail_ids: set[str] = field(default_factory=set)
    """Custom ids whose line fails (a 500 for that request)."""
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, LoopbackBatch] = field(default_factory=dict)
    fates: deque[str] = field(default_factory=deque)
    """What becomes of the next batches created, one each (FATES); empty: they complete."""
    creates: int = 0
    """Batches created since the last reset."""
    polls: int = 0
    """Retrievals of any batch since the last reset."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def reset(self) -> None:
        with self.lock:
            self.polls_to_end = 0
            self.fail_ids = set()
            self.fates.clear()
            self.files.clear()
            self.batches.clear()
            self.creates = 0
            self.polls = 0

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_loopback{next(self.counter)}"


@dataclass(frozen=True)
class Route:
    """A further endpoint of the loopback server: answer(match, raw body, headers) gives (status, JSON-able
    payload or bytes, content type)."""

    method: str
    path: re.Pattern[str]
    answer: Callable[[re.Match[str], bytes, Any], tuple[int, Any, str]]


def install(server: Any) -> BatchDesk:
    """Add the batch endpoints to server.routes; the desk they keep their files and batches on (tests read and
    set it as server.batch_desk)."""
    desk = BatchDesk()

    def route(method: str, path: str, answer: Any) -> None:
        server.routes.append(Route(method, re.compile(path), answer))

    route("POST", r"/v1/files", lambda m, raw, h: _file_create(desk, raw, h))
    route("GET", r"/v1/files/(?P<id>[^/]+)/content", lambda m, raw, h: _file_content(desk, m["id"]))
    route("POST", r"/v1/batches", lambda m, raw, h: _openai_create(server, desk, raw))
    route("GET", r"/v1/batches/(?P<id>[^/]+)", lambda m, raw, h: _openai_retrieve(desk, m["id"]))
    route("POST", r"/v1/messages/batches", lambda m, raw, h: _anthropic_create(server, desk, raw))
    route(
        "GET",
        r"/v1/messages/batches/(?P<id>[^/]+)/results",
        lambda m, raw, h: _anthropic_results(desk, m["id"]),
    )
    route("GET", r"/v1/messages/batches/(?P<id>[^/]+)", lambda m, raw, h: _anthropic_retrieve(server, desk, m["id"]))
    route("POST", r"/v1/batches/(?P<id>[^/]+)/cancel", lambda m, raw, h: _cancel(server, desk, m["id"], "openai"))
    route(
        "POST",
        r"/v1/messages/batches/(?P<id>[^/]+)/cancel",
        lambda m, raw, h: _cancel(server, desk, m["id"], "anthropic"),
    )
    return desk


def _fate(desk: BatchDesk) -> str:
    with desk.lock:
        return desk.fates.popleft() if desk.fates else ""


def _cancel(server: Any, desk: BatchDesk, batch_id: str, vendor: str) -> tuple[int, Any, str]:
    """Cancel a batch on request: the lines it had not ended stay unanswered (here: half of them)."""
    with desk.lock:
        batch = desk.batches.get(batch_id)
        if batch is None or batch.vendor != vendor:
            return _not_found(vendor, batch_id)
        if batch.polls > desk.polls_to_end or batch.fate:
            return _error(400, f"batch {batch_id} has already ended or is being cancelled")
        batch.fate = "cancelled"
        _leave_unfinished(batch)
    if vendor == "anthropic":
        return 200, _anthropic_object(server, batch, ended=False), "application/json"
    return 200, _openai_object(batch, ended=False), "application/json"


def _unfinished_by(fate: str, custom_ids: list[Any]) -> list[Any]:
    """The lines an expired or cancelled batch leaves unprocessed: its second half."""
    return custom_ids[len(custom_ids) // 2 :] if fate in ("expired", "cancelled") else []


def _leave_unfinished(batch: LoopbackBatch) -> None:
    """An expired or cancelled batch: its second half of answered lines is taken back as unfinished."""
    ids = [line["custom_id"] for line in batch.lines]
    batch.unfinished = ids[len(ids) // 2 :]
    batch.lines = [line for line in batch.lines if line["custom_id"] not in set(batch.unfinished)]


def _not_found(vendor: str, batch_id: str) -> tuple[int, Any, str]:
    if vendor == "anthropic":
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}, "application/json"
    return _error(404, f"no batch {batch_id}")


def _error(status: int, message: str) -> tuple[int, Any, str]:
    return status, {"error": {"message": message, "type": "invalid_request_error"}}, "application/json"


def _anthropic_error(status: int, message: str) -> tuple[int, Any, str]:
    return status, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}, "application/json"


def _line_problem(endpoint: str, body: Any) -> str | None:
    """Why the vendor would refuse this batch line's request (None when it would take it)."""
    from evaluation.providers import sdk_types
    from evaluation.providers.loopback_checks import request_problem

    if not isinstance(body, dict):
        return "body: must be an object"
    problem = request_problem(endpoint, body)
    if problem is None:
        return None
    if isinstance(problem, str):
        return problem
    return sdk_types.anthropic_error(problem) if endpoint == "messages" else sdk_types.openai_error(problem)[0]


def _answer(server: Any, endpoint: str, body: dict[str, Any], fail: bool) -> tuple[int, Any]:
    """(status, body) as the single endpoint would answer this request."""
    reply = server._next_reply(endpoint, body)
    if fail or reply.status != 200 or reply.fault:
        status = reply.status if reply.status != 200 else 500
        return status, {"message": reply.error_message or f"loopback error {status}"}
    if reply.text is not None:
        text = reply.text
    else:
        text = json.dumps(reply.json if reply.json is not None else {})
    if endpoint == "messages":
        return 200, server._anthropic_message(body, reply, text)
    if endpoint == "responses":
        return 200, server._responses(body, reply, text)
    return 200, server._chat(body, reply, text)


# --- OpenAI ---------------------------------------------------------------------------------------
def _file_create(desk: BatchDesk, raw: bytes, headers: Any) -> tuple[int, Any, str]:
    content_type = headers.get("content-type", "")
    message = BytesParser(policy=HTTP).parsebytes(f"content-type: {content_type}\r\n\r\n".encode() + raw)
    data, filename, purpose = b"", "input.jsonl", ""
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        content = payload if isinstance(payload, bytes) else b""
        if name == "file":
            data = content
            filename = part.get_filename() or filename
        elif name == "purpose":
            purpose = content.decode()
    if purpose != "batch":
        return _error(400, f"purpose must be 'batch', got {purpose!r}")
    with desk.lock:
        file_id = desk.next_id("file")
        desk.files[file_id] = data
    return 200, _file_object(file_id, len(data), filename, purpose), "application/json"


def _file_object(file_id: str, size: int, filename: str, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
    }


def _file_content(desk: BatchDesk, file_id: str) -> tuple[int, Any, str]:
    with desk.lock:
        data = desk.files.get(file_id)
    if data is None:
        return _error(404, f"no file {file_id}")
    return 200, data, "application/octet-stream"


def _openai_create(server: Any, desk: BatchDesk, raw: bytes) -> tuple[int, Any, str]:
    from evaluation.providers import sdk_types

    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError:
        return _error(400, "request body is not JSON")
    problem = sdk_types.check(body, sdk_types.request_type("openai_batch")) if server.strict else None
    if problem is not None:
        return _error(400, sdk_types.openai_error(problem)[0])
    endpoint = OPENAI_URLS.get(body.get("endpoint", ""))
    if endpoint is None:
        return _error(400, f"endpoint {body.get('endpoint')!r} is not one of {', '.join(OPENAI_URLS)}")
    with desk.lock:
        data = desk.files.get(body.get("input_file_id", ""))
        fail_ids = set(desk.fail_ids)
    if data is None:
        return _error(404, f"no file {body.get('input_file_id')!r}")
    outputs, errors = [], []
    fate = _fate(desk)
    parsed, invalid, seen = [], [], set()
    for n, text in enumerate(data.decode().splitlines(), start=1):
        if not text.strip():
            continue
        line = json.loads(text)
        if line.get("method") != "POST" or line.get("url") != body["endpoint"]:
            return _error(400, f"line {n}: method and url must be POST {body['endpoint']}")
        why = _line_problem(endpoint, line.get("body")) if server.strict else None
        if line.get("custom_id") in seen:
            why = f"The custom_id {line.get('custom_id')!r} is used more than once; custom ids must be unique."
        seen.add(line.get("custom_id"))
        if why is not None:
            invalid.append({"code": "invalid_request", "line": n, "message": why, "param": "body"})
        parsed.append((n, line))
    if invalid or fate == "failed":
        # OpenAI validates the input file before it runs anything: one bad line fails the whole batch.
        model = next((line["body"].get("model") for _, line in parsed if isinstance(line.get("body"), dict)), "")
        errors_of = invalid or [
            {"code": "token_limit_exceeded", "line": None, "message": ENQUEUED_LIMIT.format(model=model), "param": None}
        ]
        with desk.lock:
            desk.creates += 1
            batch = LoopbackBatch(
                id=desk.next_id("batch"),
                vendor="openai",
                endpoint=body["endpoint"],
                lines=[],
                failed=0,
                created_at=int(time.time()),
                input_file_id=body["input_file_id"],
                fate="failed",
                errors=errors_of,
            )
            desk.batches[batch.id] = batch
        return 200, _openai_object(batch, ended=False), "application/json"
    unfinished = _unfinished_by(fate, [line["custom_id"] for _, line in parsed])
    for n, line in parsed:
        if line["custom_id"] in unfinished:
            continue  # its fate leaves it unprocessed: never answered
        status, answer = _answer(server, endpoint, line["body"], line["custom_id"] in fail_ids)
        request_id = f"req_loopback{n}"
        if status == 200:
            outputs.append(
                {
                    "id": f"batch_req_{n}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": 200, "request_id": request_id, "body": answer},
                    "error": None,
                }
            )
        else:
            errors.append(
                {
                    "id": f"batch_req_{n}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": status, "request_id": request_id, "body": {"error": answer}},
                    "error": None,
                }
            )
    with desk.lock:
        desk.creates += 1
        batch = LoopbackBatch(
            id=desk.next_id("batch"),
            vendor="openai",
            endpoint=body["endpoint"],
            lines=outputs,
            failed=len(errors),
            created_at=int(time.time()),
            input_file_id=body["input_file_id"],
        )
        batch.errors = errors
        batch.fate, batch.unfinished = fate, unfinished
        desk.batches[batch.id] = batch
    return 200, _openai_object(batch, ended=False), "application/json"


def _openai_files(desk: BatchDesk, batch: LoopbackBatch) -> None:
    """Write an ended batch's output and error files (once): answered lines, failed lines, and the lines its
    fate left unfinished (batch_expired, batch_cancelled)."""
    if batch.output_file_id or batch.error_file_id or batch.fate == "failed":
        return
    code = {"expired": "batch_expired", "cancelled": "batch_cancelled"}.get(batch.fate, "")
    message = {
        "batch_expired": "This request could not be executed before the completion window expired.",
        "batch_cancelled": "This request was not executed because the batch was cancelled.",
    }.get(code, "")
    unfinished = [
        {"id": f"batch_req_u{n}", "custom_id": cid, "response": None, "error": {"code": code, "message": message}}
        for n, cid in enumerate(batch.unfinished)
    ]
    errors = batch.errors + unfinished
    if batch.lines:
        batch.output_file_id = desk.next_id("file")
        desk.files[batch.output_file_id] = _jsonl(batch.lines)
    if errors:
        batch.error_file_id = desk.next_id("file")
        desk.files[batch.error_file_id] = _jsonl(errors)


def _openai_retrieve(desk: BatchDesk, batch_id: str) -> tuple[int, Any, str]:
    with desk.lock:
        batch = desk.batches.get(batch_id)
        if batch is None or batch.vendor != "openai":
            return _error(404, f"no batch {batch_id}")
        batch.polls += 1
        desk.polls += 1
        ended = batch.polls > desk.polls_to_end or batch.fate == "failed"
        if ended:
            _openai_files(desk, batch)
    return 200, _openai_object(batch, ended=ended), "application/json"


def _openai_object(batch: LoopbackBatch, *, ended: bool) -> dict[str, Any]:
    total = len(batch.lines) + batch.failed + len(batch.unfinished)
    if batch.fate == "failed":
        total = 0  # validation failed: nothing ran
    ending = {"failed": "failed", "expired": "expired", "cancelled": "cancelled"}.get(batch.fate, "completed")
    running = "cancelling" if batch.fate == "cancelled" else ("validating" if batch.polls == 0 else "in_progress")
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": {"object": "list", "data": batch.errors} if batch.fate == "failed" else None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": ending if ended else running,
        "output_file_id": (batch.output_file_id or None) if ended else None,
        "error_file_id": (batch.error_file_id or None) if ended else None,
        "created_at": batch.created_at,
        "completed_at": int(time.time()) if ended and ending == "completed" else None,
        "request_counts": {
            "total": total,
            "completed": len(batch.lines) if ended else _share(len(batch.lines), batch.polls),
            "failed": batch.failed + len(batch.unfinished) if ended else 0,
        },
        "metadata": None,
    }


def _share(n: int, polls: int) -> int:
    """Lines reported done while in progress: some, so a waiting run shows movement."""
    return min(n, n * polls // (polls + 2))


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


# --- Anthropic ------------------------------------------------------------------------------------
def _anthropic_create(server: Any, desk: BatchDesk, raw: bytes) -> tuple[int, Any, str]:
    from evaluation.providers import sdk_types

    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError:
        return _anthropic_error(400, "request body is not JSON")
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        return _anthropic_error(400, "requests: must be a non-empty list")
    if server.strict:
        problem = sdk_types.check(body, sdk_types.request_type("messages_batch"))
        if problem is not None:
            return _anthropic_error(400, sdk_types.anthropic_error(problem))
        seen: set[str] = set()
        for n, entry in enumerate(requests):
            custom_id = entry["custom_id"]
            if not ANTHROPIC_CUSTOM_ID.fullmatch(custom_id):
                return _anthropic_error(
                    400, f"requests.{n}.custom_id: String should match pattern '{ANTHROPIC_CUSTOM_ID.pattern}'"
                )
            if custom_id in seen:
                return _anthropic_error(400, f"requests.{n}.custom_id: {custom_id!r} is used by another request")
            seen.add(custom_id)
            why = _line_problem("messages", entry["params"])
            if why is not None:
                return _anthropic_error(400, f"requests.{n}.params.{why}")
    with desk.lock:
        fail_ids = set(desk.fail_ids)
    fate = _fate(desk)
    if fate == "failed":
        # Anthropic has no failed batch: it refuses one it will not take when it is created.
        error = {"type": "error", "error": {"type": "request_too_large", "message": "Batch exceeds the enqueued limit"}}
        return 413, error, "application/json"
    unfinished = _unfinished_by(fate, [entry.get("custom_id") for entry in requests])
    lines, failed = [], 0
    for entry in requests:
        if entry.get("custom_id") in unfinished:
            continue  # its fate leaves it unprocessed: never answered
        params = entry.get("params") or {}
        if params.get("stream"):
            return _anthropic_error(400, f"{entry.get('custom_id')}: batched requests may not stream")
        status, answer = _answer(server, "messages", params, entry["custom_id"] in fail_ids)
        if status == 200:
            result = {"type": "succeeded", "message": answer}
        else:
            failed += 1
            result = {
                "type": "errored",
                "error": {"type": "error", "error": {"type": "api_error", "message": answer["message"]}},
            }
        lines.append({"custom_id": entry["custom_id"], "result": result})
    with desk.lock:
        desk.creates += 1
        batch = LoopbackBatch(
            id=desk.next_id("msgbatch"),
            vendor="anthropic",
            endpoint="/v1/messages",
            lines=lines,
            failed=failed,
            created_at=int(time.time()),
        )
        batch.fate, batch.unfinished = fate, unfinished
        desk.batches[batch.id] = batch
    return 200, _anthropic_object(server, batch, ended=False), "application/json"


def _anthropic_retrieve(server: Any, desk: BatchDesk, batch_id: str) -> tuple[int, Any, str]:
    with desk.lock:
        batch = desk.batches.get(batch_id)
        if batch is None or batch.vendor != "anthropic":
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}, "application/json"
        batch.polls += 1
        desk.polls += 1
        ended = batch.polls > desk.polls_to_end
    return 200, _anthropic_object(server, batch, ended=ended), "application/json"


def _anthropic_results(desk: BatchDesk, batch_id: str) -> tuple[int, Any, str]:
    with desk.lock:
        batch = desk.batches.get(batch_id)
        if batch is None or batch.vendor != "anthropic" or batch.polls <= desk.polls_to_end:
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}, "application/json"
    kind = "canceled" if batch.fate == "cancelled" else "expired"
    unfinished = [{"custom_id": cid, "result": {"type": kind}} for cid in batch.unfinished]
    return 200, _jsonl(batch.lines + unfinished), "application/binary"


def _anthropic_object(server: Any, batch: LoopbackBatch, *, ended: bool) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created_at))
    total = len(batch.lines) + len(batch.unfinished)
    succeeded = len(batch.lines) - batch.failed
    unfinished = len(batch.unfinished) if ended else 0
    # Anthropic counts every line as processing until the whole batch has ended.
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": "ended" if ended else ("canceling" if batch.fate == "cancelled" else "in_progress"),
        "request_counts": {
            "processing": 0 if ended else total,
            "succeeded": succeeded if ended else 0,
            "errored": batch.failed if ended else 0,
            "canceled": unfinished if batch.fate == "cancelled" else 0,
            "expired": unfinished if batch.fate == "expired" else 0,
        },
        "created_at": stamp,
        "expires_at": stamp,
        "ended_at": stamp if ended else None,
        "archived_at": None,
        "cancel_initiated_at": stamp if batch.fate == "cancelled" else None,
        "results_url": f"{server.url}/v1/messages/batches/{batch.id}/results" if ended else None,
    }
