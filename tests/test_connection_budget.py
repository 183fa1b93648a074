"""The connection budget: a qcluster process gets the small pool, and `manage.py check` warns, naming
every number, when the configured processes can take more connections than PostgreSQL gives."""

import json
import socket

import pytest
from django.db import connection

from tests.test_security_settings import run_python

POOL_OF_THIS_PROCESS = """
import json, sys
sys.argv = [sys.argv[0], *{argv!r}]
import django
django.setup()
from django.db import connection
pool = connection.pool
print(json.dumps({{"min": pool.min_size, "max": pool.max_size, "max_idle": pool.max_idle}}))
"""


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pool_of(argv: list[str], env: dict[str, str], tmp_path) -> dict:
    """The pool Django makes in a process started as `manage.py <argv>` (made, not opened)."""
    result = run_python(POOL_OF_THIS_PROCESS.format(argv=argv), env, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_qcluster_process_gets_the_small_pool_and_keeps_none_idle(tmp_path):
    env = {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed_port()}/evaluation"}
    assert pool_of(["qcluster"], env, tmp_path) == {"min": 0, "max": 3, "max_idle": 60.0}
    assert pool_of(["runserver"], env, tmp_path) == {"min": 1, "max": 8, "max_idle": 300.0}
    sized = {**env, "EVAL_DB_WORKER_POOL_MAX": "4", "EVAL_DB_POOL_MAX": "12"}
    assert pool_of(["qcluster"], sized, tmp_path)["max"] == 4
    assert pool_of(["runserver"], sized, tmp_path)["max"] == 12


def test_check_says_it_could_not_read_max_connections_when_asked_about_the_database(tmp_path):
    env = {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed_port()}/evaluation"}
    plain = run_python("", env, tmp_path, "check")
    assert plain.returncode == 0, plain.stderr
    assert "evaluation.W00" not in plain.stdout + plain.stderr  # no database yet is no failure of the budget
    asked = run_python("", env, tmp_path, "check", "--database", "default")
    output = asked.stdout + asked.stderr
    assert asked.returncode == 0, output
    assert "evaluation.W002" in output
    assert "could not read PostgreSQL's max_connections" in output
    assert "EVAL_Q_WORKERS 2" in output and "= 25" in output  # 1 x 8 + 1 x (2 + 2) x 3 + 5


def this_database_url() -> str:
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s["PASSWORD"] else ""
    return f"postgres://{s['USER']}{password}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def limits() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        max_connections = int(cursor.fetchone()[0])
        cursor.execute("SHOW superuser_reserved_connections")
        reserved = int(cursor.fetchone()[0])
    return max_connections, reserved


@pytest.mark.django_db
def test_check_warns_naming_every_number_when_the_processes_cannot_fit(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("max_connections is PostgreSQL's; CI runs this file on PostgreSQL too")
    max_connections, reserved = limits()
    available = max_connections - reserved
    # One web process of 8 and a reserve of 5, then just enough qclusters of 2 workers (12 each) to pass.
    qclusters = (available - 8 - 5) // 12 + 1
    env = {
        "DATABASE_URL": this_database_url(),
        "EVAL_WEB_PROCESSES": "1",
        "EVAL_QCLUSTERS": str(qclusters),
        "EVAL_Q_WORKERS": "2",
    }
    result = run_python("", env, tmp_path, "check")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output  # a warning, not an error: the processes still start
    assert "evaluation.W001" in output
    total = 8 + qclusters * 12 + 5
    for part in (
        "EVAL_WEB_PROCESSES 1 x EVAL_DB_POOL_MAX 8",
        f"EVAL_QCLUSTERS {qclusters} x (EVAL_Q_WORKERS 2 + 2 sentinel and monitor)",
        "EVAL_DB_WORKER_POOL_MAX 3 + EVAL_DB_RESERVE 5",
        f"= {total}",
        f"max_connections {max_connections} - superuser_reserved_connections {reserved} = {available}",
    ):
        assert part in output, part


@pytest.mark.django_db
def test_check_is_silent_when_the_processes_fit(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("max_connections is PostgreSQL's; CI runs this file on PostgreSQL too")
    max_connections, reserved = limits()
    qclusters = (max_connections - reserved - 8 - 5) // 12  # as many as fit
    assert qclusters >= 1, f"max_connections {max_connections} is too small for this test"
    env = {"DATABASE_URL": this_database_url(), "EVAL_QCLUSTERS": str(qclusters), "EVAL_Q_WORKERS": "2"}
    for args in (["check"], ["check", "--database", "default"]):
        result = run_python("", env, tmp_path, *args)
        assert result.returncode == 0, result.stderr
        assert "System check identified no issues" in result.stdout, result.stdout + result.stderr
