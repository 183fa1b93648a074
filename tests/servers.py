"""Real processes for tests: the app under daphne on the test database, and qcluster workers."""

import os
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


@contextmanager
def qcluster_worker(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen]:
    """A real `manage.py qcluster` process with env on top of ours; stopped on exit."""
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=log_path.open("wb"),
    )
    try:
        yield worker
    finally:
        worker.terminate()
        worker.wait(20)


SERVER_ENV = {"EVAL_TUTOR_PROVIDER": "offline", "EVAL_LLM_PROVIDER": "", "EVAL_Q_SYNC": "1"}
