"""Prices as data: the shipped price file, the price table read once a while per process, and the price
in force for a model on a date."""

import asyncio
import datetime as dt
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.signals import setting_changed
from django.db import DatabaseError, connection, transaction
from django.db.models.signals import post_delete, post_migrate, post_save
from django.dispatch import receiver

from evaluation.conf import setting
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.limits import yaml_load
from evaluation.providers.base import Usage
from evaluation.providers.threads import release_helper_thread_connection

log = logging.getLogger(__name__)

PRICE_FIELDS = ("input", "output", "cached_input", "cache_write")
"""The four prices of a row, USD per million tokens, as the file names them."""
LONG_CACHE_WRITE = "cache_write_1h"
"""The price file's optional fifth price: writes to the 1-hour cache (absent: the cache write price)."""
FREE_PROVIDERS = frozenset({"offline", "replay"})
"""Providers that send nothing to a vendor: their calls cost nothing, with or without a price."""
_DATED = re.compile(r"^(?P<base>.+?)-(?:\d{4}-\d{2}-\d{2}|\d{8})$")
"""A dated snapshot of a model ("gpt-5.2-2026-01-15", "claude-haiku-4-5-20251001"): priced as its base name."""


@dataclass(frozen=True)
class Price:
    """One vendor's price for one model from a date on."""

    vendor: str
    model: str
    effective_from: dt.date
    input: float
    """USD per million input tokens that were neither read from nor written to the prompt cache."""
    output: float
    """USD per million output tokens; thinking is billed as output and counted inside output_tokens."""
    cached_input: float
    """USD per million input tokens read from the prompt cache."""
    cache_write: float
    """USD per million input tokens written to the prompt cache (Anthropic's 5-minute cache)."""
    batch_discount: float = 0.0
    """The fraction taken off for work sent through the vendor's batch API."""
    source: str = ""
    cache_write_long: float | None = None
    """USD per million input tokens written to the 1-hour cache (None: the cache_write price)."""

    def cost(self, usage: Usage, *, batch: bool = False) -> float:
        """USD for usage: cached-read and cache-write tokens are parts of input_tokens, priced apart, and of
        the writes those to the 1-hour cache at its own price."""
        plain = max(usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens, 0)
        long_writes = min(usage.cache_write_long_tokens, usage.cache_write_tokens)
        long_price = self.cache_write if self.cache_write_long is None else self.cache_write_long
        total = (
            plain * self.input
            + usage.cached_input_tokens * self.cached_input
            + (usage.cache_write_tokens - long_writes) * self.cache_write
            + long_writes * long_price
            + usage.output_tokens * self.output
        ) / 1_000_000
        return total * (1 - self.batch_discount) if batch else total


def price_file() -> Path:
    """The shipped price file."""
    return Path(settings.BASE_DIR) / "prices" / "vendors.yaml"


def _bad(where: str, field: str, reason: str) -> InvalidInput:
    return InvalidInput([FieldProblem(field, reason, file=where)])


def _number(entry: dict[str, Any], name: str, where: str, *, at_most: int | None = None) -> Decimal:
    value = entry.get(name)
    number: Decimal | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            number = None
    if number is None or not number.is_finite():
        raise _bad(where, name, f"must be a number, not {value!r}")
    if number < 0 or (at_most is not None and number > at_most):
        bound = f"between 0 and {at_most}" if at_most is not None else "0 or more"
        raise _bad(where, name, f"must be {bound}, not {value}")
    return number


@dataclass(frozen=True)
class PriceEntry:
    """One entry of the price file, with exact decimals (what the table stores)."""

    vendor: str
    model: str
    effective_from: dt.date
    prices: dict[str, Decimal]
    """input, output, cached_input, cache_write: USD per million tokens."""
    batch_discount: Decimal
    source: str
    cache_write_long: Decimal | None = None
    """Writes to the 1-hour cache (the file's cache_write_1h), when the vendor has such a price."""


