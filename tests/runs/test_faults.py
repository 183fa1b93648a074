"""The infrastructure fails under a running run: PostgreSQL restarts, the web process is SIGKILLed.

Real processes on a PostgreSQL cluster of the test's own (so restarting it disturbs nothing else in
the session, whichever database the session runs on): uvicorn serving the API and the reference
tutor, and a qcluster whose student is an LLM behind the loopback server. While the fault happens
the API is polled with a staff token, as bench/faults.py does: every run ends within
EVAL_RUN_STALE_AFTER + 30 s, no answer is a 5xx other than 503, a run that did not complete completes
when retried, and no message of any attempt is lost or stored twice.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from bench._harness import FINAL_STATUSES, Api, Poller, WebServer, conversation_problems
from tests.pgcluster import PgCluster, pg_cluster
from tests.servers import SERVER_ENV, qcluster_worker

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "two-digit-addition-regrouping"
STALE_AFTER = 5
LIMIT = STALE_AFTER + 30


def require_postgresql_binaries() -> None:
    """Outside CI, a machine without PostgreSQL skips these tests (with the reason). .ci/run installs
    PostgreSQL and sets EVAL_REQUIRE_CHROMIUM (as CI=true does), so there they fail instead, as they
    do wherever EVAL_REQUIRE_POSTGRESQL=1 asks for them."""
    if any(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        return
    required = any(os.environ.get(name) == "1" for name in ("EVAL_REQUIRE_POSTGRESQL", "EVAL_REQUIRE_CHROMIUM"))
    if required or os.environ.get("CI") == "true":
        pytest.fail("no PostgreSQL binaries under /usr/lib/postgresql/*/bin: the fault tests need pg_ctl")
    pytest.skip("no PostgreSQL binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)")


@pytest.fixture(scope="module")
def app_database(tmp_path_factory):
    """A throwaway PostgreSQL cluster, migrated, with the catalogue and a staff user's token: (the
    cluster, the token). One for the module: each test starts runs of its own."""
    require_postgresql_binaries()
    with pg_cluster() as cluster:
        env = {**os.environ, "DATABASE_URL": cluster.url, "EVAL_DATA_DIR": str(tmp_path_factory.mktemp("pgapp"))}
        make_token = (
            "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; "
            "print(Token.objects.create(user=User.objects.create_superuser('operator', 'o@example.com', 'pw')).key)"
        )
        for command in (["load_catalog"], ["shell", "-c", make_token]):
            done = subprocess.run(
                [sys.executable, "manage.py", *command], cwd=ROOT, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stderr[-3000:]
        yield cluster, done.stdout.strip().splitlines()[-1]


@pytest.fixture
def app(app_database, loopback, tmp_path):
    """The web process and a qcluster on the throwaway cluster: (the API, the web process, the cluster)."""
    cluster, token = app_database
    loopback.latency = 0.15
    env = {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "DATABASE_URL": cluster.url,
        "EVAL_DATA_DIR": str(tmp_path),
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
        "EVAL_SIMULATOR_PROVIDER": f"openai/student@{loopback.openai_url}",
        "EVAL_RUN_STALE_AFTER": str(STALE_AFTER),
    }
    web = WebServer(env, tmp_path / "web.log")
    web.start()
    try:
        with qcluster_worker({**env, "EVAL_SERVER_URL": web.url}, tmp_path / "q.log") as worker:
            yield Api(web.url, token), web, cluster
            os.killpg(worker.pid, signal.SIGKILL)  # its runs are over; a graceful stop takes seconds
    finally:
        web.stop()


def start_runs(api: Api, personas: list[str]) -> list[str]:
    body = {"topic_id": TOPIC, "max_turns": 14, "seed": 4}
    return [api.until_ok("POST", "/api/evaluation/start", {**body, "persona_file": p})["run_id"] for p in personas]


def wait_for(api: Api, run_ids: list[str], done, timeout: float) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        now = {r: api.until_ok("GET", f"/api/evaluation/runs/{r}/status") for r in run_ids}
        if all(done(s) for s in now.values()):
            return now
        assert time.monotonic() < deadline, f"gave up waiting: {now}"
        time.sleep(0.2)


def through_fault(api: Api, run_ids: list[str], fault) -> Poller:
    """Once every run is past its third turn: the fault, with the API polled until every run is final
    (or the limit and 15 s more have passed)."""
    wait_for(api, run_ids, lambda s: s["run_status"] == "running" and s["turn"] >= 3, 60)
    since = time.monotonic()
    with Poller(api, run_ids, since) as poller:
        fault()
        while not poller.all_final() and time.monotonic() < since + LIMIT + 15:
            time.sleep(0.2)
    return poller


def assert_survived(api: Api, cluster: PgCluster, run_ids: list[str], poller: Poller) -> None:
    assert not poller.unexpected, poller.unexpected
    assert poller.all_final(), f"not final within {LIMIT + 15} s: {poller.seen}"
    late = {r: t for r, t in poller.final_at.items() if t > LIMIT}
    assert not late, f"final later than EVAL_RUN_STALE_AFTER + 30 s = {LIMIT} s after the fault: {late}"
    for run_id, status in poller.seen.items():
        # an outage is never scored as the tutor's behaviour: a run completed through it answered every turn
        coverage = api.until_ok("GET", f"/api/evaluation/runs/{run_id}")["coverage"]
        assert status["run_status"] != "completed" or not coverage["cut_short"], (run_id, coverage)
        if status["run_status"] != "completed":
            api.until_ok("POST", f"/api/evaluation/runs/{run_id}/retry")
    ended = wait_for(api, run_ids, lambda s: s["run_status"] in FINAL_STATUSES, 90)
    assert {s["run_status"] for s in ended.values()} == {"completed"}, ended
    with psycopg.connect(cluster.url.replace("postgres://", "postgresql://")) as conn:
        for run_id, status in ended.items():
            rows = conn.execute(
                "SELECT m.attempt, m.turn, m.role, (m.metadata->'turn_decision'->>'turn')::int "
                "FROM evaluation_runmessage m JOIN evaluation_evaluationrun r ON r.id = m.run_id "
                "WHERE r.run_id = %s ORDER BY m.attempt, m.turn, m.id",
                [run_id],
            ).fetchall()
            problems = conversation_problems(rows, attempts=status["attempt"], reported_turn=status["turn"])
            assert not problems, f"{run_id}: {problems}"


def test_a_postgresql_restart_mid_run_ends_every_run_in_time_with_no_500_and_no_message_lost(app):
    api, _, cluster = app

    def restart() -> None:  # as `pg_ctl restart -m fast`
        cluster.stop("fast")
        cluster.start()

    run_ids = start_runs(api, ["ace", "struggler"])
    poller = through_fault(api, run_ids, restart)
    assert_survived(api, cluster, run_ids, poller)


def test_a_web_process_killed_mid_run_and_started_again_leaves_runs_that_end_with_no_500(app):
    api, web, cluster = app

    def kill_and_start_again() -> None:
        web.kill()
        time.sleep(1)
        web.start()

    run_ids = start_runs(api, ["ace", "struggler"])
    poller = through_fault(api, run_ids, kill_and_start_again)
    assert poller.answers["no answer"] > 0  # the poller did see it down
    assert_survived(api, cluster, run_ids, poller)
