"""django-q2 entry point: take a run id and its attempt, call the room's service. Workers are synchronous."""

import importlib
import logging
import os
import time

from django.db import close_old_connections, connection

from evaluation.drift import services as drift
from evaluation.judging import services as judging
from evaluation.models import EvaluationRun
from evaluation.models.runs import RunKind
from evaluation.runs import selectors as run_selectors
from evaluation.runs import services as run_services
from evaluation.suites import services as suites
from evaluation.tutoring import services as tutoring

log = logging.getLogger(__name__)


HAND_OVERS_PER_TASK = 16
"""At most this many runs begun by one task's hand-over: django-q2 recycles a worker process after
Q_CLUSTER["recycle"] tasks, and a task that never returned would never be counted."""


def run_task(run_pk: str, attempt: int, action: str = "execute", kind: str = "") -> str:
    """Run one attempt; a task for a run that is not queued at this attempt does nothing ('skipped').

    Then the hand-over: the worker, free again (after its run, or at once for a copy it skipped),
    begins the oldest run already sent to the workers but not begun, itself. A cluster's pusher
    takes tasks from the broker while all of its own workers are busy, so the copies of a run's
    task can all wait behind busy workers for a whole run while this one idles; the conditional
    begin lets one party win and the copies still in the broker end 'skipped'. It goes on while the
    task has used less than half of its time limit (EVAL_TASK_TIMEOUT: a run begun this way has at
    least half of it), for at most HAND_OVERS_PER_TASK runs, and only while the worker's own
    qcluster reports itself running (a cluster that is stopping begins nothing new). The result
    names every run the task ended: "completed", or "completed; handed over: completed, failed".
    `kind` is the run's kind as its task was sent (read from the run when a task sent before it
    was carried has none).
    """
    started = time.monotonic()
    run_services.task_time_limit_watch()
    status = _execute(run_pk, attempt, action, kind)
    handed = _hand_over(started)
    return f"{status}; handed over: {', '.join(handed)}" if handed else status


def _execute(run_pk: str, attempt: int, action: str, kind: str) -> str:
    kind = kind or EvaluationRun.objects.filter(pk=run_pk).values_list("kind", flat=True).first() or ""
    if kind == RunKind.TUTOR:
        run = tutoring.run_execute(run_pk, attempt, action)
    elif kind == RunKind.DRIFT:
        run = drift.drift_run_execute(run_pk, attempt)
    elif kind == RunKind.SUITE:
        run = suites.suite_run_execute(run_pk, attempt)
    else:
        return "missing"
    return run.status if run is not None else "skipped"


def _hand_over(started: float) -> list[str]:
    """Begin runs sent but not begun, oldest first, within the bounds run_task names."""
    from django_q.conf import Conf

    if Conf.SYNC:
        return []  # in sync mode a sent task has already run in the sender's process
    limit = float(Conf.TIMEOUT or 0)
    budget = limit / 2 if limit > 0 else float("inf")
    statuses: list[str] = []
    tried: set[str] = set()
    while len(statuses) < HAND_OVERS_PER_TASK and time.monotonic() - started < budget:
        try:
            if not connection.in_atomic_block:
                close_old_connections()  # as django-q2 does before each task
            sent = run_selectors.run_sent_not_begun(excluding=tried)
            # The cluster's stats are read only when there is a run to begin: most tasks find none.
            if sent is None or not _cluster_running():
                break
            tried.add(sent.pk)
            status = _execute(sent.pk, sent.attempt, sent.action, sent.kind)
        except Exception:
            # The task's own run has ended as it should; a failed look for the next one leaves the
            # sent runs to their own tasks.
            log.warning("hand-over stopped", exc_info=True)
            break
        if status not in ("skipped", "missing"):  # another worker began it first, or it was deleted
            log.info("handed over: %s %s", sent.run_id, status)
            statuses.append(status)
    return statuses


def _cluster_running() -> bool:
    """Does this worker's qcluster report itself running (not stopping)? django-q2's cluster stats,
    kept by the worker's parent (the sentinel); where they cannot be seen (a process-local cache under
    the ORM broker), no: one cluster needs no hand-over."""
    from django_q.conf import Conf
    from django_q.status import Stat

    mine = [stat for stat in Stat.get_all(run_services.broker()) if getattr(stat, "sentinel", None) == os.getppid()]
    return bool(mine) and all(stat.status in (Conf.IDLE, Conf.WORKING) for stat in mine)


def canary_task(rubric: str) -> str:
    """A rubric's judge configuration changed: judge its canary set under the new one (the card shows the shift)."""
    return str(judging.canary_rejudge(rubric=rubric))


def judging_task(rubric: str, provider: str, repeats: int, batch: bool, again: bool) -> str:
    """A judging job queued through the API (judging.transcripts_judge_later): judge the rubric's items; the
    result is the job's report (judged, skipped, failed, calls, tokens with cached ones apart, cost). By batch,
    the worker sends the batch and returns; batch_poll_task stores the scores when it ends."""
    return str(
        judging.transcripts_judge(
            rubric=rubric,
            provider=provider or None,
            repeats=repeats,
            only_missing=not again,
            batch=batch or None,
            wait=False,
        )
    )


def batch_poll_task(batch_pk: int) -> str:
    """A provider batch of judging work: poll it once; store its answers when it has ended, else poll later."""
    return judging.judging_batch_poll(batch_pk=batch_pk)


def runs_sweep_task() -> list[str]:
    """django-q2 schedule (every minute): one sweep (run_services.runs_sweep). The sweeper thread of
    each worker process sweeps more often; this one also serves a cluster started before it."""
    ended = run_services.runs_sweep()
    try:
        judging.judging_batches_repoll()
    except Exception as exc:  # the runs' sweep stands whatever the batches' check meets
        log.warning("re-polling open judging batches failed: %s", exc)
    return ended


def preload() -> None:
    """Import now what a run would otherwise import on first use: the LLM vendors' SDKs (the openai
    package alone takes seconds), scipy's statistics (the reports' intervals), the WebSocket client
    (the simulated student's side of the session protocol) and the channel layer's backend (progress
    broadcasts; a layer is made and dropped, as a worker's first event would make one). The qcluster
    process calls it before it forks its workers, which then share what it imported; each worker
    calls it again at start, which costs nothing after a fork and covers a worker started some other
    way."""
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    from evaluation.providers.registry import preload as preload_vendors

    preload_vendors()
    importlib.import_module("scipy.stats")
    importlib.import_module("websockets.asyncio.client")
    if DEFAULT_CHANNEL_LAYER in channel_layers.configs:
        channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)


def sweep_on_worker_start(sender: object = None, proc_name: str = "", **kwargs: object) -> None:
    """A worker process that starts (after a crash, say) imports what runs use (preload), so its
    first run does not wait for it, sweeps once (ending the runs whose worker died), and starts its
    sweeper thread, which sweeps every quarter of EVAL_RUN_STALE_AFTER (at most 30 s): a killed
    worker's run is marked within the limit plus that interval while any worker process lives. A
    database that is away now fails the first sweep only (one log line); the thread tries again."""
    preload()
    ended = run_services.runs_sweep()
    if ended:
        log.warning("%s: marked interrupted on start: %s", proc_name, ", ".join(ended))
    from django_q.conf import Conf

    if not Conf.SYNC:
        # django-q2's sync mode (the CLI, tests) runs a task through the same worker function in the
        # calling process: that process is no worker to keep alive, and its sweeper would outlive the task.
        run_services.sweeper_start()
