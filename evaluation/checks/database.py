"""Checks of the database configuration: the connection budget against PostgreSQL's max_connections."""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register

# How long the check waits for PostgreSQL before it gives up: it runs before every management command.
CONNECT_TIMEOUT_S = 3


@dataclass(frozen=True)
class ConnectionBudget:
    """The most connections the configured processes can hold at once (docs/scaling.md)."""

    web_processes: int
    """EVAL_WEB_PROCESSES: web processes (uvicorn --workers) against this database, on every machine."""
    web_pool: int
    """EVAL_DB_POOL_MAX: a web process's pool."""
    qclusters: int
    """EVAL_QCLUSTERS: `manage.py qcluster` processes, on every machine."""
    workers: int
    """EVAL_Q_WORKERS: worker processes per qcluster."""
    cluster_processes: int
    """A qcluster's own processes that use the database besides its workers (sentinel, monitor)."""
    worker_pool: int
    """EVAL_DB_WORKER_POOL_MAX: the pool of each qcluster process."""
    reserve: int
    """EVAL_DB_RESERVE: kept free for psql, `manage.py shell` and other management commands."""

    @property
    def total(self) -> int:
        return (
            self.web_processes * self.web_pool
            + self.qclusters * (self.workers + self.cluster_processes) * self.worker_pool
            + self.reserve
        )

    def formula(self) -> str:
        return (
            f"EVAL_WEB_PROCESSES {self.web_processes} x EVAL_DB_POOL_MAX {self.web_pool} + EVAL_QCLUSTERS "
            f"{self.qclusters} x (EVAL_Q_WORKERS {self.workers} + {self.cluster_processes} sentinel and monitor) "
            f"x EVAL_DB_WORKER_POOL_MAX {self.worker_pool} + EVAL_DB_RESERVE {self.reserve} = {self.total}"
        )


def configured_budget() -> ConnectionBudget:
    return ConnectionBudget(**settings.DATABASE_CONNECTION_BUDGET)


def read_limits(alias: str = "default") -> dict[str, int]:
    """PostgreSQL's max_connections and the slots it keeps back (superuser_reserved_connections, and from
    PostgreSQL 16 reserved_connections), read on a connection of its own (not the pool's), given up
    after CONNECT_TIMEOUT_S seconds."""
    import psycopg
    from django.db import connections

    params = {**connections[alias].get_connection_params(), "connect_timeout": CONNECT_TIMEOUT_S}
    params.pop("cursor_factory", None)
    with psycopg.connect(**params, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, setting::int FROM pg_settings WHERE name IN "
            "('max_connections', 'superuser_reserved_connections', 'reserved_connections')"
        ).fetchall()
    return {name: value for name, value in rows if name == "max_connections" or value}


@register()
def check_connection_budget(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warns when the configured processes, at their pools' bounds, can take every connection PostgreSQL
    gives, so that psql and `manage.py shell` could not connect. Runs with every `manage.py check`; when
    PostgreSQL cannot be reached it says so only when asked about the database (`check --database default`,
    and `migrate`), since a check run before the database exists is no failure of the budget."""
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        return []
    budget = configured_budget()
    try:
        limits = read_limits()
    except Exception as exc:  # any failure to connect or read: the budget stays unchecked, never a crash
        if "default" not in (databases or ()):
            return []
        return [
            Warning(
                f"could not read PostgreSQL's max_connections to check the connection budget "
                f"({type(exc).__name__}: {str(exc).strip()[:200]}); the configured processes may hold "
                f"{budget.formula()} connections",
                hint="docs/scaling.md, 'Database connections', says how to size them.",
                id="evaluation.W002",
            )
        ]
    available = limits["max_connections"] - sum(v for k, v in limits.items() if k != "max_connections")
    if budget.total <= available:
        return []
    gives = " - ".join(f"{name} {value}" for name, value in limits.items())
    return [
        Warning(
            f"the configured processes may hold more PostgreSQL connections than it gives: {budget.formula()}, "
            f"more than {gives} = {available}; when they do, psql, `manage.py shell` and new processes cannot connect",
            hint="Lower EVAL_DB_POOL_MAX or EVAL_DB_WORKER_POOL_MAX, run fewer workers, or raise PostgreSQL's "
            "max_connections (docs/scaling.md, 'Database connections'). Set EVAL_WEB_PROCESSES and "
            "EVAL_QCLUSTERS to the numbers of processes on every machine.",
            id="evaluation.W001",
        )
    ]
