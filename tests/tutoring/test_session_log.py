"""A session's logs, written a few entries at a time, are stored whole and in order."""

import json

import pytest
from django.db import connection

from evaluation.models import TutoringSession
from evaluation.tutoring import sessions

pytestmark = pytest.mark.django_db


def stored_logs(session_id):
    """The log columns as the database holds them, parsed: what any reader of the row gets."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT full_conversation_log, conversation_history FROM evaluation_tutoringsession WHERE id = %s",
            [session_id.hex if connection.vendor == "sqlite" else session_id],
        )
        row = cursor.fetchone()
    return [json.loads(v) if isinstance(v, str) else v for v in row]


def test_turns_on_a_held_session_store_the_whole_log_after_every_write(catalog):
    session = sessions.session_create(topic_id="two-digit-addition-regrouping", seed=3)
    sessions.session_open(str(session.id))
    held = None
    for text in ["It's 50", 'naïve "quotes" \\ and 🙂', "I don't know"]:
        done = sessions.session_advance(str(session.id), text, held)
        held = done.session
        full, history = stored_logs(session.id)
        assert full == held.full_conversation_log and history == held.conversation_history
    assert [m["turn"] for m in full] == list(range(1, 8))
    assert [m["content"] for m in full if m["role"] == "student"][1] == 'naïve "quotes" \\ and 🙂'

    # Another writer in between: the held copy's next turn reads the session again and goes after it.
    other = TutoringSession.objects.get(pk=session.pk)
    other.full_conversation_log.append({"role": "student", "content": "from elsewhere", "turn": 8, "timestamp": "t"})
    other.conversation_history.append({"role": "student", "content": "from elsewhere"})
    other.save()
    done = sessions.session_advance(str(session.id), "last", held)
    full, history = stored_logs(session.id)
    assert [m["content"] for m in full][7:9] == ["from elsewhere", "last"]
    assert full == done.session.full_conversation_log and len(history) == len(full) == 10


def test_a_turn_on_a_held_session_reads_nothing_and_writes_once(catalog):
    """The student's message goes with the tutor's reply: one UPDATE a turn, and no SELECT."""
    from django.db import connection as db
    from django.test.utils import CaptureQueriesContext

    session = sessions.session_create(topic_id="two-digit-addition-regrouping", seed=3)
    held = sessions.session_open(str(session.id)).session
    held = sessions.session_advance(str(session.id), "It's 50", held).session  # the tutor's LLM is resolved
    with CaptureQueriesContext(db) as queries:
        done = sessions.session_advance(str(session.id), "I don't know", held)
    statements = [q["sql"].split()[0].upper() for q in queries.captured_queries]
    assert statements.count("UPDATE") == 1 and "SELECT" not in statements, queries.captured_queries
    assert [m["role"] for m in stored_logs(session.id)[0]] == ["tutor", "student", "tutor", "student", "tutor"]
    assert done.entry == stored_logs(session.id)[0][-1]
