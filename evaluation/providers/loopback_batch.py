"""The batch APIs on the loopback server: OpenAI's (files, batches, output file) and Anthropic's Message
Batches. Each request in a batch is answered as the matching single endpoint would answer it.

A batch's lines are answered when it is created (through the server's script, responder and faults,
exactly as the single endpoints answer); it then reports itself in progress for `polls_to_end`
retrievals before it ends, so a test can stop the process that waits on it. Lines whose custom id is
in `fail_ids` (or whose scripted reply has an error status) end as failed lines.
"""

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

OPENAI_URLS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}


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


@dataclass
class BatchDesk:
    """The batch state of one loopback server, and the knobs tests turn (put back with reset())."""

    polls_to_end: int = 0
    """Retrievals a batch answers "in progress" before it ends."""
    fail_ids: set[str] = field(default_factory=set)
    """Custom ids whose line fails (a 500 for that request)."""
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, LoopbackBatch] = field(default_factory=dict)
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
    return desk


def _error(status: int, message: str) -> tuple[int, Any, str]:
    return status, {"error": {"message": message, "type": "invalid_request_error"}}, "application/json"


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
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError:
        return _error(400, "request body is not JSON")
    endpoint = OPENAI_URLS.get(body.get("endpoint", ""))
    if endpoint is None:
        return _error(400, f"endpoint {body.get('endpoint')!r} is not one of {', '.join(OPENAI_URLS)}")
    with desk.lock:
        data = desk.files.get(body.get("input_file_id", ""))
        fail_ids = set(desk.fail_ids)
    if data is None:
        return _error(404, f"no file {body.get('input_file_id')!r}")
    outputs, errors = [], []
    for n, text in enumerate(data.decode().splitlines(), start=1):
        if not text.strip():
            continue
        line = json.loads(text)
        if line.get("method") != "POST" or line.get("url") != body["endpoint"]:
            return _error(400, f"line {n}: method and url must be POST {body['endpoint']}")
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
        if outputs:
            batch.output_file_id = desk.next_id("file")
            desk.files[batch.output_file_id] = _jsonl(outputs)
        if errors:
            batch.error_file_id = desk.next_id("file")
            desk.files[batch.error_file_id] = _jsonl(errors)
        desk.batches[batch.id] = batch
    return 200, _openai_object(batch, ended=False), "application/json"


def _openai_retrieve(desk: BatchDesk, batch_id: str) -> tuple[int, Any, str]:
    with desk.lock:
        batch = desk.batches.get(batch_id)
        if batch is None or batch.vendor != "openai":
            return _error(404, f"no batch {batch_id}")
        batch.polls += 1
        desk.polls += 1
        ended = batch.polls > desk.polls_to_end
    return 200, _openai_object(batch, ended=ended), "application/json"


def _openai_object(batch: LoopbackBatch, *, ended: bool) -> dict[str, Any]:
    total = len(batch.lines) + batch.failed
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": "completed" if ended else ("validating" if batch.polls == 0 else "in_progress"),
        "output_file_id": (batch.output_file_id or None) if ended else None,
        "error_file_id": (batch.error_file_id or None) if ended else None,
        "created_at": batch.created_at,
        "completed_at": int(time.time()) if ended else None,
        "request_counts": {
            "total": total,
            "completed": len(batch.lines) if ended else _share(len(batch.lines), batch.polls),
            "failed": batch.failed if ended else 0,
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
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError:
        return _error(400, "request body is not JSON")
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        return _error(400, "requests: must be a non-empty list")
    with desk.lock:
        fail_ids = set(desk.fail_ids)
    lines, failed = [], 0
    for entry in requests:
        params = entry.get("params") or {}
        if params.get("stream"):
            return _error(400, f"{entry.get('custom_id')}: batched requests may not stream")
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
    return 200, _jsonl(batch.lines), "application/binary"


def _anthropic_object(server: Any, batch: LoopbackBatch, *, ended: bool) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created_at))
    total = len(batch.lines)
    succeeded = total - batch.failed
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": "ended" if ended else "in_progress",
        "request_counts": {
            "processing": 0 if ended else total - _share(succeeded, batch.polls),
            "succeeded": succeeded if ended else _share(succeeded, batch.polls),
            "errored": batch.failed if ended else 0,
            "canceled": 0,
            "expired": 0,
        },
        "created_at": stamp,
        "expires_at": stamp,
        "ended_at": stamp if ended else None,
        "archived_at": None,
        "cancel_initiated_at": None,
        "results_url": f"{server.url}/v1/messages/batches/{batch.id}/results" if ended else None,
    }
