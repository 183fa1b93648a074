"""LLM calls run in helper threads (a judge's worker pool, asyncio.to_thread): a database read or write made
there gives its connection back at once."""

import threading

from django.db import connection


def release_helper_thread_connection() -> None:
    """Close this thread's connection (back to the pool, on PostgreSQL) unless it is the main thread's or
    inside a transaction. A helper thread's connection is otherwise kept, and counted against the pool,
    until the garbage collector finds it: a pool of worker threads drains the pool and the next read waits."""
    if threading.current_thread() is threading.main_thread() or connection.in_atomic_block:
        return
    connection.close()
