"""The compiled one-row writes store what the ORM would, and the compiled reads by key read what it
would, on SQLite and on PostgreSQL alike."""

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from evaluation.models import Agent, EvaluationRun, RunMessage, Topic, TutoringSession, statements
from evaluation.models.runs import RunStatus

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    return EvaluationRun.objects.create(run_id="run_statements", status=RunStatus.RUNNING, attempt=2)


def test_insert_stores_what_create_stores_with_defaults_for_what_is_left_out(run):
    when = timezone.now().replace(microsecond=123456)
    text = 'naïve "quotes", a \\ backslash and 🙂'
    metadata = {"turn_decision": {"turn": 3, "correct": False, "mistake": None}, "list": [1, 2.5, "x"]}
    statements.insert(
        RunMessage, run=run.pk, attempt=2, turn=3, role="student", content=text, timestamp=when, metadata=metadata
    )
    statements.insert(RunMessage, run=run.pk, turn=4, role="tutor", content="ok", timestamp=when)
    RunMessage.objects.create(
        run=run, attempt=2, turn=3, role="student", content=text, timestamp=when, metadata=metadata
    )
    first, defaults, by_orm = RunMessage.objects.filter(run=run).order_by("id")
    assert (first.attempt, first.turn, first.role, first.content, first.timestamp, first.metadata) == (
        by_orm.attempt,
        by_orm.turn,
        by_orm.role,
        by_orm.content,
        by_orm.timestamp,
        by_orm.metadata,
    )
    assert first.timestamp == when and first.metadata == metadata
    assert (defaults.attempt, defaults.metadata) == (1, {})  # the fields' defaults
    assert first.id < defaults.id < by_orm.id  # the key is the database's own sequence


def test_update_changes_only_rows_matching_every_condition_and_counts_them(run):
    usage = {"simulator": {"input_tokens": 12, "calls": 1}}
    beat = timezone.now()
    where = {"pk": run.pk, "status": RunStatus.RUNNING, "attempt": 2}
    assert (
        statements.update(EvaluationRun, where, turn=5, detail="Turn 5/20", token_usage=usage, heartbeat_at=beat) == 1
    )
    run.refresh_from_db()
    assert (run.turn, run.detail, run.token_usage, run.heartbeat_at) == (5, "Turn 5/20", usage, beat)

    assert statements.update(EvaluationRun, {**where, "attempt": 1}, turn=6) == 0  # an older attempt
    assert statements.update(EvaluationRun, {**where, "status": RunStatus.CANCELLED}, turn=6) == 0
    run.refresh_from_db()
    assert run.turn == 5


def test_update_on_a_datetime_and_a_uuid_key_matches_as_the_orm_does():
    topic = Topic.objects.create(topic_id="statements-topic", name="T", grade=3, subject="mathematics")
    session = TutoringSession.objects.create(topic=topic)
    log = [{"role": "student", "content": "42?", "turn": 1}]
    later = session.updated_at + dt.timedelta(seconds=1)
    assert statements.update(TutoringSession, {"pk": session.pk, "updated_at": later}, full_conversation_log=log) == 0
    where = {"pk": session.pk, "updated_at": session.updated_at}
    assert statements.update(TutoringSession, where, full_conversation_log=log, updated_at=later) == 1
    session.refresh_from_db()
    assert session.full_conversation_log == log and session.updated_at == later


def test_an_expression_goes_through_the_orm(run):
    assert statements.update(EvaluationRun, {"pk": run.pk}, turn=F("turn") + 2) == 1
    run.refresh_from_db()
    assert run.turn == 2


def test_a_field_may_be_called_model_or_where_and_a_related_object_stands_for_its_key(run):
    agent = Agent.objects.create(id="statements-agent", display_name="A")
    assert statements.update(Agent, {"pk": agent.pk}, model="tutor-model") == 1
    agent.refresh_from_db()
    assert agent.model == "tutor-model"
    when = timezone.now()
    statements.insert(RunMessage, run=run, turn=1, role="student", content="by object", timestamp=when)
    statements.insert(RunMessage, run_id=run.pk, turn=2, role="tutor", content="by key", timestamp=when)
    assert list(run.messages.values_list("turn", "content")) == [(1, "by object"), (2, "by key")]


