"""Is the database gone for now? One answer for every door (a 503) and for the workers (wait and retry)."""

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from django.db import InterfaceError, OperationalError, connection
from psycopg_pool import PoolTimeout

log = logging.getLogger(__name__)

T = TypeVar("T")

# SQLSTATEs that mean the server went away or will not take the connection, not that the statement
# was wrong: connection exceptions (class 08), an administrator's or a crash's shutdown, a server
# still starting, too many clients.
_GONE_SQLSTATES = ("57P01", "57P02", "57P03", "53300")


BUSY = "the database is busy: every connection is in use, or none could be opened"
"""database_unavailable's reason for a pool that lent every connection it has, or could not open one."""


def database_unavailable(exc: BaseException) -> str | None:
    """Why the database could not serve the request, for a 503; None when the error is something else
    (a statement's own fault stays a 500).

    Busy: a pool timeout (psycopg_pool.PoolTimeout, which Django re-raises as OperationalError; it is
    also what a request meets while the pool cannot reconnect) or PostgreSQL refusing another client.
    Unavailable: the connection refused, closed or lost ("terminating connection due to administrator
    command", "server closed the connection unexpectedly", "the connection is closed"), which psycopg
    raises with a SQLSTATE of class 08 or 57P0x, or with none at all (the client side saw it)."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return None
    cause = exc.__cause__
    text = str(exc)
    if isinstance(cause, PoolTimeout) or "too many clients" in text or "remaining connection slots" in text:
        return BUSY
    gone = "the database is unavailable: the connection to it was refused or lost"
    if isinstance(cause, psycopg.OperationalError):
        state = cause.sqlstate
        return gone if state is None or state.startswith("08") or state in _GONE_SQLSTATES else None
    if isinstance(exc, InterfaceError) and "closed" in text:  # psycopg's or Django's "connection ... closed"
        return gone
    return None


def close_broken_connection() -> None:
    """Drop this thread's connection after a database failure, so that the next statement gets a
    fresh one (from the pool, which checks it) instead of the broken one."""
    try:
        connection.close()
    except Exception:  # closing a connection that is already gone may fail too; it is dropped either way
        log.debug("closing the failed database connection failed", exc_info=True)


def retrying(write: Callable[[], T], *, what: str, for_seconds: float, first_wait: float = 0.5) -> T:
    """Call `write` until it gets past a database that is unavailable (busy, restarting, lost), for at
    most `for_seconds`, waiting twice as long each time (up to 10 s); then, or on any other error, the
    error is raised. One log line when the database first fails and one when the write got through.
    Not inside a transaction: a connection lost in one cannot be resumed."""
    deadline = time.monotonic() + for_seconds
    wait = first_wait
    failed_at = None
    while True:
        try:
            result = write()
        except (OperationalError, InterfaceError) as exc:
            reason = database_unavailable(exc)
            if reason is None or connection.in_atomic_block or time.monotonic() + wait > deadline:
                raise
            if failed_at is None:
                failed_at = time.monotonic()
                log.warning("%s: %s (%s); retrying for up to %.0f s", what, reason, str(exc).strip(), for_seconds)
            close_broken_connection()
            time.sleep(wait)
            wait = min(wait * 2, 10.0)
            continue
        if failed_at is not None:
            log.warning("%s: done after the database came back (%.1f s)", what, time.monotonic() - failed_at)
        return result


PROBE_EVERY = 0.1
"""Seconds between two connection attempts of the circuit's probe while the database is down."""


class DatabaseCircuit:
    """Is the database known to be down? Then requests are answered 503 at once instead of each waiting
    the pool's timeout (and the next ones queueing behind them).

    A door that meets a database it cannot reach calls trip(): a probe thread (one at a time) opens a
    connection of its own to the database, at once and then every PROBE_EVERY seconds; while that
    fails, the circuit is open. The first probe that gets through closes it, so requests are served
    again within PROBE_EVERY of the database's return. A pool that is merely busy does not open it: the
    probe gets through (or is refused for too many clients, which is busy, not down)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._probing = False
        self.down_since: float | None = None
        self.reason = ""

    @property
    def open(self) -> bool:
        return self.down_since is not None

    def trip(self, reason: str) -> None:
        if connection.vendor != "postgresql":
            return  # SQLite is a file: nothing to be down
        if reason == BUSY and _pool_full():
            return  # every connection of the pool is open and lent: the database answers, it is only busy
        with self._lock:
            if self._probing:
                return
            self._probing = True
        params = connection.get_connection_params()
        # The first probe here, before this request's 503 goes out, so the circuit is open for the next one.
        if _reachable(params):
            with self._lock:
                self._probing = False
            return
        self.down_since, self.reason = time.monotonic(), reason
        log.warning("%s: requests are answered 503 at once until it answers again", reason)
        threading.Thread(target=self._probe, args=(params, reason), name="database-probe", daemon=True).start()

    def _probe(self, params: dict[str, Any], reason: str) -> None:
        try:
            time.sleep(PROBE_EVERY)
            while not _reachable(params):  # a refused connection costs a round trip on the machine's loopback or LAN
                if self.down_since is None:
                    self.down_since, self.reason = time.monotonic(), reason
                    log.warning("%s: requests are answered 503 at once until it answers again", reason)
                time.sleep(PROBE_EVERY)
            if self.down_since is not None:
                log.warning("the database answers again after %.1f s", time.monotonic() - self.down_since)
                self.down_since = None
        finally:
            with self._lock:
                self._probing = False


def _pool_full() -> bool:
    """Has the pool opened every connection it may? Then a timeout waiting for one means it is busy, and a
    probe would only add a connection beyond the pool's size."""
    pool = getattr(connection, "pool", None)
    if pool is None:
        return False
    stats = pool.get_stats()
    return bool(stats["pool_size"] >= stats["pool_max"])


def _reachable(params: dict[str, Any]) -> bool:
    """Whether a new connection to the database gets through (one that is refused for too many clients
    counts: the server is up)."""
    try:
        psycopg.connect(**{**params, "connect_timeout": 1, "autocommit": True}).close()
    except psycopg.OperationalError as exc:
        return exc.sqlstate == "53300" or "too many clients" in str(exc) or "remaining connection slots" in str(exc)
    return True


circuit = DatabaseCircuit()
"""This process's circuit: the web doors trip it and read it."""
