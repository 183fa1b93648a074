"""The run kernel's writes: create, capacity, queue, and the ONE lifecycle every kind of run follows.

    queued --begin--> running --complete--> completed
       |                 |-----fail-------> failed        (any exception, SystemExit and timeouts too)
       |                 |-----interrupt--> interrupted   (heartbeat older than EVAL_RUN_STALE_AFTER)
       +----cancel-------+-----cancel-----> cancelled     (the worker sees it at its next progress)
    failed | interrupted | completed --requeue--> queued (a new attempt)

Every transition is a conditional UPDATE (`... WHERE status IN (...) AND attempt = N`), so two
workers, or a worker and a sweeper, can never both win. A task carries the run id and the attempt;
a task for another attempt, or for a run that is no longer queued, does nothing.
"""

import logging
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.text import slugify
from psycopg_pool import PoolTimeout

from evaluation.conf import setting
from evaluation.errors import CapacityReached, PlainMessage, RunBusy
from evaluation.models import EvaluationRun, RunEvent, statements
from evaluation.models.runs import ACTIVE_STATUSES, DEFAULT_SOURCE, RETRYABLE_STATUSES, RunSource, RunStage, RunStatus
from evaluation.redact import redact
from evaluation.runs.broadcast import Listener, broadcast, discard
from evaluation.runs.outage import close_broken_connection, database_unavailable, retrying
from evaluation.runs.selectors import HELD, SENT, WAITING
from evaluation.runs.stopping import WorkerStop, WorkerStopped, worker_stop

log = logging.getLogger(__name__)
lifecycle = logging.getLogger("evaluation.runs.lifecycle")
"""One line when a worker begins a run and one when it ends it (INFO; EVAL_RUN_LOG_LEVEL), so a qcluster says what it does."""

TASK = "evaluation.tasks.run_task"
"""The one django-q2 entry point; it dispatches on the run's kind (evaluation/tasks.py)."""

# A lock key of our own for pg_advisory_xact_lock: serialises capacity checks across processes.
_CAPACITY_LOCK_KEY = 0x45564131


class RunStopped(Exception):
    """The run left `running` under its worker (cancelled or interrupted): stop working on it."""


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def actor_of(user: Any) -> str:
    """How the run's event log names who acted: user:<name> for a person or a token, else cli."""
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{user.get_username()}"
    return "cli"


def _event(run: EvaluationRun, status: str, actor: str, note: str = "") -> None:
    statements.insert(RunEvent, run_id=run.pk, attempt=run.attempt, status=status, actor=actor[:200], note=note[:2000])


def safe_run_id(base_id: str) -> str:
    """A readable id that is safe as a folder name and in a URL: a slug, never a raw '/'."""
    return slugify(base_id.replace("/", "-")).replace("-", "_")[:100] or "run"


def run_create(*, base_id: str, kind: str, user: Any = None, **fields: Any) -> EvaluationRun:
    """Create a queued run whose readable id (its report folder) is unique, suffixing _2, _3 on collision;
    `user` (a person or an API token's user) is recorded as who started it."""
    base = safe_run_id(base_id)
    fields.setdefault("source", DEFAULT_SOURCE.get(kind, RunSource.SIMULATED))
    started_by = user if user is not None and getattr(user, "is_authenticated", False) else None
    for n in range(1, 1000):
        run_id = base if n == 1 else f"{base}_{n}"
        try:
            with transaction.atomic():
                run = EvaluationRun.objects.create(run_id=run_id, kind=kind, started_by=started_by, **fields)
                _event(run, RunStatus.QUEUED, actor_of(user), "created")
                return run
        except IntegrityError:
            if not EvaluationRun.objects.filter(run_id=run_id).exists():
                raise
    raise RuntimeError(f"could not find a free run id for {base}")


@dataclass(frozen=True)
class Occupancy:
    """Active runs, split into those holding a slot (running, sent to a worker, or run in-process)
    and those waiting in the queue for one."""

    holding: int
    waiting: int


