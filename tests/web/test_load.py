"""Bursts of API requests against a real uvicorn process: nothing answers 500, the server answers
normally right after, PostgreSQL's connections stay within the pool's bound, and SQLite never
reports its file locked while runs write to it."""

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evaluation.tutoring.server import free_port, managed_server
from tests.servers import SERVER_ENV

ROOT = Path(__file__).resolve().parents[2]
PGBIN = (
    next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1:]), None)
    if Path("/usr/lib/postgresql").exists()
    else None
)
if PGBIN is None and shutil.which("pg_ctl"):
    PGBIN = Path(shutil.which("pg_ctl")).parent  # type: ignore[arg-type]

BURST = 200
POOL_MAX = 4
MAX_CONNECTIONS = 20

SEED = """
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.authtoken.models import Token
from evaluation.models import EvaluationRun
user = get_user_model().objects.create_user(
    "loadstaff", "loadstaff@example.com", "pw-load-staff-123", is_staff=True, is_superuser=True
)
for i in range(30):
    running = i < 2
    EvaluationRun.objects.create(
        run_id=f"load_{i:03d}",
        status="running" if running else "completed",
        stage="running_session" if running else "completed",
        heartbeat_at=timezone.now(),
        overall_score=None if running else 6.5,
    )
print(Token.objects.create(user=user).key)
"""


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"manage.py {' '.join(args[:1])} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def prepared_database(env: dict[str, str]) -> str:
    """Migrate the database env names, add a staff user, 2 running and 28 finished runs; the user's token."""
    manage(env, "migrate", "--verbosity", "0")
    return manage(env, "shell", "-c", SEED).strip().splitlines()[-1]


def burst(url: str, token: str, n: int) -> tuple[Counter, tuple[dict, dict] | None]:
    """n GETs of the run list at once: a count of the statuses (or exception names) they got, and the
    headers and body of one 503 if there was one."""
    refusals: list[tuple[dict, dict]] = []

    async def one(client: httpx.AsyncClient) -> str:
        try:
            response = await client.get(f"{url}/api/evaluation/runs")
        except httpx.HTTPError as exc:
            return type(exc).__name__
        if response.status_code == 503:
            refusals.append((dict(response.headers), response.json()))
        return str(response.status_code)

    async def all_at_once() -> Counter:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        headers = {"Authorization": f"Token {token}"}
        async with httpx.AsyncClient(limits=limits, headers=headers, timeout=60) as client:
            return Counter(await asyncio.gather(*(one(client) for _ in range(n))))

    statuses = asyncio.run(all_at_once())
    return statuses, (refusals[0] if refusals else None)


def sequential(url: str, token: str, n: int) -> list[int]:
    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=30) as client:
        return [client.get(f"{url}/api/evaluation/runs").status_code for _ in range(n)]


