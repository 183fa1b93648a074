"""A throwaway PostgreSQL cluster a test can stop and start again (pg_ctl), for database-fault tests."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import ROOT


@dataclass
class PgCluster:
    """One cluster on 127.0.0.1:port with an `evaluation` database, migrated."""

    folder: Path
    port: int
    pgbin: Path
    setup_output: str = ""  # what pg_cluster(setup=...)'s script printed when it ran on the template

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/evaluation"

    def _ctl(self, *args: str) -> None:
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*as_postgres, str(self.pgbin / "pg_ctl"), "-D", str(self.folder / "data"), "-l", str(self.folder / "log")]
            + list(args),
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off -c synchronous_commit=off"
        self._ctl("-w", "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        """As an operator's `pg_ctl stop -m fast`: every session is terminated, then the server stops."""
        self._ctl("-w", "-m", mode, "stop")


_TEMPLATES: dict[tuple[Path, str], tuple[Path, str]] = {}


def _pgbin() -> Path:
    pgbins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    if not pgbins:
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin)")
    return pgbins[-1]


def _own_folder(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    return folder


def _copy_data(template: Path, folder: Path) -> None:
    # cp -a keeps the owner (postgres) and the data folder's 0700 mode
    subprocess.run(["cp", "-a", str(template), str(folder / "data")], check=True, capture_output=True)


def _template(pgbin: Path, setup: str) -> tuple[Path, str]:
    """The data folder of a stopped cluster with an `evaluation` database, migrated, and `setup` (a
    `manage.py shell -c` script) run on it -> (the folder, what the script printed). Made once per process
    and setup (initdb, the migrations and the script take most of a cluster's set-up), copied by every new
    cluster."""
    if (pgbin, setup) in _TEMPLATES:
        return _TEMPLATES[pgbin, setup]
    from evaluation.tutoring.server import free_port

    folder = _own_folder("eval-test-pg-template.")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    cluster = PgCluster(folder, free_port(), pgbin)
    output = ""
    try:
        if setup:
            _copy_data(_template(pgbin, "")[0], folder)
        else:
            subprocess.run(
                [*as_postgres, str(pgbin / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres"],
                check=True,
                capture_output=True,
            )
        cluster.start()
        try:
            if setup:
                output = subprocess.run(
                    [sys.executable, "manage.py", "shell", "-c", setup],
                    cwd=ROOT,
                    env={**os.environ, "DATABASE_URL": cluster.url},
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            else:
                import psycopg

                with psycopg.connect(
                    f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres", autocommit=True
                ) as conn:
                    conn.execute("CREATE DATABASE evaluation")
                subprocess.run(
                    [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
                    cwd=ROOT,
                    env={**os.environ, "DATABASE_URL": cluster.url},
                    check=True,
                    capture_output=True,
                )
        finally:
            cluster.stop("fast")  # a clean shutdown: a copy starts without recovery
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    _TEMPLATES[pgbin, setup] = (folder / "data", output)
    return _TEMPLATES[pgbin, setup]


@contextmanager
def pg_cluster(*, setup: str = "") -> Iterator[PgCluster]:
    """A new cluster of its own, started: a copy of a migrated one's data folder, on which `setup` (a
    `manage.py shell -c` script, printed output in `setup_output`) has run. Skips the test where
    PostgreSQL is not installed."""
    from evaluation.tutoring.server import free_port

    pgbin = _pgbin()
    template, output = _template(pgbin, setup)
    folder = _own_folder("eval-test-pg.")
    cluster = PgCluster(folder, free_port(), pgbin, output)
    try:
        _copy_data(template, folder)
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop("immediate")
        except Exception:  # already stopped
            pass
        shutil.rmtree(folder, ignore_errors=True)