def _lock_capacity() -> None:
    """Serialise capacity decisions across processes for the rest of the transaction: PostgreSQL
    takes an advisory transaction lock; SQLite's IMMEDIATE transactions already hold the write lock."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CAPACITY_LOCK_KEY])


def occupancy() -> Occupancy:
    counts = EvaluationRun.objects.filter(status__in=ACTIVE_STATUSES).aggregate(
        total=Count("pk"), waiting=Count("pk", filter=WAITING)
    )
    return Occupancy(holding=counts["total"] - counts["waiting"], waiting=counts["waiting"])


@contextmanager
def capacity_reserved(adding: int, *, queue: bool = True) -> Iterator[None]:
    """A transaction in which `adding` runs may be created.

    Queued runs (`queue=True`, handed to workers by `run_enqueue`) never exceed EVAL_MAX_ACTIVE_RUNS
    at once: beyond it they wait, and only a queue longer than EVAL_MAX_QUEUED_RUNS is refused. Runs
    the caller executes in its own process (`queue=False`, the CLI) cannot wait, so they need free
    slots now. The check and the inserts share one transaction under the capacity lock.
    """
    with transaction.atomic():
        _lock_capacity()
        limit = int(setting("MAX_ACTIVE_RUNS"))
        now = occupancy()
        free = max(0, limit - now.holding)
        if not queue:
            if now.holding + now.waiting + adding > limit:
                raise CapacityReached(
                    f"{now.holding + now.waiting} runs are active and the limit is {limit} (EVAL_MAX_ACTIVE_RUNS); "
                    f"{adding} more cannot start now"
                )
        else:
            queue_limit = int(setting("MAX_QUEUED_RUNS"))
            if now.waiting + max(0, adding - free) > queue_limit:
                raise CapacityReached(
                    f"{now.holding} runs are active (EVAL_MAX_ACTIVE_RUNS is {limit}) and {now.waiting} wait; "
                    f"the queue limit is {queue_limit} (EVAL_MAX_QUEUED_RUNS), so {adding} more cannot be queued now"
                )
        yield


def run_enqueue(run: EvaluationRun, action: str = "execute") -> None:
    """Queue the run's current attempt: its task goes to a worker once the transaction commits and a
    slot is free (EVAL_MAX_ACTIVE_RUNS); until then it waits `queued`, oldest first."""
    EvaluationRun.objects.filter(pk=run.pk).update(queue_action=action)
    run.queue_action = action
    transaction.on_commit(runs_dispatch_safely)


def runs_dispatch() -> list[str]:
    """Hand waiting runs to the workers, oldest first, while fewer than EVAL_MAX_ACTIVE_RUNS hold a
    slot; returns their ids. Called when runs are queued, when a run ends, and by the sweep schedule."""
    if not EvaluationRun.objects.filter(WAITING).exists():
        # Nothing waits: no capacity lock (nor, on SQLite, the write lock) for every run that ends. A run
        # queued after this read hands itself over once it commits, and sees this run's slot free.
        return []
    sent: list[tuple[str, int, str, str, str]] = []
    with transaction.atomic():
        _lock_capacity()
        free = int(setting("MAX_ACTIVE_RUNS")) - occupancy().holding
        if free <= 0:
            return []
        now = timezone.now()
        waiting = EvaluationRun.objects.filter(WAITING).order_by("created_at", "run_id")
        rows = waiting.values_list("pk", "attempt", "queue_action", "run_id", "kind")[:free]
        for pk, attempt, action, run_id, kind in rows:
            where = {"pk": pk, "attempt": attempt, "status": RunStatus.QUEUED}
            if statements.update(EvaluationRun, where, sent_attempt=attempt, heartbeat_at=now):
                sent.append((str(pk), attempt, action, run_id, kind))
        transaction.on_commit(lambda: _send(sent))
    return [run_id for _, _, _, run_id, _ in sent]


def runs_dispatch_safely() -> None:
    """runs_dispatch for places where a failure must not break anything else (the sweep retries)."""
    try:
        runs_dispatch()
    except Exception:
        log.warning("handing queued runs to workers failed; the sweep schedule tries again", exc_info=True)


_broker: Any = None
_broker_lock = threading.Lock()


def broker() -> Any:
    """This process's django-q2 broker, made once. Given none, django-q2 makes a broker (on Redis, a
    client with a connection pool and a new connection) for every `async_task` and `Stat.get_all`;
    a worker sends at least one of each for every run. A forked process makes its own."""
    global _broker
    if _broker is None:
        with _broker_lock:
            if _broker is None:
                from django_q.brokers import get_broker

                _broker = get_broker()
    return _broker


def _forget_broker() -> None:
    """In a forked child: the parent's broker and its sockets are the parent's; so is its lock, which
    another thread of the parent may have held at the fork."""
    global _broker, _broker_lock
    _broker, _broker_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_broker)


_CLUSTERS_KEPT_FOR = 1.0
_clusters: tuple[float, int] = (-_CLUSTERS_KEPT_FOR, 1)
MAX_TASK_COPIES = 8


def task_copies() -> int:
    """How many copies of a run's task go to the broker: one per live qcluster process (counted at
    most once a second), at most MAX_TASK_COPIES.

    A cluster's pusher takes a task from the broker whenever its own queue has room, even while all
    of its workers are busy; the task then waits there for a worker, up to a whole run, while a
    worker of another cluster is idle. With a copy for each cluster, the first worker free anywhere
    begins the run (the conditional begin lets one copy win) and the later copies find it begun and
    do nothing. Too few copies (a count older than a cluster that has just started) can leave a
    worker of the new cluster idle for a whole run, so the count is kept for one second only. In
    sync mode, and where the clusters cannot be counted, one copy.
    """
    global _clusters
    from django_q.conf import Conf

    if Conf.SYNC:
        return 1
    now = time.monotonic()
    if now - _clusters[0] < _CLUSTERS_KEPT_FOR:
        return _clusters[1]
    try:
        count = live_clusters()
    except Exception:
        log.debug("django-q2 cluster stats could not be read; one copy per task", exc_info=True)
        count = 1
    _clusters = (now, max(1, min(count, MAX_TASK_COPIES)))
    return _clusters[1]


def live_clusters() -> int:
    """The qcluster processes whose stats django-q2 published in the last few seconds (each cluster
    refreshes them every half second, with a 3 s expiry). On Redis their keys are counted, one KEYS
    round trip; elsewhere the stats are read and unpacked."""
    from django_q.status import Stat

    client = broker()
    redis = _redis_client(client)
    if redis is not None:
        return len(redis.keys(Stat.get_key("*")))
    return len(Stat.get_all(client))


def _redis_client(client: Any) -> Any:
    """The redis-py client behind django-q2's own Redis broker; None for any other broker, a subclass
    included (it may keep its stats elsewhere: it is asked through Stat.get_all)."""
    try:
        from django_q.brokers.redis_broker import Redis
    except ImportError:  # the redis extra is not installed, so it is not a Redis broker
        return None
    return client.connection if type(client) is Redis else None


def _send(tasks: list[tuple[str, int, str, str, str]]) -> None:
    """Send each run's task (pk, attempt, action, run_id, kind): its kind rides along, so the worker,
    and each copy it skips, does not read it first."""
    from django_q.tasks import async_task

    copies = task_copies() if tasks else 1
    for pk, attempt, action, run_id, kind in tasks:
        try:
            for _ in range(copies):
                async_task(TASK, pk, attempt, action, kind, task_name=f"{action} {run_id}"[:100], broker=broker())
        except Exception:
            # The broker refused it: the run waits again, and the next dispatch sends it.
            log.warning("could not hand run %s to the broker", run_id, exc_info=True)
            EvaluationRun.objects.filter(pk=pk, attempt=attempt, sent_attempt=attempt).update(sent_attempt=0)


def runs_resend_lost(*, stale_after: float | None = None) -> list[str]:
    """Send again the tasks of runs that were handed to the workers but not begun within the stale
    limit (a broker that lost them, a cluster killed with them prefetched); a duplicate does nothing."""
    limit = float(stale_after if stale_after is not None else setting("RUN_STALE_AFTER"))
    cutoff = timezone.now() - timedelta(seconds=limit)
    lost = EvaluationRun.objects.filter(SENT, heartbeat_at__lt=cutoff)
    resent = []
    for pk, attempt, action, run_id, kind in lost.values_list("pk", "attempt", "queue_action", "run_id", "kind"):
        # Conditional on the old heartbeat too: of several sweepers that found it, one sends it.
        again = EvaluationRun.objects.filter(pk=pk, attempt=attempt, status=RunStatus.QUEUED, heartbeat_at__lt=cutoff)
        if again.update(heartbeat_at=timezone.now()):
            resent.append((str(pk), attempt, action, run_id, kind))
    _send(resent)
    return [run_id for _, _, _, run_id, _ in resent]


def run_requeue(
    run: EvaluationRun, *, action: str = "execute", detail: str = "Waiting for a worker", user: Any = None
) -> EvaluationRun:
    """Queue a new attempt of a finished run (failed, interrupted, or completed for a re-evaluation)."""
    allowed = (*RETRYABLE_STATUSES, RunStatus.COMPLETED)
    with capacity_reserved(1):
        updated = EvaluationRun.objects.filter(pk=run.pk, status__in=allowed, attempt=run.attempt).update(
            status=RunStatus.QUEUED,
            stage=RunStage.QUEUED,
            attempt=run.attempt + 1,
            detail=detail,
            heartbeat_at=None,
            worker="",
            error="",
            error_traceback="",
            completed_at=None,
        )
        if not updated:
            run.refresh_from_db(fields=["status", "attempt"])
            raise RunBusy(
                f"run {run.run_id} is {run.status}; only failed, interrupted or completed runs can be retried"
            )
        run.refresh_from_db()
        _event(run, RunStatus.QUEUED, actor_of(user), "re-evaluate" if action == "evaluate" else "retry")
        run_enqueue(run, action)
    return run


def run_cancel(run: EvaluationRun, *, user: Any = None) -> EvaluationRun:
    """End a queued or running run as cancelled; its worker stops at its next unit of progress."""
    updated = EvaluationRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.CANCELLED, stage=RunStage.CANCELLED, detail="Cancelled", completed_at=timezone.now()
    )
    run.refresh_from_db()
    if not updated:
        raise RunBusy(f"run {run.run_id} is {run.status}; only queued or running runs can be cancelled")
    _event(run, RunStatus.CANCELLED, actor_of(user))
    broadcast(run)
    transaction.on_commit(runs_dispatch_safely)  # its slot is free
    return run


def runs_interrupt_stale(*, stale_after: float | None = None) -> list[str]:
    """Mark running runs whose heartbeat is older than the limit as interrupted; returns their ids."""
    limit = float(stale_after if stale_after is not None else setting("RUN_STALE_AFTER"))
    cutoff = timezone.now() - timedelta(seconds=limit)
    ended = []
    for run in EvaluationRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff):
        alive = liveness_read(run, limit)
        if alive is not None and not process_gone(run.worker):
            # Alive but starved: its heartbeat cannot reach the database, its liveness beat says it lives.
            waiting = f"worker alive, no heartbeat for over {limit:g} s; {alive}"
            log.warning("run %s not interrupted: %s", run.run_id, waiting)
            EvaluationRun.objects.filter(
                pk=run.pk, status=RunStatus.RUNNING, attempt=run.attempt, heartbeat_at__lt=cutoff
            ).exclude(detail=waiting[:200]).update(detail=waiting[:200])
            continue
        host = run.worker.rpartition(":")[0]
        if process_gone(run.worker):
            why = f"its worker process {run.worker} has ended"
        elif host == socket.gethostname():
            # alive here, but no longer beating for this run: it let the run go without storing its end
            why = (
                f"its worker process {run.worker} lives but no longer works on the run: it gave up (a database "
                "outage longer than this limit, say) without storing the run's end"
            )
        else:
            why = "no liveness beat either: the worker stopped, was killed, or lost the database for longer"
        reason = (
            f"interrupted: no progress from worker {run.worker or '?'} for over {limit:g} s "
            f"(EVAL_RUN_STALE_AFTER); {why}. Retry to run it again."
        )
        if EvaluationRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, attempt=run.attempt).update(
            status=RunStatus.INTERRUPTED,
            stage=RunStage.INTERRUPTED,
            error=reason,
            detail=f"interrupted at {run.stage}",
            completed_at=timezone.now(),
        ):
            ended.append(run.run_id)
            run.refresh_from_db()
            _event(run, RunStatus.INTERRUPTED, "sweeper", reason)
            broadcast(run)
    if ended:
        transaction.on_commit(runs_dispatch_safely)  # their slots are free
    return ended


def liveness_path(run: EvaluationRun) -> Path:
    """The file a running run's worker touches every beat without the database (its liveness beat):
    under EVAL_RUNS_DIR, so workers of several machines that share it (docs/scaling.md) see each other's."""
    return Path(setting("RUNS_DIR")) / ".alive" / f"{run.pk}.{run.attempt}"


