"""The database goes away and comes back: a real PostgreSQL, stopped and started with pg_ctl under a real
web server and a real qcluster. Requests meanwhile get 503 with Retry-After, never 500; after the restart
they answer at once; a run whose database went away mid-run still ends."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.pgcluster import PgCluster, pg_cluster
from tests.servers import SERVER_ENV, killable_server, qcluster_worker, redis_server

TOPIC = "two-digit-addition-regrouping"
STALE_AFTER = 6.0

SETUP = """
from pathlib import Path
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from evaluation.catalog import catalog_load
root = Path(".")
report = catalog_load(personas_dir=root / "personas", topics_dir=root / "topics",
                      propositions_dir=root / "propositions", cast_dir=root / "cast")
assert report.ok, report.errors
user = get_user_model().objects.create_user("ops", "ops@example.com", "pw-ops-12345", is_staff=True, is_superuser=True)
print(Token.objects.create(user=user).key)
"""


def prepare(pg: PgCluster) -> str:
    """The superuser's API token: the cluster is a copy of one where SETUP ran (the shipped catalogue and a
    superuser with a token in its database)."""
    return pg.setup_output.strip().splitlines()[-1]


def web_env(pg: PgCluster, **more: str) -> dict[str, str]:
    # A short pool wait, so that a request while the database is down is answered within seconds.
    return {"DATABASE_URL": pg.url, "EVAL_DB_POOL_TIMEOUT": "2", "EVAL_RUN_STALE_AFTER": str(STALE_AFTER), **more}


def refused_as_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, (response.status_code, response.text[:1000])
    assert response.headers.get("retry-after", "").isdigit(), response.headers
    body = response.json()
    assert "database is" in body["error"] and "retry in" in body["error"], body


@pytest.fixture
def pg():
    with pg_cluster(setup=SETUP) as cluster:
        yield cluster


def test_requests_get_503_while_postgres_is_down_and_200_at_once_after(pg, tmp_path):
    token = prepare(pg)
    headers = {"Authorization": f"Token {token}"}
    with killable_server(web_env(pg), tmp_path / "web.log") as (url, _), httpx.Client(timeout=30) as client:
        # Every connection of the pool has been used, and will be dead once PostgreSQL is back.
        for _ in range(8):
            assert client.get(f"{url}/api/evaluation/runs", headers=headers).status_code == 200
        pg.stop("fast")
        for path in ("/api/evaluation/runs", "/api/evaluation/runs/none/status", "/health/db"):
            refused_as_unavailable(client.get(f"{url}{path}", headers=headers))
        pg.start()
        back = time.monotonic()
        # answered 503 at once until the circuit's probe sees the database back
        while client.get(f"{url}/api/evaluation/runs", headers=headers).status_code == 503:
            assert time.monotonic() - back < 5, "still 503 five seconds after the restart"
            time.sleep(0.02)
        statuses = [client.get(f"{url}/api/evaluation/runs", headers=headers).status_code for _ in range(20)]
        took = time.monotonic() - back
    log = (tmp_path / "web.log").read_text(errors="replace")
    assert statuses == [200] * 20, f"after the restart: {statuses}\n{log[-3000:]}"
    assert took < 10, f"20 requests after the restart took {took:.1f} s"
    assert "Traceback" not in log, log[-3000:]


def terminate_when_blocked(pg: PgCluster, table: str, request) -> httpx.Response:
    """Hold a lock on `table`, send `request()` from a thread so that its query waits on the lock, then
    end that query's backend as an operator (or a PostgreSQL shutdown) would: the connection dies under
    the request. -> the request's response."""
    import psycopg

    with ThreadPoolExecutor(1) as pool, psycopg.connect(pg.url.replace("postgres://", "postgresql://")) as admin:
        admin.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        answer = pool.submit(request)
        deadline = time.monotonic() + 20
        while True:
            waiting = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            ).fetchall()
            if waiting:
                break
            assert time.monotonic() < deadline and not answer.done(), "the request never waited on the lock"
            time.sleep(0.05)
        admin.execute("SELECT pg_terminate_backend(%s)", [waiting[0][0]])
        admin.rollback()
        return answer.result(30)


