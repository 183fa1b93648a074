"""A worker starved of database connections is alive, not dead: on a real PostgreSQL, a real qcluster
connects as a role of its own whose connections are then refused (CONNECTION LIMIT 0, its sessions
ended) while its run waits on a slow LLM call. Its heartbeat cannot reach the database for longer than
EVAL_RUN_STALE_AFTER, but its liveness beat (a file, no database) goes on: status reads, which sweep,
leave the run running and say in its detail that its worker is alive and waiting for a database
connection. Once connections are allowed again the run goes on to its end.

Before, the first status read after EVAL_RUN_STALE_AFTER marked it `interrupted: ... the worker stopped
or was killed` while the worker was alive."""

import json
import time

import httpx
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from evaluation.models import EvaluationRun
from evaluation.tutoring.server import managed_server
from tests.servers import database_url_for_tests, qcluster_worker, worker_env

TOPIC = "two-digit-addition-regrouping"
STALE_AFTER = 6.0
ROLE = "eval_starved_worker"
SLOW_CALL = 30.0
"""Seconds the student's LLM call takes while the worker is starved: longer than the starvation."""
STARVED_FOR = STALE_AFTER + 12
"""Seconds the worker's role may not connect: past the limit, plus a few sweeps of the status reads."""

pytestmark = pytest.mark.skipif(
    not database_url_for_tests().startswith("postgres"), reason="a PostgreSQL role's connection limit"
)


def sql(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)


@pytest.fixture
def worker_role(transactional_db):
    """A login role with the app's table rights only (not a superuser: CONNECTION LIMIT binds it)."""
    sql(f"DROP OWNED BY {ROLE}") if _role_exists() else None
    sql(f"DROP ROLE IF EXISTS {ROLE}")
    sql(f"CREATE ROLE {ROLE} LOGIN")
    sql(f"GRANT CONNECT ON DATABASE {connection.settings_dict['NAME']} TO {ROLE}")
    sql(f"GRANT USAGE ON SCHEMA public TO {ROLE}")
    sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {ROLE}")
    sql(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {ROLE}")
    db = connection.settings_dict
    yield f"postgres://{ROLE}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    sql(f"ALTER ROLE {ROLE} CONNECTION LIMIT -1")
    sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{ROLE}'")
    sql(f"DROP OWNED BY {ROLE}")
    sql(f"DROP ROLE IF EXISTS {ROLE}")


def _role_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE])
        return cursor.fetchone() is not None


def test_a_starved_worker_is_not_declared_dead(worker_role, catalog, staff_user, loopback, tmp_path):
    loopback.latency = 0.2
    token = Token.objects.create(user=staff_user).key
    headers = {"Content-Type": "application/json", "Authorization": f"Token {token}"}
    env = worker_env(tmp_path, loopback.openai_url, workers=1, stale_after=STALE_AFTER)
    with managed_server(env, log_path=tmp_path / "web.log") as url:
        starved_env = {**env, "EVAL_SERVER_URL": url, "DATABASE_URL": worker_role}
        with qcluster_worker(starved_env, tmp_path / "q.log"), httpx.Client(timeout=30, headers=headers) as api:
            response = api.post(
                f"{url}/api/evaluation/start",
                content=json.dumps({"topic_id": TOPIC, "persona_file": "ace", "seed": 4, "max_turns": 6}),
            )
            assert response.status_code == 202, response.text
            run_id = response.json()["run_id"]
            deadline = time.monotonic() + 120
            while not EvaluationRun.objects.filter(run_id=run_id, status="running", turn__gte=2).exists():
                assert time.monotonic() < deadline, (tmp_path / "q.log").read_text(errors="replace")[-3000:]
                time.sleep(0.1)
            # The next call is slow; once the worker is inside it, its role may not connect. The latency is
            # set before the count is taken: a call counted after it is slow for certain (one counted in
            # between took 0.2 s, and the worker wrote to a database it could not reach).
            loopback.latency = SLOW_CALL
            calls = loopback.count()
            while not (loopback.count() > calls and loopback._answering > 0):
                assert time.monotonic() < deadline, "the worker made no slow call"
                time.sleep(0.05)
            sql(f"ALTER ROLE {ROLE} CONNECTION LIMIT 0")
            sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{ROLE}'")
            starved_at = time.monotonic()
            details = set()
            while time.monotonic() - starved_at < STARVED_FOR:
                status = api.get(f"{url}/api/evaluation/runs/{run_id}/status").json()  # a read sweeps
                assert status["run_status"] == "running", (status, (tmp_path / "q.log").read_text()[-3000:])
                details.add(status["detail"])
                time.sleep(0.5)
            run = EvaluationRun.objects.get(run_id=run_id)
            assert (time.time() - run.heartbeat_at.timestamp()) > STALE_AFTER, "the heartbeat was not starved"
            waiting = [d for d in details if d.startswith("worker alive, no heartbeat")]
            assert any("waiting for a database connection since" in d for d in waiting), details
            loopback.latency = 0.2
            sql(f"ALTER ROLE {ROLE} CONNECTION LIMIT -1")
            deadline = time.monotonic() + 120
            while EvaluationRun.objects.get(run_id=run_id).status == "running":
                assert time.monotonic() < deadline, (tmp_path / "q.log").read_text(errors="replace")[-3000:]
                time.sleep(0.2)
    run = EvaluationRun.objects.get(run_id=run_id)
    assert run.status == "completed", (run.status, run.error)
    assert run.turn == 6
