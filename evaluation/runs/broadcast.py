"""Progress events: stored first, then sent to live views after the transaction commits."""

import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from evaluation.models import EvaluationRun
from evaluation.runs.selectors import run_status

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any]], None]
"""An in-process observer of a run's status (the CLI's progress display)."""

GROUP = "runs"
"""The channel-layer group every live view of runs joins."""


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

    def send() -> None:
        try:
            async_to_sync(layer.group_send)(GROUP, {"type": "run.progress", "payload": payload})
        except Exception:  # a broadcast must never break a run
            log.warning("broadcast failed for %s", run.run_id, exc_info=True)

    transaction.on_commit(send)
