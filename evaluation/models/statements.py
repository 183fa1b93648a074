"""One-row writes whose SQL is built once: for the few statements a conversation repeats every turn.

The ORM builds a query, resolves its expressions and compiles its SQL anew on every `update()` and
`create()`. For a one-row write that costs more than the database's own work, and a conversation
repeats a few of them every turn (a run's messages and progress, a tutor session's logs;
bench/README.md has the figures). These build the SQL once per model, columns and database, and
convert every value with its field's own `get_db_prep_save`, as the ORM does, so what is stored is
the same. They send no signals. `update()`, like `QuerySet.update()`, runs no `pre_save` (no
auto_now): the caller passes every value it writes; a value that is an expression (`F(...)`) goes
through the ORM. `insert()` fills what is left out with the field's default or, for auto_now and
auto_now_add, the current time. A JSONField's value may come already encoded (`EncodedJSON`), for a
value the caller keeps encoded as it grows (a session's append-only logs).
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import connections, models, router, transaction
from django.db.models import Field
from django.utils import timezone


def _field(model: type[models.Model], name: str) -> Field:
    return model._meta.pk if name == "pk" else model._meta.get_field(name)  # type: ignore[return-value]


@lru_cache(maxsize=256)
def _update_sql(
    model: type[models.Model], alias: str, columns: tuple[str, ...], where: tuple[str, ...]
) -> tuple[str, tuple[Field, ...], tuple[Field, ...]]:
    quote = connections[alias].ops.quote_name
    sets, conditions = [_field(model, n) for n in columns], [_field(model, n) for n in where]
    sql = (
        f"UPDATE {quote(model._meta.db_table)} SET "
        + ", ".join(f"{quote(f.column or f.attname)} = %s" for f in sets)
        + " WHERE "
        + " AND ".join(f"{quote(f.column or f.attname)} = %s" for f in conditions)
    )
    return sql, tuple(sets), tuple(conditions)


@lru_cache(maxsize=256)
def _insert_sql(model: type[models.Model], alias: str, columns: tuple[str, ...]) -> tuple[str, tuple[Field, ...]]:
    quote = connections[alias].ops.quote_name
    fields = [_field(model, n) for n in columns]
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column or f.attname) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    return sql, tuple(fields)


@dataclass(frozen=True)
class EncodedJSON:
    """A JSONField's value as JSON text the caller already encoded (with `json.dumps` defaults, as the
    field's own encoder would): stored as it is, not encoded again."""

    text: str


def _plain(value: Any) -> Any:
    """A related object stands for its key, as the ORM takes it."""
    return value.pk if isinstance(value, models.Model) else value


def _prep_save(field: Field, value: Any, connection: Any) -> Any:
    if isinstance(value, EncodedJSON):
        if not isinstance(field, models.JSONField):
            raise TypeError(f"statements: EncodedJSON given for {field.name}, which is not a JSONField")
        if connection.vendor == "postgresql":
            from psycopg.types.json import Jsonb

            return Jsonb(value.text, dumps=str)  # the text as it is, sent as jsonb
        return value.text
    return field.get_db_prep_save(_plain(value), connection)


def _execute(connection: Any, sql: str, params: list[Any]) -> int:
    # As the ORM's own writes: an error inside atomic() marks the transaction for rollback.
    with transaction.mark_for_rollback_on_error(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def update(model: type[models.Model], where: dict[str, Any], /, **values: Any) -> int:
    """UPDATE one model's rows SET `values` WHERE each field of `where` equals its value ("pk" names
    the primary key; None is refused, since `= NULL` matches nothing); returns the number of rows
    changed, as `QuerySet.update()` does."""
    if any(v is None for v in where.values()):
        raise ValueError(f"statements.update: a None condition in {sorted(where)} would match no row")
    if any(hasattr(v, "resolve_expression") for v in (*values.values(), *where.values())):
        return model._default_manager.filter(**where).update(**values)
    alias = router.db_for_write(model)
    connection = connections[alias]
    sql, sets, conditions = _update_sql(model, alias, tuple(values), tuple(where))
    params = [_prep_save(f, v, connection) for f, v in zip(sets, values.values(), strict=True)]
    params += [f.get_db_prep_value(_plain(v), connection) for f, v in zip(conditions, where.values(), strict=True)]
    return _execute(connection, sql, params)


def insert(model: type[models.Model], /, **values: Any) -> None:
    """INSERT one row of these field values, by field name (a foreign key by its object or its key:
    `run=run`, `run=run.pk` or `run_id=run.pk`). Fields left out take their defaults, an
    auto-increment key its next value, an auto_now or auto_now_add date the current time."""
    for field in model._meta.concrete_fields:
        if field.name in values or field.attname in values or isinstance(field, models.AutoField):
            continue
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            values[field.name] = timezone.now()
        else:
            values[field.name] = field.get_default()
    alias = router.db_for_write(model)
    connection = connections[alias]
    sql, fields = _insert_sql(model, alias, tuple(values))
    params = [_prep_save(f, v, connection) for f, v in zip(fields, values.values(), strict=True)]
    _execute(connection, sql, params)
