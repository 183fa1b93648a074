"""Progress events: stored first, then sent to live views after the transaction commits.

A worker sends its events through one event loop on a thread of its own that lives as long as the
process, so the channel layer keeps one connection (Redis) instead of a new loop and a new
connection per event (`async_to_sync` makes both each time).

Each event is the run's whole status, so a newer one supersedes an older one of the same run. A
run's events leave in the order they were made, and every change of its status, stage or attempt
leaves at once, after the newest progress of the stage before it; progress within a stage (the turn
counter) leaves at most once every PACE seconds per run, always its newest: a live view is never
more than PACE behind, and a 20-turn conversation sends a handful of turn events instead of twenty
(each a round trip to Redis from the worker). A run that was stopped elsewhere drops what it holds
(`discard`). A lost event costs freshness only, because pages and the API read the database.
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
from evaluation.models.runs import ACTIVE_STATUSES
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

PACING_KEPT = 1000
"""Runs whose last sent event is remembered for pacing; beyond it, those past their pace are dropped
(runs that stopped without an ending event)."""

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
        self.timers: dict[str, tuple[object, asyncio.TimerHandle]] = {}
        """Per run: the release of its held event (a token, so that a stale release is told apart)."""
        self.lock = threading.Lock()
        self.pending = 0
        """Events handed to send() and not yet sent, held or dropped (under lock)."""
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
            handled = 0
            if item is _FLUSH:
                for run_id in list(self.held):
                    await self._send(self.held.pop(run_id))
            elif isinstance(item, tuple):  # a run's pause is over: its held event leaves
                _, run_id, token = item
                if self.timers.get(run_id, (None,))[0] is token:
                    del self.timers[run_id]
                    held = self.held.pop(run_id, None)
                    if held is not None:
                        await self._send(held)
            elif isinstance(item, str):  # discard(): the run stopped, what it held is out of date
                self._cancel(item)
                self.held.pop(item, None)
            else:
                await self._offer(item)
                handled = 1
            self._done(handled)

    def _done(self, handled: int) -> None:
        with self.lock:
            self.pending -= handled
            if self.pending == 0 and not self.held and self.queue.empty():
                self.idle.set()

    async def _offer(self, payload: dict[str, Any]) -> None:
        """Send the event now, or hold it (superseding an older held one) until the run's pace allows.
        A new phase leaves at once, after the newest progress of the phase before it."""
        run_id = str(payload.get("run_id"))
        last = self.last.get(run_id)
        if last is not None and last[1] == _phase(payload):
            wait = last[0] + PACE - self.loop.time()
            if wait > 0:
                if run_id not in self.timers:
                    token = object()
                    self.timers[run_id] = (token, self.loop.call_later(wait, self._put, ("release", run_id, token)))
                self.held[run_id] = payload
                return
        older = self.held.pop(run_id, None)
        if older is not None and _phase(older) != _phase(payload):
            await self._send(older)
        await self._send(payload)

    def _cancel(self, run_id: str) -> None:
        timer = self.timers.pop(run_id, None)
        if timer is not None:
            timer[1].cancel()

    async def _send(self, payload: dict[str, Any]) -> None:
        run_id = str(payload.get("run_id"))
        self._cancel(run_id)
        try:
            await self.layer.group_send(GROUP, {"type": "run.progress", "payload": payload})
        except Exception:  # a broadcast must never break a run
            log.warning("broadcast failed for %s", payload.get("run_id"), exc_info=True)
        now = self.loop.time()
        if payload.get("run_status") not in ACTIVE_STATUSES:  # it ended: it sends nothing more
            self.last.pop(run_id, None)
        else:
            self.last[run_id] = (now, _phase(payload))  # after the send: a slow send does not eat the pace
        if len(self.last) > PACING_KEPT:
            self.last = {k: v for k, v in self.last.items() if now - v[0] < PACE}

    def _put(self, item: Any) -> None:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            if isinstance(item, dict):
                log.warning("broadcast queue full: dropped an event of %s", item.get("run_id"))
                self._done(1)
            else:  # a release, a discard or a flush: it still has to happen
                self.loop.call_later(0.1, self._put, item)

    def send(self, payload: dict[str, Any]) -> None:
        with self.lock:
            self.pending += 1
            self.idle.clear()
        self.loop.call_soon_threadsafe(self._put, payload)

    def discard(self, run_id: str) -> None:
        self.loop.call_soon_threadsafe(self._put, run_id)

    def flush(self, timeout: float) -> bool:
        """Send every queued and held event now; False if they were not all sent within timeout."""
        if self.idle.is_set():
            return True  # nothing queued or held
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


def discard(run: EvaluationRun) -> None:
    """The run stopped (cancelled, interrupted elsewhere): drop what this process holds of it, which
    would otherwise reach live views after the party that stopped it said so."""
    sender = _sender
    if sender is not None:
        sender.discard(str(run.run_id))


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