def liveness_read(run: EvaluationRun, limit: float) -> str | None:
    """What the run's worker last said of itself, if its liveness beat is younger than `limit` seconds and
    comes from the worker the run names; else None (no beat, an old one, or another worker's)."""
    path = liveness_path(run)
    try:
        age = time.time() - path.stat().st_mtime
        worker, _, state = path.read_text(encoding="utf-8").partition("\n")
    except (OSError, ValueError):
        return None
    if age > limit or worker != run.worker:
        return None
    return f"liveness beat {max(0.0, age):.0f} s ago: {state.strip() or 'working'}"


def process_gone(worker: str) -> bool:
    """Whether the process a `host:pid` names has ended: known only on its own host (elsewhere, False)."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def run_hold(run: EvaluationRun) -> None:
    """A run its creator executes in its own process (a CLI batch), not a worker: it records that process
    (host:pid) and a first heartbeat, so that a sweep ends the run if that process goes before starting it."""
    now = timezone.now()
    EvaluationRun.objects.filter(pk=run.pk).update(worker=worker_id(), heartbeat_at=now)
    run.worker, run.heartbeat_at = worker_id(), now


def _cancel_held(where: Any, reason: str, actor: str) -> list[str]:
    """Cancel the runs `where` selects, with the reason as their error; -> their ids."""
    ended = []
    for run in EvaluationRun.objects.filter(where):
        if EvaluationRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES, attempt=run.attempt).update(
            status=RunStatus.CANCELLED,
            stage=RunStage.CANCELLED,
            error=reason,
            detail="Cancelled: " + reason[:200],
            completed_at=timezone.now(),
        ):
            ended.append(run.run_id)
            run.refresh_from_db()
            _event(run, RunStatus.CANCELLED, actor, reason)
            broadcast(run)
    if ended:
        transaction.on_commit(runs_dispatch_safely)  # their slots are free
    return ended


def runs_cancel_orphaned(*, stale_after: float | None = None) -> list[str]:
    """Cancel queued runs held by a process that is gone (a CLI batch killed before it started them):
    on that process's host at once, elsewhere once its heartbeat is older than EVAL_RUN_STALE_AFTER."""
    limit = float(stale_after if stale_after is not None else setting("RUN_STALE_AFTER"))
    cutoff = timezone.now() - timedelta(seconds=limit)
    held = EvaluationRun.objects.filter(HELD).exclude(worker="")  # run_hold recorded the process
    gone = [w for w in held.values_list("worker", flat=True).distinct() if process_gone(w)]
    where = HELD & ~Q(worker="") & (Q(heartbeat_at__lt=cutoff) | Q(worker__in=gone))
    ended = []
    for worker in set(EvaluationRun.objects.filter(where).values_list("worker", flat=True)):
        state = "has ended" if worker in gone else f"has not been heard from for over {limit:g} s"
        reason = (
            f"the batch that created this run (process {worker}) {state} before starting it; "
            "start the run again if it is still wanted"
        )
        ended += _cancel_held(where & Q(worker=worker), reason, "sweeper")
    return ended