def test_a_connection_lost_under_a_request_gets_503_and_is_not_reused(pg, tmp_path):
    token = prepare(pg)
    headers = {"Authorization": f"Token {token}"}
    with killable_server(web_env(pg), tmp_path / "web.log") as (url, _), httpx.Client(timeout=30) as client:
        api = terminate_when_blocked(
            pg, "authtoken_token", lambda: client.get(f"{url}/api/evaluation/runs", headers=headers)
        )
        refused_as_unavailable(api)
        assert "unavailable" in api.json()["error"], api.text
        protocol = terminate_when_blocked(
            pg,
            "authtoken_token",
            lambda: client.post(f"{url}/sessions", json={"topic_id": TOPIC}, headers=headers),
        )
        refused_as_unavailable(protocol)
        # The next requests, on the same server thread pool, get working connections.
        assert [client.get(f"{url}/api/evaluation/runs", headers=headers).status_code for _ in range(10)] == [200] * 10
    log = (tmp_path / "web.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


def test_a_session_socket_whose_database_is_away_says_so_and_closes_with_try_again_later(pg, tmp_path):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    token = prepare(pg)
    with killable_server(web_env(pg), tmp_path / "web.log") as (url, _), httpx.Client(timeout=30) as client:
        created = client.post(f"{url}/sessions", json={"topic_id": TOPIC}, headers={"Authorization": f"Token {token}"})
        assert created.status_code == 201, created.text
        session = created.json()
        pg.stop("fast")
        socket_url = url.replace("http://", "ws://") + f"/sessions/ws/{session['session_id']}"
        frames = []
        with connect(f"{socket_url}?token={session['session_token']}", open_timeout=30) as ws:
            try:
                while True:
                    frames.append(json.loads(ws.recv(timeout=30)))
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd else None
        pg.start()
    assert code == 1013, (code, frames)
    assert frames and frames[-1]["type"] == "error" and "database" in frames[-1]["message"], frames
    log = (tmp_path / "web.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


def test_requests_under_a_restart_get_503_never_500(pg, tmp_path):
    """An operator's `pg_ctl restart -m fast` while requests keep coming: every answer is 200 or 503."""
    token = prepare(pg)
    headers = {"Authorization": f"Token {token}"}
    seen: dict[int, int] = {}
    with killable_server(web_env(pg), tmp_path / "web.log") as (url, _), httpx.Client(timeout=30) as client:
        for i in range(40):  # ten answers up, ten while down (each waits up to the 2 s pool timeout), twenty back
            if i == 10:
                pg.stop("fast")
            if i == 20:
                pg.start()
            code = client.get(f"{url}/api/evaluation/runs", headers=headers).status_code
            seen[code] = seen.get(code, 0) + 1
        deadline = time.monotonic() + 5  # the circuit closes within a probe interval of the database's return
        while (after := client.get(f"{url}/api/evaluation/runs", headers=headers).status_code) == 503:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
    log = (tmp_path / "web.log").read_text(errors="replace")
    assert set(seen) <= {200, 503}, f"{seen}\n{log[-3000:]}"
    assert seen.get(503, 0) > 0 and after == 200, seen


def test_a_run_whose_database_restarts_mid_run_ends(pg, tmp_path, loopback):
    """The worker loses PostgreSQL at a turn; once it is back the run ends (failed, completed, or
    interrupted by a sweep) within EVAL_RUN_STALE_AFTER + 30 s, not left `running`."""
    token = prepare(pg)
    headers = {"Authorization": f"Token {token}"}
    loopback.latency = 0.15
    with redis_server(tmp_path) as redis_url:
        env = web_env(
            pg,
            REDIS_URL=redis_url,
            EVAL_Q_SYNC="0",
            EVAL_RUNS_DIR=str(tmp_path / "runs"),
            EVAL_SIMULATOR_PROVIDER=f"openai/student@{loopback.openai_url}",
        )
        with (
            killable_server(env, tmp_path / "tutor.log") as (tutor_url, _),
            killable_server({**env, "EVAL_SERVER_URL": tutor_url}, tmp_path / "web.log") as (url, _),
            qcluster_worker({**SERVER_ENV, **env, "EVAL_SERVER_URL": tutor_url}, tmp_path / "q.log"),
            httpx.Client(timeout=30, headers=headers) as client,
        ):
            body = {"topic_id": TOPIC, "persona_file": "ace", "seed": 4, "max_turns": 30}
            started = client.post(
                f"{url}/api/evaluation/start",
                content=json.dumps(body),
                headers={**headers, "Content-Type": "application/json"},
            )
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]

            def status() -> dict:
                response = client.get(f"{url}/api/evaluation/runs/{run_id}/status")
                return (
                    response.json() if response.status_code == 200 else {"run_status": f"HTTP {response.status_code}"}
                )

            deadline = time.monotonic() + 90
            while not ((now := status())["run_status"] == "running" and (now.get("turn") or 0) >= 3):
                assert time.monotonic() < deadline, f"{now}\n{(tmp_path / 'q.log').read_text()[-3000:]}"
                time.sleep(0.2)
            pg.stop("fast")
            time.sleep(3)
            pg.start()
            back = time.monotonic()
            while (now := status())["run_status"] in ("running", "queued") or now["run_status"].startswith("HTTP"):
                took = time.monotonic() - back
                assert took < STALE_AFTER + 30, (
                    f"still {now} {took:.0f} s after PostgreSQL came back\n"
                    + (tmp_path / "q.log").read_text(errors="replace")[-3000:]
                )
                time.sleep(0.5)
    assert now["run_status"] in ("completed", "failed", "interrupted"), now
    if now["run_status"] == "failed":
        assert "database" in (now["error"] or "").lower() or "connection" in (now["error"] or "").lower(), now


def test_while_postgres_is_down_every_request_is_answered_within_seconds_and_at_once_after(pg, tmp_path):
    """The default pool wait (no EVAL_DB_POOL_TIMEOUT): requests from several clients at once while the
    database is stopped, /health/db among them, each answered 503 within BOUND seconds (they waited the
    10 s pool timeout and queued behind each other: 10-28 s); answered 200 soon after it is back."""
    bound = 4.0  # the 2 s pool wait, once, and room for a busy machine; the circuit answers the rest at once
    token = prepare(pg)
    headers = {"Authorization": f"Token {token}"}
    env = {"DATABASE_URL": pg.url, "EVAL_RUN_STALE_AFTER": str(STALE_AFTER)}
    with killable_server(env, tmp_path / "web.log") as (url, _), httpx.Client(timeout=60) as client:
        assert client.get(f"{url}/api/evaluation/runs", headers=headers).status_code == 200
        pg.stop("fast")

        def timed(path: str) -> tuple[int, float]:
            began = time.monotonic()
            status = client.get(f"{url}{path}", headers=headers).status_code
            return status, time.monotonic() - began

        paths = ["/api/evaluation/runs", "/health/db", "/api/evaluation/status", "/api/evaluation/runs/none/status"] * 6
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(timed, paths))
        pg.start()
        deadline = time.monotonic() + 30
        while (back := timed("/api/evaluation/runs"))[0] != 200:
            assert time.monotonic() < deadline, f"not served again within 30 s: {back}"
            time.sleep(0.05)
    log = (tmp_path / "web.log").read_text(errors="replace")
    assert {s for s, _ in answers} == {503}, (answers, log[-3000:])
    slow = [(p, round(t, 1)) for p, (_, t) in zip(paths, answers, strict=True) if t > bound]
    assert not slow, f"answers slower than {bound} s while the database was down: {slow}"
    assert "Traceback" not in log, log[-3000:]
