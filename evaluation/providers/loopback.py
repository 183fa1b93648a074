"""A loopback LLM server speaking the real wire formats, for tests, benchmarks and fault drills.

Endpoints: POST /v1/chat/completions and /v1/responses (OpenAI), /v1/messages (Anthropic, with
SSE streaming and thinking blocks). Replies come from a script (a queue of Reply objects), else
from a responder that answers any JSON schema with a valid example. Faults: latency, status codes
with Retry-After, a hang, a dropped connection, a malformed or truncated body, and a random
fault rate. Every request is recorded, so tests count calls at the server.

Strict, as the vendors are: every request body is checked against the installed SDK's own request type
(sdk_types; a key the type does not declare, a wrong type, a missing field) and refused with the vendor's
400 and error shape, and so are Anthropic's documented limits (at most 4 cache breakpoints, a thinking
budget of at least 1,024 below max_tokens) and OpenAI's (no temperature with a reasoning effort).

Prompt caching is reported as the vendors do: Anthropic's cache_control breakpoints (a prefix written
at a breakpoint is read from the cache within its lifetime, 5 minutes or the 1 hour a breakpoint may ask
for, else it is written; a prefix shorter than the model's minimum, capabilities.anthropic_min_cache, is
not cached at all) and OpenAI's automatic caching (the longest prefix seen before, in whole blocks of 1024
tokens, from 1024 on; reported as cached_tokens and cache_write_tokens). Rate limits: `rpm` requests and
`tpm` prompt tokens, each a token bucket that holds a minute's worth (`rate_window` seconds' worth) and
refills continuously, as the vendors describe theirs; answered with the vendors' rate-limit headers, and
with 429 and Retry-After when a request would exceed one.
"""

import hashlib
import itertools
import json
import math
import random
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evaluation.providers.capabilities import anthropic_min_cache
from evaluation.providers.loopback_batch import Route
from evaluation.providers.loopback_batch import install as install_batch_apis
from evaluation.providers.loopback_checks import CACHE_TTLS, anthropic_segments, invalid_request, request_problem

ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}
BILLED = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
CACHE_TTL = 300.0
"""Seconds a cached prefix lives after its last use (Anthropic's ephemeral cache)."""
OPENAI_CACHE_BLOCK = 1024
"""OpenAI caches prefixes in whole blocks of this many tokens, from the first block on."""


@dataclass
class Reply:
    """One scripted answer. text (or json, serialised) is the model's output."""

    text: str | None = None
    json: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    fault: str | None = None
    """"hang" (no answer until the client gives up), "drop" (close without answering),
    "malformed" (a body that is not JSON), "truncated" (half a body, then close)."""
    thinking: str = ""
    error_message: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """[{"name": ..., "arguments": {...}}]: the model calls these functions instead of answering."""


@dataclass
class RecordedRequest:
    endpoint: str
    body: dict[str, Any]
    headers: dict[str, str]


def example_for(schema: dict[str, Any]) -> Any:
    """A small valid instance of a JSON schema (enough of one for the judge shapes we use)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        return example_for(alternatives[0])
    if kind == "object" or "properties" in schema:
        return {name: example_for(sub) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [example_for(schema.get("items", {})) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind in ("number", "integer"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 10)
        middle = (low + high) / 2
        return int(round(middle)) if kind == "integer" else middle
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "loopback"


def requested_schema(endpoint: str, body: dict[str, Any]) -> dict[str, Any] | None:
    if endpoint == "responses":
        fmt = (body.get("text") or {}).get("format") or {}
        return fmt.get("schema")
    if endpoint == "chat":
        fmt = body.get("response_format") or {}
        return (fmt.get("json_schema") or {}).get("schema")
    system = body.get("system") or ""
    if isinstance(system, list):
        system = " ".join(part.get("text", "") for part in system)
    match = re.search(r"```json\n(.*?)\n```", system, re.DOTALL)
    return json.loads(match.group(1)) if match else None


def default_responder(endpoint: str, body: dict[str, Any], n: int) -> Reply:
    schema = requested_schema(endpoint, body)
    if schema is not None:
        return Reply(json=example_for(schema))
    return Reply(text=f"Loopback reply {n}.")


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def go_duration(seconds: float) -> str:
    """A duration as OpenAI's x-ratelimit-reset-* headers write it: "20ms", "1s", "6m0s", "1h2m3s"."""
    if seconds < 1:
        return f"{max(0, int(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