class BatchStopped(KeyboardInterrupt):
    """An in-process batch was told to stop (SIGTERM, say). A KeyboardInterrupt, so that it travels as Ctrl-C
    does: out of an event loop's callbacks (asyncio and uvloop re-raise only KeyboardInterrupt and SystemExit
    from a signal handler; another exception is logged there and lost), failing the run in progress saying
    so, to the batch. returncode: the exit status the process should end with (128 + the signal's number)."""

    def __init__(self, message: str, returncode: int = 1):
        super().__init__(message)
        self.returncode = returncode

    def __str__(self) -> str:
        return str(self.args[0])


def _why_stopped(exc: BaseException) -> str:
    if isinstance(exc, BatchStopped):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "the batch was interrupted (SIGINT, Ctrl-C)"
    if isinstance(exc, BrokenPipeError):
        return "the batch stopped: its output pipe was closed"
    return f"the batch stopped: {type(exc).__name__}: {exc}"


@contextmanager
def runs_held(runs: list[EvaluationRun]) -> Iterator[None]:
    """While a process executes its own runs (run_hold): a thread beats the heartbeat of those still
    waiting, so a sweep tells a live batch from a dead one; and whatever stops the batch early (an error,
    Ctrl-C, SIGTERM, a closed output pipe), its runs not yet ended are cancelled, saying why (one that is
    running stops at its next unit of progress), before the error goes on."""
    pks = [r.pk for r in runs]
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(max(0.5, _stale_after() / 4)):
            try:
                EvaluationRun.objects.filter(HELD, pk__in=pks).update(heartbeat_at=timezone.now())
            except Exception as exc:
                log.warning("heartbeat of the batch's waiting runs failed: %s", str(exc).strip())
                close_broken_connection()
            finally:
                connection.close()

    thread = threading.Thread(target=loop, name="batch-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    except BaseException as exc:
        reason = _why_stopped(exc)
        try:
            ended = _cancel_held(Q(pk__in=pks, status__in=ACTIVE_STATUSES), reason, "cli")
            if ended:
                log.warning("%s: cancelled %s", reason, ", ".join(ended))
        except Exception as failure:  # the database is away: the sweep ends them once it is back
            log.warning("%s; its runs could not be cancelled now: %s", reason, str(failure).strip())
        raise
    finally:
        stop.set()
        thread.join(timeout=5)


STALE_ON_READ_EVERY = 5.0
"""Seconds between two marks of stale runs made by status reads in one process."""

_stale_read_at = -STALE_ON_READ_EVERY
_stale_read_lock = threading.Lock()


def runs_interrupt_stale_on_read() -> None:
    """A status read (the API's run list, detail and status, the dashboard, a run's page) marks the runs
    whose worker is gone, at most once every STALE_ON_READ_EVERY seconds per process and never two at
    once: a deployment whose workers all died still shows the truth. A failed mark is logged and the
    read goes on."""
    global _stale_read_at
    now = time.monotonic()
    if now - _stale_read_at < STALE_ON_READ_EVERY or not _stale_read_lock.acquire(blocking=False):
        return
    try:
        _stale_read_at = now
        ended = runs_interrupt_stale() + runs_cancel_orphaned()
        if ended:
            log.warning("marked interrupted on a status read: %s", ", ".join(ended))
    except Exception as exc:
        if isinstance(exc.__cause__, PoolTimeout):
            raise  # no connection to be had: the read would wait as long again for one, then fail the same way
        log.warning("marking stale runs on a status read failed: %s", str(exc).strip())
        if not connection.in_atomic_block:
            close_broken_connection()
    finally:
        _stale_read_lock.release()


def runs_sweep() -> list[str]:
    """One sweep: runs whose worker stopped beating are marked interrupted, tasks a broker lost are
    sent again, and waiting runs take the slots that are free (and those whose task the broker
    refused are sent now). Each step is tried whatever the one before it met; a failed step is one
    log line, and the next sweep tries again. Returns the runs it marked interrupted."""
    ended: list[str] = []
    steps = (
        ("interrupt", runs_interrupt_stale),
        ("orphans", runs_cancel_orphaned),
        ("resend", runs_resend_lost),
        ("dispatch", runs_dispatch),
    )
    for name, step in steps:
        try:
            result = step()
        except Exception as exc:
            log.warning("sweep: %s failed: %s: %s", name, type(exc).__name__, str(exc).strip())
            close_broken_connection()
            continue
        if name in ("interrupt", "orphans"):
            ended += result
    return ended


def sweep_interval() -> float:
    """Seconds between two sweeps of a sweeper thread: a quarter of EVAL_RUN_STALE_AFTER, at most 30,
    so a dead worker's run is marked within the limit plus one interval."""
    return max(0.5, min(30.0, float(setting("RUN_STALE_AFTER")) / 4))


_sweeper: threading.Thread | None = None


def sweeper_start() -> threading.Thread:
    """A daemon thread of this process that sweeps (runs_sweep) every sweep_interval(); one per
    process (a forked child starts its own). Each qcluster worker process runs one, so stale runs
    are marked within the limit plus an interval while any worker lives."""
    global _sweeper
    if _sweeper is not None and _sweeper.is_alive():
        return _sweeper

    def loop() -> None:
        interval = sweep_interval()
        while True:
            time.sleep(interval)
            try:
                ended = runs_sweep()
                if ended:
                    log.warning("sweeper: marked interrupted: %s", ", ".join(ended))
            except Exception:  # runs_sweep catches its steps' errors; this keeps the thread whatever else
                log.warning("sweeper: sweep failed", exc_info=True)
            finally:
                close_broken_connection()  # back to the pool between sweeps

    _sweeper = threading.Thread(target=loop, name="runs-sweeper", daemon=True)
    _sweeper.start()
    return _sweeper


def _forget_sweeper() -> None:
    global _sweeper, _stale_read_lock
    _sweeper, _stale_read_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_sweeper)


