"""One-row writes (and reads by key) whose SQL is built once: for the few statements a conversation
repeats every turn and a run repeats at its start and end.

The ORM builds a query, resolves its expressions and compiles its SQL anew on every `update()` and
`create()`. For a one-row write that costs more than the database's own work, and a conversation
repeats a few of them every turn (a run's messages and progress, a tutor session's logs;
bench/README.md has the figures). These build the SQL once per model, columns and database (and,
for an INSERT, number of rows), and convert every value with its field's own `get_db_prep_save`, as
the ORM does, so what is stored is the same. They send no signals. `update()`, like
`QuerySet.update()`, runs no `pre_save` (no auto_now): the caller passes every value it writes; a
value that is an expression (`F(...)`) goes through the ORM. `insert()` fills what is left out with
the field's default or, for auto_now and auto_now_add, the current time; `insert_rows()` does the
same for several rows in one statement. A JSONField's value may come already encoded
(`EncodedJSON`), for a value the caller keeps encoded as it grows (a session's append-only logs).
`get()` reads one row by its key, with the rows its foreign keys point to, into the instances
`select_related(...).get(pk=)` gives, each value through its field's own converters.
"""

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from django.db import connections, models, router, transaction
from django.db.models import Field, Value
from django.db.models.functions import Cast
from django.utils import timezone

M = TypeVar("M", bound=models.Model)

HAND_SQL = os.environ.get("EVAL_HAND_SQL", "1").strip() != "0"
"""EVAL_HAND_SQL=0 (benchmarks only, not a setting to deploy with) sends every call here through the
ORM instead, to measure what the built-once SQL saves (bench/scale_out.py --orm; the figures and the
15% this module must save to stay are in docs/scaling.md)."""


def _column(field: Field) -> str:
    return field.column or field.attname


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
        + ", ".join(f"{quote(_column(f))} = %s" for f in sets)
        + " WHERE "
        + " AND ".join(f"{quote(_column(f))} = %s" for f in conditions)
    )
    return sql, tuple(sets), tuple(conditions)


@lru_cache(maxsize=256)
def _insert_sql(
    model: type[models.Model], alias: str, columns: tuple[str, ...], rows: int
) -> tuple[str, tuple[Field, ...]]:
    quote = connections[alias].ops.quote_name
    fields = [_field(model, n) for n in columns]
    row = f"({', '.join(['%s'] * len(fields))})"
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(_column(f)) for f in fields)}) "
        f"VALUES {', '.join([row] * rows)}"
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


def _orm_value(value: Any) -> Any:
    """A value as the ORM takes it: JSON text already encoded is cast to JSON by the database."""
    if isinstance(value, EncodedJSON):
        return Cast(Value(value.text), models.JSONField())
    return value


def _orm_row(model: type[models.Model], row: dict[str, Any]) -> dict[str, Any]:
    """A row's values as model(**...) takes them: a foreign key given by its key under its attname."""
    out = {}
    for name, value in row.items():
        field = model._meta.get_field(name)
        if isinstance(value, EncodedJSON):
            value = json.loads(value.text)
        if field.is_relation and field.many_to_one and not isinstance(value, models.Model):
            name = field.attname  # type: ignore[union-attr]
        out[name] = value
    return out


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
    if not HAND_SQL or any(hasattr(v, "resolve_expression") for v in (*values.values(), *where.values())):
        return model._default_manager.filter(**where).update(**{k: _orm_value(v) for k, v in values.items()})
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
    insert_rows(model, [values])


def insert_rows(model: type[models.Model], rows: list[dict[str, Any]], /) -> None:
    """INSERT these rows in one statement (a turn's messages: one round trip, not one each), each as
    `insert` takes it; every row names the same fields in the same order. For a few rows: one
    statement carries rows x columns parameters, within the databases' limits (PostgreSQL 65535,
    SQLite 32766) for tens of rows, not thousands."""
    if not rows:
        return
    names = tuple(rows[0])
    if any(tuple(row) != names for row in rows[1:]):
        raise ValueError(f"statements.insert_rows: every row must name the fields {list(names)}, in that order")
    if not HAND_SQL:
        model._default_manager.bulk_create([model(**_orm_row(model, row)) for row in rows])
        return
    dated: list[Field] = []  # auto_now / auto_now_add: the current time
    defaulted: list[Field] = []  # the rest left out: the field's default, made anew for each row
    for field in model._meta.concrete_fields:
        if field.name in names or field.attname in names or isinstance(field, models.AutoField):
            continue
        auto = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
        (dated if auto else defaulted).append(field)
    now = timezone.now() if dated else None
    alias = router.db_for_write(model)
    connection = connections[alias]
    sql, fields = _insert_sql(model, alias, names + tuple(f.name for f in (*dated, *defaulted)), len(rows))
    params = []
    for row in rows:
        values = [*row.values(), *[now] * len(dated), *[f.get_default() for f in defaulted]]
        params += [_prep_save(f, v, connection) for f, v in zip(fields, values, strict=True)]
    _execute(connection, sql, params)


