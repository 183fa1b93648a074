"""ASGI middleware: while the database is known to be down (evaluation.runs.outage.circuit), an HTTP
request is answered 503 with Retry-After at once, in the event loop, instead of taking a request slot and
waiting the pool's timeout; static files are still served. Placed both outside and inside the request
limit (evaluation/web/concurrency.py), so that a request that waited for a slot while the circuit opened
is answered at once too."""

from typing import Any

import orjson
from django.conf import settings
from django.utils.html import escape

from evaluation.api.errors import DatabaseBusy
from evaluation.runs.outage import circuit
from evaluation.web.middleware import JSON_PATHS, PAGE


class DatabaseCircuit:
    def __init__(self, app: Any):
        self.app = app
        self.static = settings.STATIC_URL if settings.STATIC_URL.startswith("/") else f"/{settings.STATIC_URL}"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not circuit.open or scope.get("path", "").startswith(self.static):
            await self.app(scope, receive, send)
            return
        reason = f"{circuit.reason}; retry in {DatabaseBusy.wait} s"
        if scope.get("path", "").startswith(JSON_PATHS):
            body, kind = orjson.dumps({"error": reason}), b"application/json"
        else:
            body = PAGE.format(reason=escape(circuit.reason), wait=DatabaseBusy.wait).encode()
            kind = b"text/html; charset=utf-8"
        headers = [(b"content-type", kind), (b"retry-after", str(DatabaseBusy.wait).encode())]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})