@dataclass
class RunHandle:
    """What a kind's work gets: the run, and the one way to record progress (which is also the heartbeat)."""

    run: EvaluationRun
    listener: Listener | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def progress(self, **fields: Any) -> None:
        """Save these fields and the heartbeat, then broadcast; raises RunStopped if the run left `running`.
        A database that is away (restarting, say) is waited for, up to EVAL_RUN_STALE_AFTER."""
        with self._lock:
            where = {"pk": self.run.pk, "status": RunStatus.RUNNING, "attempt": self.run.attempt}

            def write() -> int:
                fields["heartbeat_at"] = timezone.now()
                return statements.update(EvaluationRun, where, **fields)

            updated = retrying(write, what=f"progress of {self.run.run_id}", for_seconds=_stale_after())
            for key, value in fields.items():
                setattr(self.run, key, value)
        if not updated:
            status = EvaluationRun.objects.filter(pk=self.run.pk).values_list("status", flat=True).first()
            discard(self.run)  # what this process holds of it is older than what stopped it
            raise RunStopped(f"run {self.run.run_id} is {status}")
        broadcast(self.run, self.listener)

    def beat(self) -> bool:
        """Heartbeat only; False when the run is no longer this attempt's to run."""
        return bool(
            EvaluationRun.objects.filter(pk=self.run.pk, status=RunStatus.RUNNING, attempt=self.run.attempt).update(
                heartbeat_at=timezone.now()
            )
        )


