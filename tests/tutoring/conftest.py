"""Fixtures for the tutoring pipeline: the real tutor server (daphne) on the test database, sync tasks."""

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

from evaluation.tutoring.runner import managed_server


def database_url_for_tests() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


ROOT = Path(__file__).resolve().parents[2]


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


@pytest.fixture(scope="session")
def tutor_server_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """The app under daphne, on the test database: the reference tutor as a student reaches it."""
    with managed_server(
        {**SERVER_ENV, "DATABASE_URL": database_url_for_tests()}, log_path=tmp_path_factory.mktemp("srv") / "daphne.log"
    ) as url:
        yield url


@pytest.fixture
def server(tutor_server_url, transactional_db, settings, catalog):
    settings.EVALUATION = {**settings.EVALUATION, "SERVER_URL": tutor_server_url}
    return tutor_server_url


@pytest.fixture
def q_sync(monkeypatch):
    """django-q2 runs each task in the calling process (the test settings' sync mode)."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def fake_tutor(tmp_path):
    """Start a misbehaving protocol server: fake_tutor('close' | 'silent' | 'error') -> base URL."""
    stack = []

    def start(mode: str) -> str:
        cm = managed_server(
            {"FAKE_TUTOR_MODE": mode}, app="tests.fake_tutor:app", log_path=tmp_path / f"fake-{mode}.log"
        )
        stack.append(cm)
        return cm.__enter__()

    yield start
    for cm in stack:
        cm.__exit__(None, None, None)