def test_insert_dates_auto_now_fields_and_fills_a_uuid_key_by_its_default():
    topic = Topic.objects.create(topic_id="statements-topic-2", name="T", grade=3, subject="mathematics")
    before = timezone.now()
    statements.insert(TutoringSession, topic=topic, state={"index": 0})
    session = TutoringSession.objects.get(topic=topic)
    assert session.created_at >= before and session.updated_at >= before and session.state == {"index": 0}


def test_insert_rows_stores_a_turns_messages_in_one_statement_in_their_order(run, django_assert_num_queries):
    when = timezone.now().replace(microsecond=0)
    turns = [(1, "student"), (1, "tutor"), (2, "student")]
    rows = [
        {
            "run": run.pk,
            "attempt": 2,
            "turn": t,
            "role": r,
            "content": f"{r} {t}",
            "timestamp": when,
            "metadata": {"t": t},
        }
        for t, r in turns
    ]
    with django_assert_num_queries(1):
        statements.insert_rows(RunMessage, rows)
    stored = RunMessage.objects.filter(run=run).order_by("id")
    assert [(m.attempt, m.turn, m.role, m.content, m.timestamp, m.metadata) for m in stored] == [
        (2, t, r, f"{r} {t}", when, {"t": t}) for t, r in turns
    ]
    with django_assert_num_queries(0):
        statements.insert_rows(RunMessage, [])


def test_insert_rows_gives_each_row_its_own_default_and_refuses_rows_naming_other_fields():
    topic = Topic.objects.create(topic_id="statements-topic-4", name="T", grade=3, subject="mathematics")
    before = timezone.now()
    statements.insert_rows(TutoringSession, [{"topic": topic, "user": "a"}, {"topic": topic, "user": "b"}])
    first, second = TutoringSession.objects.filter(topic=topic).order_by("user")
    assert first.id != second.id and first.created_at >= before and (first.user, second.user) == ("a", "b")
    with pytest.raises(ValueError, match=r"every row must name the fields \['topic', 'user'\]"):
        statements.insert_rows(TutoringSession, [{"topic": topic, "user": "c"}, {"user": "d", "topic": topic}])
    assert TutoringSession.objects.filter(topic=topic).count() == 2


def test_a_none_condition_is_refused_rather_than_matching_nothing(run):
    with pytest.raises(ValueError, match="None condition"):
        statements.update(EvaluationRun, {"pk": run.pk, "worker": None}, turn=1)


def test_an_error_inside_a_transaction_marks_it_for_rollback_as_the_orm_does(run):
    with transaction.atomic():
        with pytest.raises(IntegrityError):
            statements.insert(RunMessage, run=run, turn=None, role="student", content="", timestamp=timezone.now())
        assert transaction.get_rollback()


def test_json_encoded_by_the_caller_is_stored_as_given_and_only_for_a_json_field():
    topic = Topic.objects.create(topic_id="statements-topic-3", name="T", grade=3, subject="mathematics")
    session = TutoringSession.objects.create(topic=topic)
    log = [{"role": "student", "content": 'naïve "quotes" 🙂', "turn": 1}, {"role": "tutor", "content": "ok"}]
    encoded = statements.EncodedJSON(json.dumps(log))
    assert statements.update(TutoringSession, {"pk": session.pk}, full_conversation_log=encoded) == 1
    session.refresh_from_db()
    assert session.full_conversation_log == log
    with pytest.raises(TypeError, match="user, which is not a JSONField"):
        statements.update(TutoringSession, {"pk": session.pk}, user=encoded)