Work = Callable[[RunHandle], dict[str, Any] | None]
"""A kind's work: it records progress through the handle and returns the fields to store on completion."""
OnFailure = Callable[[RunHandle, BaseException, str, str], None]
"""Kind-specific clean-up after a failure (e.g. error.txt and partial reports): handle, exc, message, traceback."""


def _begin(run_pk: Any, attempt: int) -> EvaluationRun | None:
    now = timezone.now()
    updated = statements.update(
        EvaluationRun,
        {"pk": run_pk, "attempt": attempt, "status": RunStatus.QUEUED},
        status=RunStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
        worker=worker_id(),
        error="",
        error_traceback="",
        completed_at=None,
    )
    if not updated:
        return None
    run = statements.get(EvaluationRun, run_pk, related=("persona", "topic", "agent"))
    if run is None:
        return None  # deleted between the two statements
    _event(run, RunStatus.RUNNING, f"worker:{run.worker}")
    lifecycle.info("run %s (%s, attempt %s) began on %s", run.run_id, run.kind, attempt, run.worker)
    return run


@contextmanager
def _heartbeat(handle: RunHandle) -> Iterator[None]:
    """Beat from a thread while the work runs, so a long LLM call is not mistaken for a dead worker.

    Two beats: the heartbeat (heartbeat_at, in the database) and the liveness beat (a file's time,
    liveness_path, touched by a thread of its own that never touches the database). A worker starved of
    database connections (every slot taken) cannot beat its heartbeat, but its liveness beat goes on
    and says why (waiting for a database connection since when): a sweep then leaves the run running
    and shows that in its detail, instead of declaring the worker dead. Both threads die with their
    process, so a killed worker stops both beats and the sweeper ends its run.
    """
    interval = max(0.5, float(setting("RUN_STALE_AFTER")) / 4)
    stop = threading.Event()
    state = {"text": "working"}
    alive_file = liveness_path(handle.run)

    def live() -> None:
        try:
            alive_file.parent.mkdir(parents=True, exist_ok=True)
            while True:
                alive_file.write_text(f"{handle.run.worker}\n{state['text']}", encoding="utf-8")
                if stop.wait(interval):
                    return
        except OSError as exc:  # no liveness beat: a stale heartbeat then reads as a dead worker, as before
            log.warning("liveness beat of %s failed: %s", handle.run.run_id, exc)
        finally:
            alive_file.unlink(missing_ok=True)

    def loop() -> None:
        failing = False
        try:
            while not stop.wait(interval):
                if not failing:  # what the liveness beat says while this beat waits for a connection
                    state["text"] = f"waiting for a database connection since {timezone.now():%H:%M:%S} UTC"
                try:
                    beating = handle.beat()
                    state["text"] = "working"
                    # Back to the pool between beats: a worker's pool is small (EVAL_DB_WORKER_POOL_MAX),
                    # and the run's own thread and its message store hold two of it while it runs.
                    connection.close()
                    if not beating:
                        return
                except Exception as exc:
                    # The database is away or every connection is taken: keep trying while the work runs,
                    # so that the run beats again once it is back; one log line for the outage, not one
                    # per beat. The liveness beat says meanwhile that this worker lives and waits.
                    if not failing:
                        log.warning("heartbeat of %s failed: %s", handle.run.run_id, str(exc).strip())
                        state["text"] += f" ({database_unavailable(exc) or type(exc).__name__})"
                    failing = True
                    close_broken_connection()
                    continue
                if failing:
                    log.warning("heartbeat of %s beats again", handle.run.run_id)
                    failing = False
        finally:
            connection.close()

    threads = [
        threading.Thread(target=live, name=f"liveness-{handle.run.run_id}", daemon=True),
        threading.Thread(target=loop, name=f"heartbeat-{handle.run.run_id}", daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)


TIME_LIMIT_MESSAGE = "the task ran past its time limit (EVAL_TASK_TIMEOUT) and was stopped"
_task_alarm = threading.Event()


class _NotedAlarm:
    """django-q2's SIGALRM handler, wrapped to note first that the alarm went off."""

    def __init__(self, handler: Callable[[int, Any], Any]) -> None:
        self.handler = handler

    def __call__(self, signum: int, frame: Any) -> Any:
        _task_alarm.set()
        return self.handler(signum, frame)


def task_time_limit_watch() -> None:
    """Call at the start of a worker's task, in its main thread. django-q2 stops a task past
    EVAL_TASK_TIMEOUT by SIGALRM, whose handler raises TimeoutException wherever the main thread is: inside
    a conversation's event loop a library can catch it and fail in its own words (a WebSocket "closed
    abnormally"). With the handler wrapped, the run still says that the time limit ended it."""
    _task_alarm.clear()
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGALRM)
    if callable(handler) and not isinstance(handler, _NotedAlarm):
        signal.signal(signal.SIGALRM, _NotedAlarm(handler))


