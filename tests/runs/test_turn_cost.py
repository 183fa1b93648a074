"""What a turn costs the worker: database connections do not grow with the number of turns (one
per run for its stores, not one per stored message and per LLM call)."""

import threading

import pytest
from django.db.backends.signals import connection_created

from evaluation.tutoring import services as tutoring

pytestmark = pytest.mark.django_db(transaction=True)


def connections_opened(turns: int, url: str) -> int:
    opened = []
    lock = threading.Lock()

    def count(sender, connection, **kwargs):
        with lock:
            opened.append(threading.current_thread().name)

    runs = tutoring.run_start(
        topic_id="two-digit-addition-regrouping", persona="ace", max_turns=turns, provider="offline", enqueue=False
    )
    connection_created.connect(count)
    try:
        (done,) = tutoring.runs_execute_here(runs, server_url=url, manage_server=False)
    finally:
        connection_created.disconnect(count)
    assert done.status == "completed" and done.turn == turns, done.error
    return len(opened)


def test_connections_opened_by_a_run_do_not_grow_with_its_turns(server):
    short, long = connections_opened(1, server), connections_opened(6, server)
    assert long <= short + 1, f"a 1-turn run opened {short} connections, a 6-turn run {long}"
