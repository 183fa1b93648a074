"""The reference tutor's server for a CLI batch: the command's own uvicorn on a free port, or a server
it was told to use once that server proves to be this install's."""

import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from django.db import connection

from evaluation.conf import setting
from evaluation.tutoring.client import TutorUnavailable, forget_health, health_ok, healthy

log = logging.getLogger(__name__)


class ForeignServer(TutorUnavailable):
    """The server answers, but it is not this install's tutor: it refuses this install's protocol key,
    or it does not speak the session protocol."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str | None:
    """The database this process uses, as DATABASE_URL, for a server that must share it (under tests
    the database's name differs from the configured one); None when the environment's own will do."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    configured = os.environ.get("DATABASE_URL", "")
    if not configured:
        return None
    parts = urlsplit(configured)
    if parts.path.lstrip("/") == str(db["NAME"]):
        return None
    return urlunsplit(parts._replace(path="/" + quote(str(db["NAME"]))))


def own_server_env() -> dict[str, str]:
    """What the command's own server needs to be this install's: the same database and protocol key,
    whatever settings this process was given."""
    env = {"EVAL_PROTOCOL_KEY": str(setting("PROTOCOL_KEY"))}
    url = database_url()
    if url:
        env["DATABASE_URL"] = url
    return env


class ServerProcess:
    """uvicorn (HTTP + WebSocket, the app's production server) as a subprocess on a free port.

    `start` returns at once, so the caller can do other work while the app boots; `wait` blocks until
    /health/db answers. Its output goes to a log file (never an unread pipe, which would block it once full).
    """

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        log_path: Path | None = None,
        app: str = "evalproject.asgi:application",
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env or {}
        self.app = app
        self.log_path = log_path or Path(tempfile.gettempdir()) / f"eval-tutor-server-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> "ServerProcess":
        root = Path(__file__).resolve().parents[2]
        with self.log_path.open("wb") as log_file:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "uvicorn", "--no-access-log", "--timeout-keep-alive", "75"),
                    *("--port", str(self.port), self.app),
                ],
                cwd=root,
                env={**os.environ, **self.env},
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait(self, timeout: float = 60.0) -> str:
        """The server's URL once it is healthy; TutorUnavailable (with its log's end) when it exits or
        takes longer than timeout seconds."""
        assert self.process is not None, "start() first"
        deadline = time.monotonic() + timeout
        while not health_ok(self.url, timeout=1.0):
            if self.process.poll() is not None:
                err = self.log_path.read_text(errors="replace")[-2000:]
                raise TutorUnavailable(f"the tutor server exited during start-up (log {self.log_path}):\n{err}")
            if time.monotonic() > deadline:
                raise TutorUnavailable(f"the tutor server did not become healthy within {timeout:g}s")
            time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        forget_health(self.url)
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def managed_server(
    env: dict[str, str] | None = None,
    *,
    startup_timeout: float = 60.0,
    log_path: Path | None = None,
    app: str = "evalproject.asgi:application",
) -> Iterator[str]:
    """Start uvicorn as a subprocess, wait for /health/db, stop it on exit."""
    server = ServerProcess(env, log_path=log_path, app=app).start()
    try:
        yield server.wait(startup_timeout)
    finally:
        server.stop()


@contextmanager
def own_server(*, startup_timeout: float = 60.0) -> Iterator[str]:
    """This install's tutor on a free port, for the duration: same database, same protocol key."""
    with managed_server(own_server_env(), startup_timeout=startup_timeout) as url:
        yield url


def check_install(url: str, *, timeout: float = 5.0) -> None:
    """Raise ForeignServer unless the server at url takes this install's protocol key.

    The probe is the cheapest authenticated request there is: `POST /sessions` with the key and an empty
    body. This install's server checks the key first, then refuses the body (400, topic_id is required),
    so nothing is created and no LLM is called; a server of another install (another SECRET_KEY or
    EVAL_PROTOCOL_KEY) answers 401. A server that is not up raises nothing here: the batch reports it.
    """
    request = urllib.request.Request(
        f"{url.rstrip('/')}/sessions",
        data=b"{}",
        method="POST",
        headers={"content-type": "application/json", "Authorization": f"Bearer {setting('PROTOCOL_KEY')}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError):
        return
    if status in (401, 403):
        raise ForeignServer(
            f"the server at {url} belongs to another install: its protocol key differs "
            f"(POST /sessions with this install's key answered {status}). "
            "Stop it, or run this checkout's own server there (manage.py runserver here), or set "
            "EVAL_PROTOCOL_KEY to the same value for both; or leave out --server-url, --skip-server and "
            "EVAL_SERVER_URL, and the command starts a tutor server of its own"
        )
    if status in (404, 405):
        raise ForeignServer(
            f"the server at {url} does not speak the session protocol: POST /sessions answered {status}"
        )


@contextmanager
def tutor_server(url: str, *, manage: bool = True) -> Iterator[str]:
    """Use the server at url when it is healthy (and, when managing, this install's); otherwise (if
    allowed) start one of this install's for the duration.

    Without management (a worker's run) a health answer this process had in the last HEALTH_KEPT_FOR
    seconds will do; a batch that may start its own server asks now."""
    up = health_ok(url) if manage else healthy(url)
    if up and manage:
        try:
            check_install(url)
        except ForeignServer as exc:
            log.warning("not using %s: %s", url, exc)
            up = False
    if up:
        yield url
        return
    if not manage:
        raise TutorUnavailable(f"tutor unreachable: {url}/health/db did not answer ok (and server management is off)")
    with own_server() as started:
        yield started