@dataclass
class RateBucket:
    """One token bucket of the server's rate limits: `level` of `capacity` left at `at`, refilled at
    capacity per rate window."""

    capacity: float
    level: float
    at: float

    def refill(self, now: float, window: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.capacity / window)
        self.at = now

    def wait_for(self, amount: float, window: float) -> float:
        """Seconds until the bucket holds `amount` (0 when it does now)."""
        missing = min(amount, self.capacity) - self.level
        return max(0.0, missing * window / self.capacity)

    def until_full(self, window: float) -> float:
        return (self.capacity - self.level) * window / self.capacity


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-reply (a killed worker or web process, in a fault drill) is its own
    business: no traceback on the console for it; any other error is printed as before."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class LoopbackLLMServer:
    """Start with `with LoopbackLLMServer() as server:`; point SDKs at server.openai_url / anthropic_url."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        fault_rate: float = 0.0,
        seed: int = 0,
        responder: Callable[[str, dict[str, Any], int], Reply] = default_responder,
        hang_seconds: float = 30.0,
        port: int = 0,
        rpm: int | None = None,
        tpm: int | None = None,
        rate_window: float = 60.0,
        strict: bool = True,
    ):
        self.latency = latency
        self.fault_rate = fault_rate
        self.responder = responder
        self.hang_seconds = hang_seconds
        self.rpm = rpm
        """Requests per rate window (None: no limit, and no rate-limit headers)."""
        self.tpm = tpm
        """Prompt tokens (counted as the usage reports them) per rate window (None: no limit)."""
        self.rate_window = rate_window
        """Seconds a bucket takes to refill from empty: 60 for per-minute limits; tests shorten it."""
        self.rate_limited = 0
        """How many requests it refused with 429 for its rate limits, since the last reset."""
        self._buckets: dict[str, RateBucket] = {}
        self.strict = self._strict_default = strict
        """Refuse requests the vendor would refuse (request_problem); False takes any JSON body."""
        self.refused: list[tuple[str, str]] = []
        """(endpoint, the vendor's message) of each request it refused with a 400 as invalid."""
        self.billed = dict.fromkeys(BILLED, 0)
        """Tokens its answers reported, summed since the last reset (prompt tokens all included in input_tokens)."""
        self._cache: dict[str, float] = {}
        """Prefix hash -> when it expires (the prompt cache)."""
        self._defaults = (latency, fault_rate, responder)
        self._limit_defaults = (rpm, tpm, rate_window)
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str | None, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._counter = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._answering = 0
        self.most_at_once = 0
        """The most requests it was answering at one time (in their latency), since the last reset."""
        self.routes: list[Route] = []
        """Further endpoints (the batch APIs), tried in order for any path the chat endpoints do not take."""
        self.batch_desk = install_batch_apis(self)
        """The batch APIs' files and batches (answered through this server's replies)."""

    # --- control -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        port = self._httpd.server_address[1]
        return f"http://127.0.0.1:{port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_url(self) -> str:
        return self.url

    def start(self) -> "LoopbackLLMServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="loopback-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "LoopbackLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *replies: Reply | str | dict, endpoint: str | None = None) -> None:
        """Queue replies (for one endpoint, or any); a str is text, a dict is JSON output."""
        with self._lock:
            queue = self._scripts.setdefault(endpoint, deque())
            for reply in replies:
                if isinstance(reply, str):
                    reply = Reply(text=reply)
                elif isinstance(reply, dict):
                    reply = Reply(json=reply)
                queue.append(reply)

    def count(self, endpoint: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if endpoint is None or r.endpoint == endpoint)

    def reset(self) -> None:
        """Forget requests and scripts, and put back the latency, fault rate and responder it started with."""
        with self._lock:
            self.requests.clear()
            self._scripts.clear()
            self.latency, self.fault_rate, self.responder = self._defaults
            self.strict = self._strict_default
            self.rpm, self.tpm, self.rate_window = self._limit_defaults
            self.most_at_once = 0
            self.rate_limited = 0
            self.billed = dict.fromkeys(BILLED, 0)
            self._buckets = {}
            self._cache.clear()
            self.refused = []
        self.batch_desk.reset()

    def rate_check(self, endpoint: str, body: dict[str, Any]) -> tuple[float | None, dict[str, str]]:
        """Take a request from the rate limits' buckets: (None, headers) when it may be answered, else
        (seconds until the buckets hold enough for it, headers) for a 429. No limits set: (None, {})."""
        if self.rpm is None and self.tpm is None:
            return None, {}
        tokens = self._input_tokens(body)
        needs = {"requests": 1.0, "tokens": float(tokens)}
        with self._lock:
            now = time.time()
            limits = {"requests": self.rpm, "tokens": self.tpm}
            buckets = {}
            for name, limit in limits.items():
                if limit is None:
                    continue
                bucket = self._buckets.get(name)
                if bucket is None or bucket.capacity != limit:
                    bucket = self._buckets[name] = RateBucket(float(limit), float(limit), now)
                bucket.refill(now, self.rate_window)
                buckets[name] = bucket
            # A request larger than a whole bucket is let through when the bucket is full.
            wait = max(bucket.wait_for(needs[name], self.rate_window) for name, bucket in buckets.items())
            refused = wait > 0
            if refused:
                self.rate_limited += 1
            else:
                for name, bucket in buckets.items():
                    bucket.level -= needs[name]
            headers = self._rate_headers(endpoint, buckets)
        if refused:
            headers["retry-after"] = str(max(1, math.ceil(wait)))
            return wait, headers
        return None, headers

    def _rate_headers(self, endpoint: str, buckets: dict[str, RateBucket]) -> dict[str, str]:
        """The vendors' headers: each limit, what is left of it now and when it is full again."""
        names = {"requests": ("requests", "requests"), "tokens": ("tokens", "input-tokens")}
        headers: dict[str, str] = {}
        for kind, bucket in buckets.items():
            openai_name, anthropic_name = names[kind]
            remaining = str(max(0, math.floor(bucket.level)))
            full_in = bucket.until_full(self.rate_window)
            if endpoint == "messages":
                # Whole seconds, rounded up: a client that waits until then finds the bucket full.
                at = datetime.fromtimestamp(math.ceil(time.time() + full_in), UTC).isoformat().replace("+00:00", "Z")
                headers[f"anthropic-ratelimit-{anthropic_name}-limit"] = str(int(bucket.capacity))
                headers[f"anthropic-ratelimit-{anthropic_name}-remaining"] = remaining
                headers[f"anthropic-ratelimit-{anthropic_name}-reset"] = at
            else:
                headers[f"x-ratelimit-limit-{openai_name}"] = str(int(bucket.capacity))
                headers[f"x-ratelimit-remaining-{openai_name}"] = remaining
                headers[f"x-ratelimit-reset-{openai_name}"] = go_duration(full_in)
        return headers

    def _anthropic_cache(self, body: dict[str, Any], total: int) -> tuple[int, int, int]:
        """(tokens read from the cache, tokens written to it, of those written for 1 hour) for a Messages
        request: a breakpoint's prefix is written, if it is at least the model's minimum cacheable length;
        it is read back within its lifetime by a later request whose breakpoint ends it, or ends within the
        20 blocks after it (Anthropic's lookback, which lets a conversation's breakpoint move on a turn)."""
        digest = hashlib.sha256(str(body.get("model")).encode())
        least = anthropic_min_cache(str(body.get("model") or "")) * 4  # in characters, as _tokens counts
        prefixes: list[tuple[str, int]] = []
        breakpoints: list[tuple[int, str]] = []
        chars = 0
        for text, ttl in anthropic_segments(body):
            digest.update(text.encode())
            chars += len(text)
            prefixes.append((digest.hexdigest(), chars))
            if ttl is not None and chars >= least:
                breakpoints.append((len(prefixes) - 1, ttl))
        if not breakpoints:
            return 0, 0, 0
        now = time.time()
        with self._lock:
            hit = 0
            for index, ttl in breakpoints:
                for key, length in reversed(prefixes[max(0, index - 19) : index + 1]):
                    if length >= least and self._cache.get(key, -math.inf) > now:
                        self._cache[key] = now + CACHE_TTLS[ttl]  # a read refreshes the entry's lifetime
                        hit = max(hit, length)
                        break
            for index, ttl in breakpoints:
                self._cache[prefixes[index][0]] = max(self._cache.get(prefixes[index][0], 0.0), now + CACHE_TTLS[ttl])
        read = min(total, hit // 4)
        written = min(total - read, max(0, prefixes[breakpoints[-1][0]][1] // 4 - read))
        return read, written, written if breakpoints[-1][1] == "1h" else 0

    def _bill(self, prompt: int, cached: int, written: int, output: int) -> None:
        with self._lock:
            for name, n in zip(BILLED, (prompt, cached, written, output), strict=True):
                self.billed[name] += n

    def _openai_cache(self, body: dict[str, Any], total: int) -> tuple[int, int]:
        """Tokens of the longest prefix, in whole blocks of 1024 tokens, seen before (0 under 1024); the
        blocks beyond it are written (the caller reports them as cache_write_tokens)."""
        text = json.dumps(body.get("tools") or []) + json.dumps(body.get("messages") or body.get("input") or "")
        block = OPENAI_CACHE_BLOCK * 4
        now = time.time()
        digest = hashlib.sha256(str(body.get("model")).encode())
        cached = cacheable = 0
        with self._lock:
            for end in range(block, len(text) + 1, block):
                digest.update(text[end - block : end].encode())
                key = digest.hexdigest()
                if self._cache.get(key, -math.inf) > now:
                    cached = end // 4
                self._cache[key] = now + CACHE_TTL
                cacheable = end // 4
        cached = min(cached, total)
        return cached, max(0, min(cacheable, total) - cached)

    def _next_reply(self, endpoint: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(RecordedRequest(endpoint, body, {}))
            n = next(self._counter)
            for key in (endpoint, None):
                queue = self._scripts.get(key)
                if queue:
                    return queue.popleft()
            if self.fault_rate and self._rng.random() < self.fault_rate:
                return self._rng.choice(
                    [Reply(status=429, headers={"retry-after": "0"}), Reply(status=500), Reply(fault="drop")]
                )
        return self.responder(endpoint, body, n)

    # --- HTTP ----------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            rate_headers: dict[str, str] = {}
            """This request's rate-limit headers (set per request: a connection serves many)."""

            def do_GET(self) -> None:
                self.rate_headers = {}
                if not self._route("GET", b""):
                    self._send_json(404, {"error": {"message": f"no route GET {self.path}"}})

            def do_POST(self) -> None:
                self.rate_headers = {}
                endpoint = ENDPOINTS.get(self.path.split("?")[0])
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                if endpoint is None:
                    if self._route("POST", raw):
                        return
                    return self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    return self._send_json(400, {"error": {"message": "request body is not JSON"}})
                problem = request_problem(endpoint, body) if server.strict else None
                if problem is not None:
                    with server._lock:
                        server.requests.append(RecordedRequest(endpoint, body, dict(self.headers.items())))
                    status, payload = invalid_request(endpoint, problem)
                    with server._lock:
                        server.refused.append((endpoint, json.dumps(payload)))
                    return self._send_json(status, payload)
                wait, self.rate_headers = server.rate_check(endpoint, body)
                if wait is not None:
                    with server._lock:
                        server.requests.append(RecordedRequest(endpoint, body, dict(self.headers.items())))
                    limited = Reply(status=429, error_message="rate limit reached", headers=self.rate_headers)
                    return self._send_error(endpoint, limited)
                reply = server._next_reply(endpoint, body)
                with server._lock:
                    server.requests[-1].headers = {k.lower(): v for k, v in self.headers.items()}
                delay = server.latency + reply.delay
                with server._lock:
                    server._answering += 1
                    server.most_at_once = max(server.most_at_once, server._answering)
                try:
                    if delay:
                        time.sleep(delay)
                finally:
                    with server._lock:
                        server._answering -= 1
                if reply.fault == "hang":
                    server._stopping.wait(server.hang_seconds)
                    self.close_connection = True
                    return
                if reply.fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if reply.status != 200:
                    return self._send_error(endpoint, reply)
                if reply.fault == "malformed":
                    return self._send_raw(200, b"{this is not json", "application/json")
                text = (
                    reply.text if reply.text is not None else json.dumps(reply.json if reply.json is not None else {})
                )
                if endpoint == "messages":
                    if body.get("stream"):
                        return self._send_sse(body, reply, text)
                    return self._send_json(200, server._anthropic_message(body, reply, text))
                payload = (
                    server._responses(body, reply, text) if endpoint == "responses" else server._chat(body, reply, text)
                )
                if reply.fault == "truncated":
                    data = json.dumps(payload).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                return self._send_json(200, payload)

            def _route(self, method: str, raw: bytes) -> bool:
                """Answer through the first further route whose method and path match; False when none does."""
                path = self.path.split("?")[0]
                for route in server.routes:
                    match = route.path.fullmatch(path)
                    if route.method == method and match:
                        status, payload, content_type = route.answer(match, raw, self.headers)
                        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                        self._send_raw(status, data, content_type)
                        return True
                return False

            def _send_raw(
                self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for key, value in {**self.rate_headers, **(headers or {})}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_error(self, endpoint: str, reply: Reply) -> None:
                message = reply.error_message or f"loopback error {reply.status}"
                if endpoint == "messages":
                    kinds = {401: "authentication_error", 429: "rate_limit_error", 400: "invalid_request_error"}
                    payload = {
                        "type": "error",
                        "error": {"type": kinds.get(reply.status, "api_error"), "message": message},
                    }
                else:
                    payload = {"error": {"message": message, "type": "error", "code": str(reply.status)}}
                self._send_json(reply.status, payload, reply.headers)

            def _send_sse(self, body: dict[str, Any], reply: Reply, text: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                for key, value in self.rate_headers.items():
                    self.send_header(key, value)
                self.end_headers()
                for event, data in server._anthropic_events(body, reply, text):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                    if reply.fault == "truncated" and event == "content_block_delta":
                        break
                self.wfile.flush()
                self.close_connection = True

        return Handler

    # --- wire formats --------------------------------------------------------------------
    @staticmethod
    def _input_tokens(body: dict[str, Any]) -> int:
        return _tokens(json.dumps(body.get("messages") or body.get("input") or "") + json.dumps(body.get("system", "")))

    def _chat(self, body: dict[str, Any], reply: Reply, text: str) -> dict[str, Any]:
        prompt, completion = self._input_tokens(body), _tokens(text)
        cached, written = self._openai_cache(body, prompt)
        self._bill(prompt, cached, written, completion)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reply.tool_calls:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                    for i, c in enumerate(reply.tool_calls)
                ],
            }
        return {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "loopback"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
            },
        }

    def _responses(self, body: dict[str, Any], reply: Reply, text: str) -> dict[str, Any]:
        prompt, completion = self._input_tokens(body), _tokens(text)
        reasoning = _tokens(reply.thinking) if reply.thinking or body.get("reasoning") else 0
        cached, written = self._openai_cache(body, prompt)
        self._bill(prompt, cached, written, completion + reasoning)
        output: list[dict[str, Any]] = []
        if body.get("reasoning"):
            output.append({"type": "reasoning", "id": "rs_loopback", "summary": []})
        for i, call in enumerate(reply.tool_calls):
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": f"call_{i}",
                    "name": call["name"],
                    "arguments": json.dumps(call["arguments"]),
                    "status": "completed",
                }
            )
        if not reply.tool_calls:
            output.append(
                {
                    "type": "message",
                    "id": "msg_loopback",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        return {
            "id": "resp_loopback",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body.get("model", "loopback"),
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
                "output_tokens": completion + reasoning,
                "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": prompt + completion + reasoning,
            },
        }

    def _anthropic_message(self, body: dict[str, Any], reply: Reply, text: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.thinking:
            content.append({"type": "thinking", "thinking": reply.thinking, "signature": "loopback-signature"})
        if reply.tool_calls:
            content += [
                {"type": "tool_use", "id": f"toolu_{i}", "name": c["name"], "input": c["arguments"]}
                for i, c in enumerate(reply.tool_calls)
            ]
        else:
            content.append({"type": "text", "text": text})
        total = self._input_tokens(body)
        read, written, written_long = self._anthropic_cache(body, total)
        self._bill(total, read, written, _tokens(text) + _tokens(reply.thinking))
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "loopback"),
            "content": content,
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": total - read - written,
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": written - written_long,
                    "ephemeral_1h_input_tokens": written_long,
                },
                "output_tokens": _tokens(text) + _tokens(reply.thinking),
            },
        }

    def _anthropic_events(self, body: dict[str, Any], reply: Reply, text: str) -> list[tuple[str, dict[str, Any]]]:
        message = self._anthropic_message(body, reply, text)
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**message["usage"], "output_tokens": 1},
        }
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
        index = 0
        if reply.thinking:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                )
            )
            for chunk in _chunks(reply.thinking):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "thinking_delta", "thinking": chunk},
                        },
                    )
                )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": "loopback-signature"},
                    },
                )
            )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        for i, call in enumerate(reply.tool_calls):
            block = {"type": "tool_use", "id": f"toolu_{i}", "name": call["name"], "input": {}}
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            )
            for chunk in _chunks(json.dumps(call["arguments"])):
                delta = {"type": "input_json_delta", "partial_json": chunk}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        if not reply.tool_calls:
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            for chunk in _chunks(text):
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": chunk}},
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events


def _chunks(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
