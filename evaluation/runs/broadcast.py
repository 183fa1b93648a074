"""Progress events: stored first, then sent to live views after the transaction commits.

A worker sends every event through one event loop on a thread of its own that lives as long as
the process, so the channel layer keeps one connection (Redis) instead of a new loop and a new
connection per event (`async_to_sync` makes both each time). Events leave in the order they were
made; a lost event costs freshness only, because pages and the API read the database.
"""

import asyncio
import atexit
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from evaluation.models import EvaluationRun
from evaluation.runs.selectors import run_status

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any]], None]
"""An in-process observer of a run's status (the CLI's progress display)."""

GROUP = "runs"
"""The channel-layer group every live view of runs joins."""

QUEUE_LIMIT = 1000
"""Events waiting to be sent; beyond it new ones are dropped (the layer is down or far behind)."""


class _Sender:
    """One loop thread per process that sends queued events to the channel layer, one at a time."""

    def __init__(self, layer: Any):
        self.layer = layer
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(QUEUE_LIMIT)
        self.idle = threading.Event()
        self.idle.set()
        self.thread = threading.Thread(target=self._run, name="run-broadcast", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._consume())

    async def _consume(self) -> None:
        while True:
            payload = await self.queue.get()
            if payload is None:
                return
            try:
                await self.layer.group_send(GROUP, {"type": "run.progress", "payload": payload})
            except Exception:  # a broadcast must never break a run
                log.warning("broadcast failed for %s", payload.get("run_id"), exc_info=True)
            if self.queue.empty():
                self.idle.set()

    def _put(self, payload: dict[str, Any] | None) -> None:
        try:
            self.queue.put_nowait(payload)
        except asyncio.QueueFull:
            log.warning("broadcast queue full: dropped an event of %s", payload and payload.get("run_id"))

    def send(self, payload: dict[str, Any]) -> None:
        self.idle.clear()
        self.loop.call_soon_threadsafe(self._put, payload)

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event has been sent (or failed); False on timeout."""
        return self.idle.wait(timeout)


_sender: _Sender | None = None
_sender_lock = threading.Lock()


def _forget_sender() -> None:
    """A forked worker (django-q2 forks them) starts its own loop thread: the parent's did not survive."""
    global _sender, _sender_lock
    _sender, _sender_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_sender)


def _sender_for(layer: Any) -> _Sender:
    global _sender
    with _sender_lock:
        if _sender is None or _sender.layer is not layer or not _sender.thread.is_alive():
            _sender = _Sender(layer)
        return _sender


def flush(timeout: float = 5.0) -> bool:
    """Send what is queued before the process exits (the CLI, a test)."""
    sender = _sender
    return sender.flush(timeout) if sender is not None else True


atexit.register(flush, 2.0)


def broadcast(run: EvaluationRun, listener: Listener | None = None) -> None:
    """Tell the listener now, and live views once the transaction commits (a lost event costs freshness only)."""
    payload = run_status(run)
    if listener:
        listener(payload)
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        # An in-memory layer reaches only this process, and runs execute in workers, never in the
        # web process: live views poll instead. A shared layer (Redis) carries the events.
        return
    transaction.on_commit(lambda: _sender_for(layer).send(payload))
