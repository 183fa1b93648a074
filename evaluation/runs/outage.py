"""Is the database gone for now? One answer for every door (a 503) and for the workers (wait and retry)."""

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
from django.db import InterfaceError, OperationalError, connection
from psycopg_pool import PoolTimeout

log = logging.getLogger(__name__)

T = TypeVar("T")

# SQLSTATEs that mean the server went away or will not take the connection, not that the statement
# was wrong: connection exceptions (class 08), an administrator's or a crash's shutdown, a server
# still starting, too many clients.
_GONE_SQLSTATES = ("57P01", "57P02", "57P03", "53300")


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
        return "the database is busy: every connection is in use, or none could be opened"
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
