"""Shared fixtures: a staff user and the shipped catalogue loaded into the test database."""

from pathlib import Path

import pytest

from evaluation.catalog import catalog_load
from evaluation.tutoring.server import managed_server
from tests.servers import SERVER_ENV, database_url_for_tests

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def catalog(db):
    report = catalog_load(
        personas_dir=ROOT / "personas",
        topics_dir=ROOT / "topics",
        propositions_dir=ROOT / "propositions",
        cast_dir=ROOT / "cast",
    )
    assert report.ok, report.errors
    return report


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(
        "staff", "staff@example.com", "pw-staff-123", is_staff=True, is_superuser=True
    )


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture(autouse=True)
def fast_llm_settings(settings, tmp_path):
    """Small retry delays and timeouts, and a private recordings folder, for every test."""
    settings.EVALUATION = {
        **settings.EVALUATION,
        "LLM_BACKOFF_SECONDS": [0.01, 0.02],
        "LLM_TIMEOUT_SECONDS": 2.0,
        "RECORDINGS_DIR": tmp_path / "recordings",
        "RUNS_DIR": tmp_path / "runs",
    }
    return settings


@pytest.fixture(autouse=True)
def quick_password_hashes(settings):
    """Users made in the test process get hashes of a thousand PBKDF2 iterations instead of a million
    (about half a second of CPU per user on a quiet core, and most tests make one)."""
    settings.PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]


@pytest.fixture
def stale_mark_made(monkeypatch):
    """A status read marks stale runs at most once every few seconds a process, which costs a query or two
    in whichever read comes first; query-count tests take it as made already, so neither count holds it."""
    import time

    from evaluation.runs import services as run_services

    monkeypatch.setattr(run_services, "STALE_ON_READ_EVERY", 3600.0)
    monkeypatch.setattr(run_services, "_stale_read_at", time.monotonic())


@pytest.fixture(scope="session")
def _loopback_server():
    from evaluation.providers.loopback import LoopbackLLMServer

    with LoopbackLLMServer(hang_seconds=5.0) as server:
        yield server


@pytest.fixture
def loopback(_loopback_server, monkeypatch):
    """The loopback LLM server, emptied of scripts and counts, with keys set for the real SDKs."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-loopback")
    _loopback_server.reset()
    _loopback_server.latency = 0.0
    yield _loopback_server
    _loopback_server.reset()


@pytest.fixture(scope="session")
def tutor_server_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """The app under uvicorn, on the test database: the reference tutor as a student reaches it."""
    with managed_server(
        {**SERVER_ENV, "DATABASE_URL": database_url_for_tests()}, log_path=tmp_path_factory.mktemp("srv") / "server.log"
    ) as url:
        yield url


@pytest.fixture
def server(tutor_server_url, transactional_db, settings, catalog, monkeypatch):
    settings.EVALUATION = {**settings.EVALUATION, "SERVER_URL": tutor_server_url}
    monkeypatch.setenv("EVAL_SERVER_URL", tutor_server_url)  # the CLI uses it instead of starting its own
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


@pytest.fixture
def role_groups(transactional_db):
    """The viewer and operator groups with their permissions, as the migrations make them: a transactional test
    empties every table when it ends, so a later transactional test that needs the roles makes them again (by
    the migrations' own functions, on the migrations' model states)."""
    from importlib import import_module

    from django.contrib.auth.models import Group
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    if Group.objects.filter(name__in=["viewer", "operator"]).count() == 2:
        return
    state = MigrationExecutor(connection).loader.project_state().apps
    import_module("evaluation.migrations.0007_roles").create_roles(state, None)
    for name in ("0012_judging", "0021_label_queues"):
        import_module(f"evaluation.migrations.{name}").grant_permissions(state, None)
