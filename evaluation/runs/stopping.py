"""A qcluster stops within seconds on SIGTERM or SIGINT, sent to its main process or to its whole process group.

django-q2 alone does not. Its main process stops by setting an event its sentinel waits on, and a
multiprocessing event wakes its waiters and then waits for each of them to say it woke: when the whole
group gets SIGTERM (systemd's default KillMode=control-group, `docker stop` under an init, Ctrl-C in a
terminal is SIGINT), the sentinel has died of it at once (SIGTERM is left at its default there), and the
main process waits for it for ever. With SIGTERM to the main process alone, the sentinel stops its
workers by queueing them a stop after their current task: a worker in a run stops only when the run ends.

So the main process takes the stop over (`_ClusterStop`), on Linux: it stops and kills the sentinel
(which has no state of its own to save) and SIGTERMs the sentinel's children (workers, pusher, monitor), waits up
to STOP_GRACE seconds for them and SIGKILLs what is left. A worker in a run (`worker_stop`) ends it
`interrupted`, saying that its worker was stopped and by which signal, writes its reports, and exits;
an idle worker, the pusher and the monitor die of the signal at once. A task the cluster had taken
from the broker but not begun is sent again by the sweep (`runs_resend_lost`).
"""

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STOP_GRACE = 10.0
"""Seconds a stopping qcluster gives its workers to mark their runs before it SIGKILLs them."""


_PR_SET_CHILD_SUBREAPER = 36


class WorkerStopped(KeyboardInterrupt):
    """The worker process running a run was told to stop (SIGTERM). A KeyboardInterrupt, so that it leaves
    a conversation's event loop as Ctrl-C does (asyncio and uvloop re-raise only KeyboardInterrupt and
    SystemExit from a signal handler)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"its worker was stopped ({signal.Signals(signum).name})")

    def __str__(self) -> str:
        return str(self.args[0])


class WorkerStop:
    """A worker's SIGTERM handler while it runs a run: the first signal raises WorkerStopped where the run's
    work is (`raising`), or is noted for after the run's end is stored; later ones are ignored."""

    def __init__(self) -> None:
        self.signum = 0
        self.raising = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.signum:
            return
        self.signum = signum
        if self.raising:
            self.raising = False
            raise WorkerStopped(signum)


def _in_cluster_worker() -> bool:
    """Is this the main thread of a process forked by `manage.py qcluster` (not django-q2's sync mode,
    where a task runs in the caller's process)?"""
    if sys.argv[1:2] != ["qcluster"] or threading.current_thread() is not threading.main_thread():
        return False
    from django_q.conf import Conf

    return not Conf.SYNC


@contextmanager
def worker_stop() -> Iterator[WorkerStop]:
    """While a qcluster worker runs a run, SIGTERM ends the run instead of killing the process mid-write
    (the run would then wait EVAL_RUN_STALE_AFTER for a sweep). Elsewhere, a handler that never fires."""
    stop = WorkerStop()
    if not _in_cluster_worker():
        yield stop
        return
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux: /proc/<pid>/task/<tid>/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    """Has `pid` not ended (a zombie has)? It is reaped here if it is our child (the main process is the
    init of a container without one)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


class _ClusterStop:
    """The qcluster main process's handler for SIGTERM and SIGINT, in place of django-q2's (see the module)."""

    def __init__(self, cluster: Any):
        self.cluster = cluster
        self.stopping = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.stopping:
            return
        self.stopping = True
        cluster = self.cluster
        cluster.start_event = None  # Cluster.start, if it is still waiting for the sentinel, stops waiting
        sentinel = cluster.sentinel
        if sentinel is None or sentinel.pid is None:
            return
        name = signal.Signals(signum).name
        log.warning("qcluster got %s: stopping its workers (a run they run ends interrupted)", name)
        started = time.monotonic()
        # The sentinel first, frozen (it cannot fork a worker in place of one that stops) and then killed: it
        # has nothing of its own to save. Its children are then ours (this process is their subreaper), so
        # they are found even when the sentinel died of the signal before this handler ran.
        _signal(sentinel.pid, signal.SIGSTOP)
        workers = set(_children(sentinel.pid))
        _signal(sentinel.pid, signal.SIGKILL)
        sentinel.join()  # waitpid: its pipe, which join(timeout) waits on, stays open in its children
        workers |= set(_children(os.getpid())) - {sentinel.pid}
        for pid in workers:
            _signal(pid, signal.SIGTERM)
        deadline = started + STOP_GRACE
        left = [pid for pid in workers if _alive(pid)]
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = [pid for pid in left if _alive(pid)]
        for pid in left:
            _signal(pid, signal.SIGKILL)
        if left:
            log.warning("qcluster: SIGKILLed %s, still running %.0f s after %s", left, STOP_GRACE, name)
        log.warning("qcluster stopped %.1f s after %s", time.monotonic() - started, name)


def _take_over(cluster: Any) -> None:
    # The cluster's processes stay this process's descendants when the sentinel between them dies
    # (PR_SET_CHILD_SUBREAPER, Linux 3.4): they are waited for instead of being left to init.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning(
            "qcluster: not a subreaper (errno %s): a group SIGTERM may not wait for its workers", ctypes.get_errno()
        )
    stop = _ClusterStop(cluster)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _before_fork() -> None:
    """In a process about to fork: if it is a qcluster's main process about to start its sentinel (django-q2's
    Cluster has just made its own handlers), take the stop over. Anywhere else, nothing."""
    cluster_module = sys.modules.get("django_q.cluster")
    if cluster_module is None or not Path("/proc/self/task").is_dir():
        return
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGTERM)
    cluster = getattr(handler, "__self__", None)
    if isinstance(cluster, cluster_module.Cluster):
        _take_over(cluster)


os.register_at_fork(before=_before_fork)
