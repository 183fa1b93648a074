"""The reference tutor's server for a CLI batch: use a healthy one, or start uvicorn for the duration."""

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluation.tutoring.client import TutorUnavailable, forget_health, health_ok, healthy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def managed_server(
    env: dict[str, str] | None = None,
    *,
    startup_timeout: float = 60.0,
    log_path: Path | None = None,
    app: str = "evalproject.asgi:application",
) -> Iterator[str]:
    """Start uvicorn (HTTP + WebSocket, the app's production server) as a subprocess, wait for
    /health/db, stop it on exit.

    Its output goes to a log file (never an unread pipe, which would block it once full).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    root = Path(__file__).resolve().parents[2]
    log_path = log_path or Path(tempfile.gettempdir()) / f"eval-tutor-server-{port}.log"
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--no-access-log", "--timeout-keep-alive", "75", "--port", str(port), app],
        cwd=root,
        env={**os.environ, **(env or {})},
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + startup_timeout
        while not health_ok(url, timeout=1.0):
            if process.poll() is not None:
                err = log_path.read_text(errors="replace")[-2000:]
                raise TutorUnavailable(f"the tutor server exited during start-up (log {log_path}):\n{err}")
            if time.monotonic() > deadline:
                raise TutorUnavailable(f"the tutor server did not become healthy within {startup_timeout:g}s")
            time.sleep(0.1)
        yield url
    finally:
        forget_health(url)
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        log_file.close()


@contextmanager
def tutor_server(url: str, *, manage: bool = True) -> Iterator[str]:
    """Use the server at url when it is healthy; otherwise (if allowed) start one for the duration.

    Without management (a worker's run) a health answer this process had in the last HEALTH_KEPT_FOR
    seconds will do; a batch that may start its own server asks now."""
    up = health_ok(url) if manage else healthy(url)
    if up:
        yield url
        return
    if not manage:
        raise TutorUnavailable(f"tutor unreachable: {url}/health/db did not answer ok (and server management is off)")
    with managed_server() as started:
        yield started