def failure_message(exc: BaseException) -> str:
    """What a person reads: our own errors speak for themselves; others are named by type."""
    from django_q.exceptions import TimeoutException

    if isinstance(exc, TimeoutException) or _task_alarm.is_set():
        return TIME_LIMIT_MESSAGE
    if isinstance(exc, (PlainMessage, BatchStopped)):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT, Ctrl-C)"
    return f"{type(exc).__name__}: {exc}"


def run_execute(
    run_pk: Any,
    attempt: int,
    work: Work,
    *,
    on_failure: OnFailure | None = None,
    after: Callable[[EvaluationRun], None] | None = None,
    listener: Listener | None = None,
) -> EvaluationRun | None:
    """Run one attempt of a run through the lifecycle; None when the attempt is not this call's to run.

    The run always ends `completed`, `failed` (any exception, SystemExit and task timeouts included),
    `interrupted` when SIGTERM stops its qcluster worker (evaluation/runs/stopping.py), or stays as another
    party left it (`cancelled`, `interrupted`). Only non-Exception BaseExceptions are re-raised after the
    run is marked (a stopped worker's as SystemExit), so the worker process still stops as it was told to.
    """
    run = _begin(run_pk, attempt)
    if run is None:
        log.info("run %s attempt %s is not queued: nothing to do", run_pk, attempt)
        return None
    handle = RunHandle(run, listener)
    with worker_stop() as stop:
        _run_work(handle, work, stop, on_failure=on_failure, after=after)
    if stop.signum:  # the run's end is stored: the worker process now stops as it was told to
        raise SystemExit(128 + stop.signum)
    return run