def _columns(obj):
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_get_reads_what_select_related_get_reads_and_its_related_rows_need_no_query(catalog, django_assert_num_queries):
    from evaluation.models import Persona

    persona, topic = Persona.objects.order_by("persona_id").first(), Topic.objects.order_by("topic_id").first()
    run = EvaluationRun.objects.create(
        run_id="run_get", persona=persona, topic=topic, status=RunStatus.RUNNING, config={"a": [1, "é"]}, seed=7
    )
    by_orm = EvaluationRun.objects.select_related("persona", "topic", "agent").get(pk=run.pk)
    with django_assert_num_queries(1):
        got = statements.get(EvaluationRun, run.pk, related=("persona", "topic", "agent"))
        assert got.agent is None  # a nullable key with no row: known, not fetched
        assert _columns(got.persona) == _columns(by_orm.persona) and _columns(got.topic) == _columns(by_orm.topic)
    assert _columns(got) == _columns(by_orm) and got.config == {"a": [1, "é"]}
    assert (got._state.adding, got._state.db, got.persona._state.adding) == (False, "default", False)
    got.save(update_fields=["seed"])  # an instance the ORM can save, as it would its own

    session = TutoringSession.objects.create(topic=topic, state={"index": 2}, full_conversation_log=[{"turn": 1}])
    read = statements.get(TutoringSession, str(session.pk), related=("topic",))  # a key given as text, as URLs do
    assert _columns(read) == _columns(TutoringSession.objects.get(pk=session.pk)) and read.topic.pk == topic.pk
    assert isinstance(read.updated_at, dt.datetime) and read.updated_at.tzinfo is not None


def test_get_of_a_missing_key_is_none_and_a_related_name_must_be_a_foreign_key(run):
    import uuid

    assert statements.get(TutoringSession, uuid.uuid4()) is None
    with pytest.raises(TypeError, match="status is not a foreign key"):
        statements.get(EvaluationRun, run.pk, related=("status",))


def test_on_postgresql_a_statement_a_connection_repeats_is_prepared(run):
    """EVAL_DB_PREPARE_THRESHOLD (5 by default): a statement a connection runs more often than that
    is prepared, so PostgreSQL no longer parses it every turn."""
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's; CI runs this file on PostgreSQL too")
    if connection.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        pytest.skip("EVAL_DB_PREPARE_THRESHOLD=off in this environment")
    for turn in range(7):
        statements.update(EvaluationRun, {"pk": run.pk}, turn=turn)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any(s.startswith('UPDATE "evaluation_evaluationrun" SET "turn" = $1 WHERE') for s in prepared), prepared
    run.refresh_from_db()
    assert run.turn == 6


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_statement_a_migration_made_stale_is_forgotten_and_run_again(caplog):
    """A column's type changed by another connection (a `migrate` process) makes PostgreSQL refuse a
    statement prepared before it; outside a transaction the statement runs again at once."""
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's; CI runs this file on PostgreSQL too")
    if connection.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        pytest.skip("EVAL_DB_PREPARE_THRESHOLD=off in this environment")
    import psycopg

    def read() -> tuple:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, name FROM eval_stale_plan WHERE id = %s", [1])
            return cursor.fetchone()

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE eval_stale_plan (id integer PRIMARY KEY, name varchar(10))")
        cursor.execute("INSERT INTO eval_stale_plan VALUES (1, 'x')")
    try:
        for _ in range(7):
            assert read() == (1, "x")
        password = connection.settings_dict["PASSWORD"] or None
        with psycopg.connect(connection.connection.info.dsn, password=password, autocommit=True) as migrate:
            migrate.execute("ALTER TABLE eval_stale_plan ALTER COLUMN name TYPE varchar(20)")
        assert read() == (1, "x")
        assert "a prepared statement was stale after a migration" in caplog.text
        for _ in range(7):
            assert read() == (1, "x")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE eval_stale_plan")


DATABASE_OPTIONS = """
import json, django
django.setup()
from django.conf import settings
options = settings.DATABASES["default"]["OPTIONS"]
print(json.dumps([options.get("server_side_binding"), options.get("prepare_threshold")]))
"""


