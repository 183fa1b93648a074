"""At most N HTTP requests of a web process inside Django at once; the others wait their turn.

Under ASGI, Django runs each request's sync code (middleware, views, the ORM) in a thread of that
request's own. Fifty requests in flight are fifty threads taking turns on one interpreter lock and
fifty database connections wanted at once: measured on two cores, a run-list request then cost twice
the CPU it costs alone (bench/api_load.py). Held in the event loop instead, a waiting request costs
nothing, and the ones being served finish sooner.

A request holds its place until its response starts. A streamed response (a CSV export) starts
before its rows are read, so its rows are read and sent outside the limit. A view that waits on an
LLM before it answers (the drift gate: seconds) sets `waits_on_an_llm = True` and is not counted:
two of them must not hold up every other page. WebSocket connections are not counted either: a
session or a run's live view lasts minutes.

EVAL_WEB_CONCURRENCY sets N (docs/scaling.md); 0 turns the limit off.
"""

import asyncio
import weakref
from typing import Any

from django.urls import Resolver404, resolve


def waits_on_an_llm(scope: dict[str, Any]) -> bool:
    """Whether the request's view says it waits on an LLM (`waits_on_an_llm = True` on its class)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    try:
        match = resolve(path)
    except Resolver404:
        return False
    return bool(getattr(getattr(match.func, "view_class", None), "waits_on_an_llm", False))


class RequestLimit:
    """ASGI middleware: `limit` HTTP requests at once through `app`, the rest wait in arrival order."""

    def __init__(self, app: Any, limit: int):
        self.app = app
        self.limit = limit
        # One semaphore per event loop: a semaphore belongs to the loop it first waited on.
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.limit <= 0 or scope["type"] != "http" or waits_on_an_llm(scope):
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.limit)
        await semaphore.acquire()
        held = True

        async def send_releasing(message: dict[str, Any]) -> None:
            nonlocal held
            if held and message["type"] == "http.response.start":
                held = False
                semaphore.release()
            await send(message)

        try:
            await self.app(scope, receive, send_releasing)
        finally:
            if held:
                semaphore.release()
