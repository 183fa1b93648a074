"""Progress events: stored first, then sent to live views after the transaction commits.

A worker sends its events through one event loop on a thread of its own that lives as long as the
process, so the channel layer keeps one connection (Redis) instead of a new loop and a new
connection per event (`async_to_sync` makes both each time).

Each event is the run's whole status, so a newer one supersedes an older one of the same run. A
run's events leave in the order they were made, and every change of its status, stage or attempt
leaves at once; progress within a stage (the turn counter) leaves at most once every PACE seconds
per run, always its newest: a live view is never more than PACE behind, and a 20-turn conversation
sends a handful of turn events instead of twenty (each a round trip to Redis from the worker). A lost
event costs freshness only, because pages and the API read the database.
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

PACE = 1.0
"""Seconds between two sent events of one run that differ only in progress within a stage."""

ENDED = frozenset({"completed", "failed", "cancelled", "interrupted"})
"""Lifecycle statuses after which a run sends nothing more (its pacing record is dropped)."""

_FLUSH = object()
"""Queued by flush(): send every held event now."""


def _phase(payload: dict[str, Any]) -> tuple[Any, ...]:
    """What an event must never be held back over: the run's status, stage and attempt."""
    return payload.get("run_status"), payload.get("status"), payload.get("attempt")


class _Sender:
    """One loop thread per process that sends queued events to the channel layer, one at a time,
    pacing each run's progress events (PACE)."""

    def __init__(self, layer: Any):
        self.layer = layer
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_LIMIT)
        self.last: dict[str, tuple[float, tuple[Any, ...]]] = {}
        """Per run: when its last event was sent, and its phase."""
        self.held: dict[str, dict[str, Any]] = {}
        """Per run: its newest event not sent yet (it leaves when the run's pace allows)."""
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.idle = threading.Event()
        self.idle.set()
        self.thread = threading.Thread(target=self._run, name="run-broadcast", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._consume())

    async def _consume(self) -> None:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            if item is _FLUSH:
                for run_id in list(self.held):
                    await self._send(self.held.pop(run_id))
            elif isinstance(item, str):  # a run's pause is over: its held event leaves
                self.timers.pop(item, None)
                held = self.held.pop(item, None)
                if held is not None:
                    await self._send(held)
            else:
                await self._offer(item)
            if self.queue.empty() and not self.held:
                self.idle.set()

    async def _offer(self, payload: dict[str, Any]) -> None:
        """Send the event now, or hold it (superseding an older held one) until the run's pace allows."""
        run_id = str(payload.get("run_id"))
        last = self.last.get(run_id)
        wait = 0.0 if last is None or last[1] != _phase(payload) else last[0] + PACE - self.loop.time()
        if wait <= 0:
            self.held.pop(run_id, None)  # older than this one
            await self._send(payload)
            return
        if run_id not in self.timers:
            self.timers[run_id] = self.loop.call_later(wait, self._put, run_id)
        self.held[run_id] = payload

    async def _send(self, payload: dict[str, Any]) -> None:
        run_id = str(payload.get("run_id"))
        timer = self.timers.pop(run_id, None)
        if timer is not None:
            timer.cancel()
        if payload.get("run_status") in ENDED:
            self.last.pop(run_id, None)
        else:
            self.last[run_id] = (self.loop.time(), _phase(payload))
        try:
            await self.layer.group_send(GROUP, {"type": "run.progress", "payload": payload})
        except Exception:  # a broadcast must never break a run
            log.warning("broadcast failed for %s", payload.get("run_id"), exc_info=True)

    def _put(self, item: Any) -> None:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            if isinstance(item, dict):
                log.warning("broadcast queue full: dropped an event of %s", item.get("run_id"))
            else:  # a held event's release, or a flush: it still has to happen
                self.loop.call_later(0.1, self._put, item)

    def send(self, payload: dict[str, Any]) -> None:
        self.idle.clear()
        self.loop.call_soon_threadsafe(self._put, payload)

    def flush(self, timeout: float) -> bool:
        """Send every queued and held event now; False if they were not all sent within timeout."""
        if self.idle.is_set():
            return True  # nothing queued or held
        self.idle.clear()
        self.loop.call_soon_threadsafe(self._put, _FLUSH)
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
