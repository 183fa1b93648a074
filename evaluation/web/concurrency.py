"""At most N HTTP requests of a web process inside Django at once; the others wait their turn.

Under ASGI, Django runs each request's sync code (middleware, views, the ORM) in a thread of that
request's own. Fifty requests in flight are fifty threads taking turns on one interpreter lock and
fifty database connections wanted at once: measured on two cores, a run-list request then cost twice
the CPU it costs alone (bench/api_load.py). Held in the event loop instead, a waiting request costs
nothing, and the ones being served finish sooner. A request holds its place until its response
starts: a streamed body (a CSV export) goes on sending without holding it. WebSocket connections are
not counted: a session or a run's live view lasts minutes.

EVAL_WEB_CONCURRENCY sets N (docs/scaling.md); 0 turns the limit off.
"""

import asyncio
import weakref
from typing import Any


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
        if self.limit <= 0 or scope["type"] != "http":
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
