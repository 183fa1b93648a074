"""Real processes for tests: the app under uvicorn on the test database, and qcluster workers."""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection


def database_url_for_tests() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


ROOT = Path(__file__).resolve().parents[1]


def worker_env(tmp_path: Path, simulator_url: str, *, workers: int, stale_after: float, **extra: str) -> dict[str, str]:
    """The environment of a web server and a real qcluster sharing the test database: background runs (not
    synchronous), `workers` workers, reports under tmp_path, the simulated student from the loopback vendor at
    simulator_url, runs swept as stale after stale_after seconds."""
    return {
        **SERVER_ENV,
        "EVAL_Q_SYNC": "0",
        "EVAL_Q_WORKERS": str(workers),
        "DATABASE_URL": database_url_for_tests(),
        "EVAL_RUNS_DIR": str(tmp_path / "runs"),
        "EVAL_SIMULATOR_PROVIDER": f"openai/student@{simulator_url}",
        "EVAL_RUN_STALE_AFTER": str(stale_after),
        **extra,
    }


@contextmanager
def qcluster_worker(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen]:
    """A real `manage.py qcluster` process with env on top of ours, in a process group of its own.

    On exit the cluster is stopped (SIGTERM; it stops the workers it forked), and the whole group
    killed if it does not stop within 20 s; a test may SIGKILL the group itself (os.killpg(worker.pid, ...)).
    """
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=log_path.open("wb"),
        start_new_session=True,
    )
    try:
        yield worker
    finally:
        _stop_group(worker)


def _stop_group(process: subprocess.Popen) -> None:
    # SIGTERM to the leader only: a qcluster stops its own workers (in about 2 s), whereas one whose
    # processes are all sent SIGTERM at once never finishes stopping and waited out the 20 s below.
    try:
        os.kill(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # anything the cluster left behind
    except ProcessLookupError:
        pass
    if process.poll() is None:
        process.wait(5)


@contextmanager
def killable_server(env: dict[str, str], log_path: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """The app under uvicorn on the test database, as its own process a test may SIGKILL -> (url, process)."""
    import time

    from evaluation.tutoring.client import forget_health, health_ok
    from evaluation.tutoring.server import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--no-access-log", "--port", str(port), "evalproject.asgi:application"],
        cwd=ROOT,
        env={**os.environ, **SERVER_ENV, "DATABASE_URL": database_url_for_tests(), **env},
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not health_ok(url, timeout=1.0):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the app did not start:\n{log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield url, process
    finally:
        forget_health(url)
        _stop_group(process)


SERVER_ENV = {"EVAL_TUTOR_PROVIDER": "offline", "EVAL_LLM_PROVIDER": "", "EVAL_Q_SYNC": "1"}


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """A throwaway redis-server on loopback (no persistence) -> its URL; fails with its log if it does
    not answer within 10 s."""
    import shutil
    import socket
    import time

    from evaluation.tutoring.server import free_port

    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (.ci/run installs it)")
    port, log = free_port(), folder / "redis.log"
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(folder), "--logfile", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                text = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log written)"
                raise RuntimeError(f"redis-server did not answer on 127.0.0.1:{port} within 10 s:\n{text}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