def read_price_file(path: Path | None = None) -> list[PriceEntry]:
    """The entries of a price file; an InvalidInput names the file, the entry and the field at fault."""
    path = path or price_file()
    try:
        data = yaml_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _bad(str(path), "", f"cannot read the price file ({exc.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a date such as 2025-13-01
        raise _bad(str(path), "", f"not valid YAML ({str(exc).splitlines()[0]})") from None
    rows = data.get("prices") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise _bad(str(path), "prices", "needs a list of prices")
    entries: list[PriceEntry] = []
    seen: set[tuple[str, str, dt.date]] = set()
    for index, entry in enumerate(rows, 1):
        where = f"{path.name}, price {index}"
        if not isinstance(entry, dict):
            raise _bad(where, "prices", "each price must be a mapping")
        for name in ("vendor", "model"):
            if not isinstance(entry.get(name), str) or not entry[name].strip():
                raise _bad(where, name, "is required")
        when = entry.get("effective_from")
        if isinstance(when, str):
            try:
                when = dt.date.fromisoformat(when)
            except ValueError:
                when = None
        if not isinstance(when, dt.date) or isinstance(when, dt.datetime):
            raise _bad(where, "effective_from", f"must be a date (YYYY-MM-DD), not {entry.get('effective_from')!r}")
        key = (entry["vendor"].strip(), entry["model"].strip(), when)
        if key in seen:
            raise _bad(where, "effective_from", f"{key[0]}/{key[1]} from {when} is listed twice")
        seen.add(key)
        entries.append(
            PriceEntry(
                vendor=key[0],
                model=key[1],
                effective_from=when,
                prices={name: _number(entry, name, where) for name in PRICE_FIELDS},
                batch_discount=_number(entry, "batch_discount", where, at_most=1),
                source=str(entry.get("source") or "")[:300],
                cache_write_long=_number(entry, LONG_CACHE_WRITE, where) if LONG_CACHE_WRITE in entry else None,
            )
        )
    return entries


def row_values(entry: PriceEntry) -> dict[str, Any]:
    """The table's columns for an entry (ModelPrice's field names)."""
    return {
        **{f"{name}_per_mtok": value for name, value in entry.prices.items()},
        "batch_discount": entry.batch_discount,
        "source": entry.source,
        "cache_write_long_per_mtok": entry.cache_write_long,
    }


@dataclass(frozen=True)
class PricesLoadReport:
    """What loading the price file did, row by row."""

    created: list[str]
    updated: list[str]
    unchanged: list[str]
    kept: list[str]
    """Rows edited in the admin, left as staff set them although the file differs."""


def load_entries(model_price: Any, entries: list[PriceEntry]) -> PricesLoadReport:
    """Write the entries into the table (ModelPrice, or the migration's historical model): new rows are
    created, changed ones updated, and rows edited in the admin are kept as they are."""
    report = PricesLoadReport([], [], [], [])
    columns = {f.name for f in model_price._meta.get_fields()}  # a migration's model may predate a column
    with transaction.atomic():
        for entry in entries:
            name = f"{entry.vendor}/{entry.model} from {entry.effective_from}"
            values = {column: value for column, value in row_values(entry).items() if column in columns}
            row = model_price.objects.filter(
                vendor=entry.vendor, model=entry.model, effective_from=entry.effective_from
            ).first()
            if row is None:
                model_price.objects.create(
                    vendor=entry.vendor, model=entry.model, effective_from=entry.effective_from, **values
                )
                report.created.append(name)
            elif all(getattr(row, field) == value for field, value in values.items()):
                report.unchanged.append(name)
            elif row.edited_in_admin:
                report.kept.append(name)
            else:
                for field, value in values.items():
                    setattr(row, field, value)
                row.save()
                report.updated.append(name)
    prices_changed()
    return report


# The table, read once and kept for PRICE_CACHE_SECONDS: estimate_cost runs on every LLM call. Today's price
# per model is remembered with it (so "today" is the date the table was read, at most that long ago).
_cache: dict[str, tuple[Price, ...]] | None = None
_expires_at = 0.0
_today = dt.date.min
_memo: dict[str, "Price | None"] = {}
_cache_lock = threading.Lock()
_warned = False
# A read that failed (the database away, or no connection free in the pool within its timeout) is tried
# again this many seconds later; until then the last table read, if any, is used. Otherwise every LLM call
# of an outage would wait out the pool's timeout.
READ_RETRY_SECONDS = 5.0
_retry_at = 0.0


def prices_changed(**_: Any) -> None:
    """Forget the cached table, so the next price read sees the rows as they are now."""
    global _cache, _expires_at, _retry_at
    _cache, _expires_at, _retry_at = None, 0.0, 0.0


@receiver(post_save, sender="evaluation.ModelPrice", dispatch_uid="prices-saved")
@receiver(post_delete, sender="evaluation.ModelPrice", dispatch_uid="prices-deleted")
def _row_changed(**_: Any) -> None:
    prices_changed()


@receiver(post_migrate, dispatch_uid="prices-migrated")
def _migrated(**_: Any) -> None:
    # migrate and flush (a test database emptied) both end with post_migrate.
    prices_changed()


@receiver(setting_changed, dispatch_uid="prices-settings")
def _settings_changed(setting: str = "", **_: Any) -> None:
    if setting == "EVALUATION":
        prices_changed()


def _query() -> dict[str, tuple[Price, ...]]:
    from evaluation.models import ModelPrice

    by_model: dict[str, list[Price]] = {}
    for row in ModelPrice.objects.order_by("model", "-effective_from", "vendor"):
        by_model.setdefault(row.model, []).append(
            Price(
                vendor=row.vendor,
                model=row.model,
                effective_from=row.effective_from,
                input=float(row.input_per_mtok),
                output=float(row.output_per_mtok),
                cached_input=float(row.cached_input_per_mtok),
                cache_write=float(row.cache_write_per_mtok),
                batch_discount=float(row.batch_discount),
                source=row.source,
                cache_write_long=None
                if row.cache_write_long_per_mtok is None
                else float(row.cache_write_long_per_mtok),
            )
        )
    return {model: tuple(rows) for model, rows in by_model.items()}


def _query_in_thread() -> dict[str, tuple[Price, ...]]:
    try:
        return _query()
    finally:
        connection.close()


def _read_table() -> dict[str, tuple[Price, ...]] | None:
    """The table's rows by model, newest first; None when this process cannot read the database (before
    migrate, or a process given no database)."""
    global _warned
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            try:
                return _query()
            finally:
                release_helper_thread_connection()  # prices are read from the judge's worker threads too
        # From inside an event loop (the offline provider answers there), Django refuses queries: read in a thread.
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(_query_in_thread).result()
    except (DatabaseError, RuntimeError) as exc:
        if not _warned:
            log.warning("price table not readable (%s): calls are not priced", exc)
            _warned = True
        return None


def _fresh() -> dict[str, tuple[Price, ...]] | None:
    """The table to use without reading: the cached one while it is fresh, or the last one (else none)
    while a failed read waits to be tried again; None when it is time to read."""
    now = time.monotonic()
    if _cache is not None and now < _expires_at:
        return _cache
    if now < _retry_at:
        return _cache or {}
    return None


def _table() -> dict[str, tuple[Price, ...]]:
    global _cache, _expires_at, _today, _memo, _retry_at
    table = _fresh()
    if table is not None:
        return table
    with _cache_lock:
        table = _fresh()  # another thread may have read it while this one waited for the lock
        if table is not None:
            return table
        read = _read_table()
        if read is None:
            _retry_at = time.monotonic() + READ_RETRY_SECONDS
            return _cache or {}
        _cache, _memo, _today = read, {}, dt.datetime.now(dt.UTC).date()
        _expires_at = time.monotonic() + setting("PRICE_CACHE_SECONDS")
        return read


def base_name(model: str) -> str:
    """The name a model is priced under: a dated snapshot's base name, else the name itself."""
    dated = _DATED.match(model)
    return dated.group("base") if dated else model


def price_for(model: str, on: dt.date | None = None) -> Price | None:
    """The price in force for model on a date (today by default), or None: no row for the model (nor for
    its base name), or none in force yet on that date."""
    table = _table()
    if on is None and table is _cache and model in _memo:
        return _memo[model]
    rows = table.get(model) or table.get(base_name(model)) or ()
    day = on or _today
    found = next((row for row in rows if row.effective_from <= day), None)
    if on is None and table is _cache:
        _memo[model] = found
    return found


def prices_load(*, path: Path | None = None) -> PricesLoadReport:
    """Load a price file (the shipped one by default) into the price table; see load_entries."""
    from evaluation.models import ModelPrice

    return load_entries(ModelPrice, read_price_file(path))