@dataclass(frozen=True)
class _Part:
    """One model's columns in a `get()` row: the key that joined it (None for the row's own model)."""

    key: models.ForeignKey | None
    model: type[models.Model]
    fields: tuple[Field, ...]
    pk_index: int


@lru_cache(maxsize=64)
def _select_sql(model: type[models.Model], alias: str, related: tuple[str, ...]) -> tuple[str, tuple[_Part, ...]]:
    """SELECT the model's columns and each related model's (joined as select_related joins them:
    LEFT OUTER for a nullable key) WHERE the key matches; with the layout to cut a row back up."""
    if model._meta.parents:
        raise TypeError(f"statements.get: {model.__name__} inherits from a concrete model; use the ORM")
    quote = connections[alias].ops.quote_name

    def part(key: models.ForeignKey | None, target: type[models.Model]) -> _Part:
        fields = tuple(target._meta.concrete_fields)
        return _Part(key, target, fields, [f.primary_key for f in fields].index(True))

    parts, joins = [part(None, model)], []
    for n, name in enumerate(related, start=1):
        key = model._meta.get_field(name)
        if not isinstance(key, models.ForeignKey):
            raise TypeError(f"statements.get: {model.__name__}.{name} is not a foreign key")
        target = key.related_model
        assert isinstance(target, type)
        kind = "LEFT OUTER JOIN" if key.null else "INNER JOIN"
        on = f"t0.{quote(_column(key))} = t{n}.{quote(_column(key.target_field))}"
        joins.append(f"{kind} {quote(target._meta.db_table)} t{n} ON {on}")
        parts.append(part(key, target))
    columns = ", ".join(f"t{n}.{quote(_column(f))}" for n, p in enumerate(parts) for f in p.fields)
    table, pk = quote(model._meta.db_table), quote(_column(model._meta.pk))
    return f"SELECT {columns} FROM {table} t0 {' '.join(joins)} WHERE t0.{pk} = %s", tuple(parts)


def _instance(part: _Part, alias: str, values: tuple[Any, ...], connection: Any) -> models.Model:
    """The instance the ORM would build from these column values, each through the converters the ORM
    applies to it (the backend's, then the field's own)."""
    converted = []
    for field, value in zip(part.fields, values, strict=True):
        col = field.get_col(part.model._meta.db_table)
        for convert in (*connection.ops.get_db_converters(col), *col.get_db_converters(connection)):
            value = convert(value, col, connection)
        converted.append(value)
    return part.model.from_db(alias, [f.attname for f in part.fields], converted)


def get(model: type[M], pk: Any, /, *, related: tuple[str, ...] = ()) -> M | None:
    """The row with this key as an instance of `model`, or None: what
    `model.objects.select_related(*related).get(pk=pk)` gives, without building the query each time."""
    if not HAND_SQL:
        try:
            return model._default_manager.select_related(*related).get(pk=_plain(pk))
        except model.DoesNotExist:  # type: ignore[attr-defined]
            return None
    alias = router.db_for_read(model)
    connection = connections[alias]
    sql, parts = _select_sql(model, alias, related)
    with connection.cursor() as cursor:
        cursor.execute(sql, [model._meta.pk.get_db_prep_value(_plain(pk), connection)])
        row = cursor.fetchone()
    if row is None:
        return None
    head, start = parts[0], len(parts[0].fields)
    instance = _instance(head, alias, row[:start], connection)
    for part in parts[1:]:
        values, start = row[start : start + len(part.fields)], start + len(part.fields)
        target = None if values[part.pk_index] is None else _instance(part, alias, values, connection)
        assert part.key is not None
        part.key.set_cached_value(instance, target)  # as select_related leaves it: no query on access
    return instance  # type: ignore[return-value]