@pytest.mark.parametrize(
    ("value", "options"), [(None, [True, 5]), ("0", [True, 0]), ("off", [None, None]), ("five", None), ("-1", None)]
)
def test_the_prepare_threshold_comes_from_the_environment_and_a_bad_one_is_named(tmp_path, value, options):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_", "DATABASE_URL"))}
    env.update({"DATABASE_URL": "postgres://eval@127.0.0.1:1/eval", "EVAL_DATA_DIR": str(tmp_path)})
    if value is not None:
        env["EVAL_DB_PREPARE_THRESHOLD"] = value
    done = subprocess.run([sys.executable, "-c", DATABASE_OPTIONS], cwd=ROOT, env=env, capture_output=True, text=True)
    if options is None:
        assert done.returncode != 0
        assert f"EVAL_DB_PREPARE_THRESHOLD: expected a number of executions (0 or more) or 'off', got '{value}'" in (
            done.stderr
        ), done.stderr[-1500:]
    else:
        assert done.returncode == 0, done.stderr[-1500:]
        assert json.loads(done.stdout) == options


@pytest.mark.parametrize("hand_sql", [True, False], ids=["built-once", "orm"])
def test_the_orm_path_benchmarks_compare_against_stores_and_reads_the_same(catalog, monkeypatch, hand_sql):
    """bench/scale_out.py --orm (EVAL_HAND_SQL=0) measures the same work through the ORM: what it
    stores and reads must be what the SQL built once stores and reads."""
    monkeypatch.setattr(statements, "HAND_SQL", hand_sql)
    topic = Topic.objects.order_by("topic_id").first()
    run = EvaluationRun.objects.create(run_id="run_both_ways", topic=topic, status=RunStatus.RUNNING, attempt=1)
    when = timezone.now().replace(microsecond=250000)
    rows = [
        {
            "run": run.pk,
            "attempt": 1,
            "turn": 1,
            "role": r,
            "content": f"{r} 1",
            "timestamp": when,
            "metadata": {"r": r},
        }
        for r in ("student", "tutor")
    ]
    statements.insert_rows(RunMessage, rows)
    statements.insert(RunMessage, run=run, turn=2, role="student", content="left out", timestamp=when)
    stored = RunMessage.objects.filter(run=run).order_by("id")
    assert [(m.attempt, m.turn, m.role, m.content, m.timestamp, m.metadata) for m in stored] == [
        (1, 1, "student", "student 1", when, {"r": "student"}),
        (1, 1, "tutor", "tutor 1", when, {"r": "tutor"}),
        (1, 2, "student", "left out", when, {}),
    ]
    where = {"pk": run.pk, "status": RunStatus.RUNNING, "attempt": 1}
    assert statements.update(EvaluationRun, where, turn=2, detail="Turn 2/20") == 1
    assert statements.update(EvaluationRun, {**where, "attempt": 2}, turn=3) == 0

    session = TutoringSession.objects.create(topic=topic)
    log = [{"role": "student", "content": 'naïve "quotes" 🙂'}]
    later = session.updated_at + dt.timedelta(seconds=1)
    encoded = statements.EncodedJSON(json.dumps(log))
    assert (
        statements.update(TutoringSession, {"pk": session.pk, "updated_at": later}, full_conversation_log=encoded) == 0
    )
    where = {"pk": session.pk, "updated_at": session.updated_at}
    assert statements.update(TutoringSession, where, full_conversation_log=encoded, updated_at=later) == 1

    read = statements.get(TutoringSession, str(session.pk), related=("topic",))
    assert (read.full_conversation_log, read.updated_at, read.topic.topic_id) == (log, later, topic.topic_id)
    got = statements.get(EvaluationRun, run.pk, related=("persona", "topic", "agent"))
    assert (got.turn, got.detail, got.topic.pk, got.persona, got.agent) == (2, "Turn 2/20", topic.pk, None, None)
    import uuid

    assert statements.get(TutoringSession, uuid.uuid4()) is None