def _run_work(
    handle: RunHandle,
    work: Work,
    stop: WorkerStop,
    *,
    on_failure: OnFailure | None,
    after: Callable[[EvaluationRun], None] | None,
) -> None:
    run = handle.run
    broadcast(run, handle.listener)
    try:
        with _heartbeat(handle):
            stop.raising = True  # SIGTERM from here on raises WorkerStopped in the work
            try:
                final = work(handle) or {}
            finally:
                stop.raising = False
        _end(handle, RunStatus.COMPLETED, {"stage": RunStage.COMPLETED, "detail": "Complete", **final})
    except RunStopped as exc:
        log.info("run %s stopped: %s", run.run_id, exc)
        run.refresh_from_db()
    except WorkerStopped as exc:
        # Not the run's failure: its worker was stopped (a qcluster shut down). Ended now, as a sweep
        # would end it EVAL_RUN_STALE_AFTER later, with the reason.
        message = (
            f"interrupted: {exc} at {run.stage}, turn {run.turn} (worker {run.worker}; its qcluster was "
            "shut down). Retry to run it again."
        )
        _failure_clean_up(handle, exc, message, on_failure)
        fields = {"stage": RunStage.INTERRUPTED, "error": message, "detail": f"interrupted at {run.stage}"}
        _end(handle, RunStatus.INTERRUPTED, fields)
    except BaseException as exc:
        # What is stored and written (error, traceback, error.txt, run.log) never shows a URL's credentials.
        message = redact(failure_message(exc))
        text = _failure_clean_up(handle, exc, message, on_failure)
        _end(
            handle,
            RunStatus.FAILED,
            {"stage": RunStage.FAILED, "error": message, "error_traceback": text, "detail": f"failed at {run.stage}"},
        )
        if not isinstance(exc, Exception):
            raise
    finally:
        if after is not None:
            try:
                after(run)
            except Exception:
                log.warning("after-run step of %s failed", run.run_id, exc_info=True)
        runs_dispatch_safely()  # this run's slot is free: the oldest waiting run takes it


def _failure_clean_up(handle: RunHandle, exc: BaseException, message: str, on_failure: OnFailure | None) -> str:
    """The run's traceback, redacted, after the caller's clean-up has been told of the failure (a failing clean-up
    is logged, never raised: the run still ends)."""
    text = redact("".join(traceback.format_exception(exc)))
    if on_failure is not None:
        try:
            on_failure(handle, exc, message, text)
        except Exception:
            log.warning("failure clean-up of %s failed", handle.run.run_id, exc_info=True)
    return text


def _stale_after() -> float:
    return float(setting("RUN_STALE_AFTER"))


def _end(handle: RunHandle, status: str, fields: dict[str, Any]) -> None:
    """Mark the run ended, with its event, in one transaction. A database that is away (restarting,
    say) is waited for up to EVAL_RUN_STALE_AFTER; past that the error is raised and the sweep marks
    the run interrupted once the database is back."""
    run = handle.run
    fields = {**fields, "status": status, "completed_at": timezone.now()}

    def write() -> bool:
        with transaction.atomic():
            where = {"pk": run.pk, "status": RunStatus.RUNNING, "attempt": run.attempt}
            if not statements.update(EvaluationRun, where, **fields):
                return False
            _event(run, status, f"worker:{run.worker}", str(fields.get("error", "")))
            return True

    if retrying(write, what=f"marking {run.run_id} {status}", for_seconds=_stale_after()):
        for key, value in fields.items():
            setattr(run, key, value)
        took = (fields["completed_at"] - run.started_at).total_seconds() if run.started_at else 0.0
        error = f": {fields['error']}" if fields.get("error") else ""
        lifecycle.info("run %s %s after %.1f s%s", run.run_id, status, took, str(error)[:300])
        broadcast(run, handle.listener)
    else:
        retrying(run.refresh_from_db, what=f"reading {run.run_id}", for_seconds=_stale_after())
