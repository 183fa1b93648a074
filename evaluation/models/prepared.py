"""PostgreSQL's prepared statements that a migration made stale are forgotten, and the statement runs again.

A pooled connection prepares what it repeats (EVAL_DB_PREPARE_THRESHOLD). A migration that changes a
column's type (a longer CharField) changes the rows such a statement returns, and PostgreSQL then
refuses it on that connection, every time, until the connection is replaced (an hour in the pool).
It refuses while binding, before the statement does anything. Outside a transaction a statement (not
an executemany) is run again once the connection has forgotten its prepared statements (psycopg
clears its own record of them when it sees DEALLOCATE ALL). Inside one, the error goes to the
caller as any database error does: the transaction has failed, and a rollback of the whole
transaction makes psycopg forget them (one rolled back to a savepoint may not).
"""

import logging
from typing import Any

from django.db import NotSupportedError

log = logging.getLogger(__name__)

STALE_PLAN = "cached plan must not change result type"


def _stale_plan(exc: NotSupportedError) -> bool:
    """PostgreSQL's refusal of a prepared statement whose result changed: by where it was raised,
    whatever language the server speaks, else by its English message."""
    diag = getattr(exc.__cause__, "diag", None)
    if diag is not None and diag.source_function == "RevalidateCachedQuery":
        return True
    return STALE_PLAN in str(exc)


def forget_stale_plans(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """A Django execute wrapper: on a stale prepared statement outside a transaction, forget them all
    and run the statement again."""
    try:
        return execute(sql, params, many, context)
    except NotSupportedError as exc:
        from psycopg.pq import TransactionStatus

        connection = context["connection"]
        idle = connection.connection.info.transaction_status == TransactionStatus.IDLE
        if many or not idle or not _stale_plan(exc):
            raise  # in a transaction, or an executemany that may have run in part: not run again here
        log.warning("a prepared statement was stale after a migration; this connection forgets them: %s", exc)
        with connection.wrap_database_errors:
            connection.connection.execute("DEALLOCATE ALL", prepare=False)
        return execute(sql, params, many, context)


def install(sender: Any, connection: Any, **kwargs: Any) -> None:
    """On `connection_created` (sent each time a thread's connection comes from the pool): wrap every
    statement of a PostgreSQL connection, once."""
    if connection.vendor == "postgresql" and forget_stale_plans not in connection.execute_wrappers:
        connection.execute_wrappers.insert(0, forget_stale_plans)