def as_postgres(command: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root; CI and this machine run the tests as root.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on loopback with max_connections=20; its URL (database `evaluation`)."""
    if PGBIN is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl): .ci/run installs the postgresql package")
    folder = Path(tempfile.mkdtemp(prefix="evalload-pg."))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    port = free_port()
    data = folder / "data"
    try:
        subprocess.run(
            as_postgres([str(PGBIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
            check=True,
            capture_output=True,
            timeout=60,
        )
        options = (
            f"-h 127.0.0.1 -p {port} -k {folder} -c max_connections={MAX_CONNECTIONS} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        started = subprocess.run(
            as_postgres(
                [str(PGBIN / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-o", options, "start"]
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if started.returncode != 0:
            log = (folder / "log").read_text(errors="replace") if (folder / "log").exists() else ""
            pytest.fail(f"PostgreSQL did not start: {started.stderr}\n{log[-2000:]}")
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE evaluation")
        yield f"postgres://postgres@127.0.0.1:{port}/evaluation"
    finally:
        subprocess.run(
            as_postgres([str(PGBIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(folder, ignore_errors=True)


class ConnectionWatch:
    """Samples the number of client connections to the `evaluation` database until stopped; the peak."""

    def __init__(self, url: str):
        import psycopg

        # Opened before the burst, so that the watch itself can never be refused.
        self.conn = psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def count(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = 'evaluation' "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
        return int(row[0]) if row else 0

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.count())
            time.sleep(0.02)

    def __enter__(self) -> "ConnectionWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture(scope="module")
def postgres_token(postgres, tmp_path_factory) -> str:
    return prepared_database({"DATABASE_URL": postgres, "EVAL_RUNS_DIR": str(tmp_path_factory.mktemp("runs"))})


@pytest.mark.parametrize(
    ("pool_max", "pool_timeout"),
    [(POOL_MAX, "10"), (1, "0.05")],
    ids=["the-burst-waits-for-the-pool", "beyond-the-pool-wait-503"],
)
def test_a_burst_on_postgresql_stays_within_the_pool_and_never_answers_500(
    postgres, postgres_token, tmp_path, pool_max, pool_timeout
):
    env = {
        **SERVER_ENV,
        "DATABASE_URL": postgres,
        "EVAL_DB_POOL_MAX": str(pool_max),
        "EVAL_DB_POOL_TIMEOUT": pool_timeout,
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
    }
    if pool_timeout == "0.05":
        # Every request inside Django at once (the limit on requests at once off, as when an operator
        # raises it past the pool): the pool, not that limit, is what this case exhausts.
        env["EVAL_WEB_CONCURRENCY"] = "0"
    log = tmp_path / "web.log"
    with managed_server(env, log_path=log) as url:
        watch = ConnectionWatch(postgres)
        try:
            with watch:
                statuses, refusal = burst(url, postgres_token, BURST)
            after = sequential(url, postgres_token, 20)
            settled = watch.count()
        finally:
            watch.conn.close()
    server_log = log.read_text(errors="replace")[-3000:]
    assert set(statuses) <= {"200", "503"}, f"the burst got {dict(statuses)}; server log:\n{server_log}"
    assert statuses["200"] > 0, f"nothing was served: {dict(statuses)}"
    if refusal is not None:
        headers, body = refusal
        assert headers.get("retry-after", "").isdigit(), f"a 503 without Retry-After: {headers}"
        assert "database is busy" in body["error"], body
    assert after == [200] * 20, f"requests right after the burst got {after}; server log:\n{server_log}"
    assert watch.peak <= pool_max, f"the server held {watch.peak} connections at once; its pool allows {pool_max}"
    assert settled <= pool_max, f"{settled} connections stayed open after the burst; the pool allows {pool_max}"
    if pool_timeout == "0.05":
        assert statuses["503"] > 0, f"a one-connection pool with a 50 ms wait refused nothing: {dict(statuses)}"


def test_a_burst_on_sqlite_never_answers_500_or_finds_the_database_locked(tmp_path):
    env = {
        **SERVER_ENV,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
    }
    token = prepared_database(env)
    log = tmp_path / "web.log"
    with managed_server(env, log_path=log) as url:
        with RunWriter(tmp_path / "db.sqlite3"):
            statuses, _ = burst(url, token, BURST)
        after = sequential(url, token, 20)
    server_log = log.read_text(errors="replace")
    assert set(statuses) <= {"200", "503"}, f"the burst got {dict(statuses)}; server log:\n{server_log[-3000:]}"
    assert after == [200] * 20, f"requests right after the burst got {after}"
    assert "database is locked" not in server_log, server_log[-3000:]


class RunWriter:
    """Two active runs' writes while the burst lasts: a message and a heartbeat every 50 ms, each in
    an IMMEDIATE transaction, as a worker stores a turn."""

    def __init__(self, path: Path):
        self.path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self.errors: list[str] = []

    def _write(self) -> None:
        import sqlite3

        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            while not self._stop.is_set():
                for run_id in ("load_000", "load_001"):
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute(
                        "UPDATE evaluation_evaluationrun SET heartbeat_at = CURRENT_TIMESTAMP, turn = turn + 1 "
                        "WHERE run_id = ?",
                        [run_id],
                    )
                    time.sleep(0.05)  # the worker's work inside its transaction
                    conn.execute("COMMIT")
                time.sleep(0.05)
        except sqlite3.Error as exc:
            self.errors.append(str(exc))
        finally:
            conn.close()

    def __enter__(self) -> "RunWriter":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self.errors, f"the runs' writer failed: {self.errors}"


STAFF_SESSION = """
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
user = get_user_model().objects.get(username="loadstaff")
session = SessionStore()
session["_auth_user_id"] = str(user.pk)
session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
session["_auth_user_hash"] = user.get_session_auth_hash()
session.create()
print(session.session_key)
"""


def test_dashboard_pages_beyond_the_pool_answer_503_with_retry_after_never_500(postgres, postgres_token, tmp_path):
    env = {
        **SERVER_ENV,
        "DATABASE_URL": postgres,
        "EVAL_DB_POOL_MAX": "1",
        "EVAL_DB_POOL_TIMEOUT": "0.05",
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
    }
    session = manage(env, "shell", "-c", STAFF_SESSION).strip().splitlines()[-1]
    log = tmp_path / "web.log"
    refusals: list[tuple[dict, str]] = []

    async def one(client: httpx.AsyncClient, path: str) -> str:
        try:
            response = await client.get(f"{url}{path}")
        except httpx.HTTPError as exc:
            return type(exc).__name__
        if response.status_code == 503:
            refusals.append((dict(response.headers), response.text))
        return str(response.status_code)

    async def all_at_once(n: int) -> Counter:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        async with httpx.AsyncClient(limits=limits, cookies={"sessionid": session}, timeout=60) as client:
            paths = ["/admin/evaluation/", "/admin/evaluation/runs/load_005/", "/admin/evaluation/charts/"]
            return Counter(await asyncio.gather(*(one(client, paths[i % 3]) for i in range(n))))

    with managed_server(env, log_path=log) as url:
        statuses = asyncio.run(all_at_once(60))
        with httpx.Client(cookies={"sessionid": session}, timeout=30) as client:
            after = [client.get(f"{url}/admin/evaluation/").status_code for _ in range(5)]
    server_log = log.read_text(errors="replace")[-3000:]
    assert set(statuses) <= {"200", "503"}, f"the burst got {dict(statuses)}; server log:\n{server_log}"
    assert statuses["503"] > 0, f"a one-connection pool with a 50 ms wait refused no page: {dict(statuses)}"
    headers, body = refusals[0]
    assert headers.get("retry-after", "").isdigit(), f"a 503 page without Retry-After: {headers}"
    assert "database is busy" in body and "Traceback" not in body
    assert after == [200] * 5, f"pages right after the burst got {after}"
