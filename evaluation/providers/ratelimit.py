"""Rate limits shared across workers: one budget per (API key, base URL, model), learnt from the vendors'
rate-limit headers and kept in Redis when REDIS_URL is set, else in the database.

Before a call, a request and the call's estimated prompt tokens are taken from the budget; when it is
empty the caller sleeps until the vendor's window resets (at most the call's timeout) instead of
sending a request that would come back 429. A Retry-After pauses the whole budget, every worker's
calls, for that long. A budget nobody has seen headers for is unlimited: a process consults the shared
store only once an answer (or a Retry-After) has shown it that the server limits this key, so a local
server without headers, and the offline provider, cost nothing.

The headers read: OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens} (reset as "1s",
"6m0s"), Anthropic's anthropic-ratelimit-{requests,input-tokens,tokens}-{limit,remaining,reset} (reset
as an RFC 3339 time). A header's remaining count is taken less the calls this budget has in flight,
which the server had not counted yet when it answered.
"""

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from evaluation.providers.base import Message
from evaluation.providers.threads import release_helper_thread_connection

T = TypeVar("T")
State = dict[str, Any]
"""A budget's stored state: {"paused_until": epoch seconds, "requests": Dim, "tokens": Dim}, where a Dim is
{"limit", "remaining", "reset_at" (epoch seconds or None), "in_flight", "epoch" (refills so far)}."""

POLL_SECONDS = 0.25
"""How long a caller waits before asking again when the budget is empty and its reset time is unknown."""
SAME_WINDOW_SECONDS = 0.5
"""Two answers whose reset times are this close speak of the same window (a vendor's token bucket, whose
reset time moves on with every answer, is then read as a window that refills no sooner than it says)."""
STORE_TTL_SECONDS = 86_400
"""Redis forgets a budget unused for a day."""
VENDOR_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


# --- reading headers --------------------------------------------------------------------------------
def parse_duration(text: str) -> float | None:
    """Seconds from OpenAI's reset durations ("20ms", "1s", "6m0s", "1h2m3.5s"); None when unreadable."""
    parts = _DURATION.findall(text or "")
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)


def parse_time(text: str) -> float | None:
    """Epoch seconds from Anthropic's RFC 3339 reset times; None when unreadable."""
    try:
        moment = datetime.fromisoformat((text or "").strip())
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


Reading = dict[str, tuple[int, int, float]]
"""What one answer's headers say, per dimension ("requests", "tokens"): (limit, remaining, reset at)."""


def read_headers(headers: Mapping[str, str] | None, now: float) -> Reading:
    """The rate limits an answer's headers report; {} when it has none (a local server)."""
    if not headers:
        return {}
    reading: Reading = {}
    openai_names = {"requests": "requests", "tokens": "tokens"}
    for dim, name in openai_names.items():
        limit = headers.get(f"x-ratelimit-limit-{name}")
        if limit is None:
            continue
        got = _reading(limit, headers.get(f"x-ratelimit-remaining-{name}"), headers.get(f"x-ratelimit-reset-{name}"))
        if got is not None:
            limit_n, remaining_n, reset = got
            seconds = parse_duration(reset)
            if seconds is not None:
                reading[dim] = (limit_n, remaining_n, now + seconds)
    # Anthropic: the prompt-token limit is what our estimate measures; the combined one when it is all there is.
    anthropic_names = {"requests": ("requests",), "tokens": ("input-tokens", "tokens")}
    for dim, names in anthropic_names.items():
        for name in names:
            prefix = f"anthropic-ratelimit-{name}"
            limit = headers.get(f"{prefix}-limit")
            if limit is None:
                continue
            got = _reading(limit, headers.get(f"{prefix}-remaining"), headers.get(f"{prefix}-reset"))
            if got is not None:
                at = parse_time(got[2])
                if at is not None:
                    reading[dim] = (got[0], got[1], at)
                    break
    return reading


def _reading(limit: str, remaining: str | None, reset: str | None) -> tuple[int, int, str] | None:
    try:
        return int(limit), int(remaining or 0), reset or ""
    except ValueError:
        return None


# --- the budget arithmetic (one implementation, whatever the store) --------------------------------
def take(state: State, now: float, needs: dict[str, int]) -> tuple[float, dict[str, int]]:
    """Take what a call needs: (0, the windows' epochs) when taken, else (seconds to wait, {})."""
    paused = float(state.get("paused_until") or 0)
    if paused > now:
        return paused - now, {}
    wait = 0.0
    for name, need in needs.items():
        dim = state.get(name)
        if not dim:
            continue
        reset_at = dim.get("reset_at")
        window_over = reset_at is not None and now >= reset_at
        # Nothing in flight and no reset time: no answer will say more, so the window is taken as new.
        stuck = reset_at is None and dim["in_flight"] <= 0 and dim["remaining"] < need
        if window_over or stuck:
            dim.update(remaining=dim["limit"], reset_at=None, in_flight=0, epoch=dim.get("epoch", 0) + 1)
        too_big_alone = need > dim["limit"] and dim["remaining"] >= dim["limit"]
        if need > dim["remaining"] and not too_big_alone:
            wait = max(wait, dim["reset_at"] - now if dim["reset_at"] is not None else POLL_SECONDS)
    if wait > 0:
        return wait, {}
    epochs: dict[str, int] = {}
    for name, need in needs.items():
        dim = state.get(name)
        if dim:
            dim["remaining"] -= need
            dim["in_flight"] += need
            epochs[name] = dim.get("epoch", 0)
    return 0.0, epochs


def settle(state: State, now: float, took: dict[str, tuple[int, int]], reading: Reading) -> None:
    """A call is over: give back its in-flight count (taken as {dim: (need, epoch)}) and learn its headers."""
    for name, (need, epoch) in took.items():
        dim = state.get(name)
        if dim and dim.get("epoch", 0) == epoch:
            dim["in_flight"] = max(0, dim["in_flight"] - need)
    for name, (limit, remaining, reset_at) in reading.items():
        dim = state.setdefault(name, {"limit": limit, "remaining": remaining, "reset_at": None, "in_flight": 0})
        dim["limit"] = limit
        known = dim.get("reset_at")
        if reset_at <= now or (known is not None and reset_at < known - SAME_WINDOW_SECONDS):
            continue  # an answer from a window that is over, or older than the one already read
        fresh = max(0, remaining - dim["in_flight"])
        if known is not None and abs(reset_at - known) < SAME_WINDOW_SECONDS:
            # The same window: answers arrive out of order, and an earlier request's count is higher.
            dim["remaining"] = min(dim["remaining"], fresh)
            dim["reset_at"] = max(known, reset_at)
        else:
            dim["remaining"] = fresh
            dim["reset_at"] = reset_at


def pause(state: State, now: float, seconds: float) -> None:
    state["paused_until"] = max(float(state.get("paused_until") or 0), now + seconds)


# --- stores -----------------------------------------------------------------------------------------
class Store(Protocol):
    """Where budgets live: update(key, label, fn) runs fn on the key's state atomically across processes."""

    def update(self, key: str, label: str, fn: Callable[[State], T]) -> T: ...


class RedisStore:
    """A budget per Redis key, changed in a WATCH/MULTI transaction (retried when another worker wrote)."""

    def __init__(self, url: str):
        import redis

        self.client = redis.Redis.from_url(url)

    def update(self, key: str, label: str, fn: Callable[[State], T]) -> T:
        name = f"evaluation:ratelimit:{key}"

        results: list[T] = []

        def change(pipe: Any) -> None:
            raw = pipe.get(name)
            state: State = json.loads(raw) if raw else {}
            results[:] = [fn(state)]  # run again from a fresh read when another worker wrote first
            pipe.multi()
            pipe.set(name, json.dumps(state), ex=STORE_TTL_SECONDS)

        self.client.transaction(change, name)
        return results[0]


class MemoryStore:
    """This process's budgets only: where no database can be reached (pytest items of EVAL.md suites)."""

    def __init__(self) -> None:
        self.states: dict[str, State] = {}
        self.lock = threading.Lock()

    def update(self, key: str, label: str, fn: Callable[[State], T]) -> T:
        with self.lock:
            return fn(self.states.setdefault(key, {}))


_MEMORY = MemoryStore()


class DatabaseStore:
    """A budget per row of RateLimitBudget, changed under its row lock (SQLite: the write lock a
    transaction takes when it begins)."""

    def update(self, key: str, label: str, fn: Callable[[State], T]) -> T:
        from django.db import DatabaseError, IntegrityError, transaction

        from evaluation.models import RateLimitBudget

        try:
            with transaction.atomic():
                row = RateLimitBudget.objects.select_for_update().filter(key=key).first()
                if row is None:
                    try:
                        with transaction.atomic():
                            row = RateLimitBudget.objects.create(key=key, label=label[:300], state={})
                    except IntegrityError:  # another worker made it first
                        row = RateLimitBudget.objects.select_for_update().get(key=key)
                state = dict(row.state or {})
                result = fn(state)
                RateLimitBudget.objects.filter(pk=row.pk).update(state=state)
            return result
        except (DatabaseError, RuntimeError) as exc:  # RuntimeError: no database access allowed here
            if isinstance(exc, IntegrityError):
                raise
            return _MEMORY.update(key, label, fn)
        finally:
            release_helper_thread_connection()


_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def store() -> Store:
    """Redis when settings.REDIS_URL is set (the scale-out deployment), else the database."""
    from django.conf import settings

    url = getattr(settings, "REDIS_URL", "") or ""
    with _STORES_LOCK:
        if url not in _STORES:
            _STORES[url] = RedisStore(url) if url else DatabaseStore()
        return _STORES[url]


# --- the budget a caller holds ----------------------------------------------------------------------
@dataclass
class Ticket:
    """What one call took from its budget."""

    took: dict[str, tuple[int, int]] = field(default_factory=dict)


class Budget:
    """One (key, base URL, model)'s shared budget, as this process sees it."""

    def __init__(self, key: str, label: str):
        self.key = key
        self.label = label
        self.active = False
        """Whether this process has seen the server limit this budget (headers or a Retry-After); until
        then calls go out without consulting the store."""

    def acquire(self, needs: dict[str, int], timeout: float) -> Ticket:
        """Take a request and its tokens, sleeping while the budget is empty (at most `timeout` seconds,
        after which the call goes out anyway and the server decides)."""
        deadline = time.monotonic() + timeout
        while True:
            wait, epochs = store().update(self.key, self.label, lambda state: take(state, time.time(), needs))
            if wait <= 0:
                return Ticket({name: (needs[name], epoch) for name, epoch in epochs.items()})
            left = deadline - time.monotonic()
            if left <= 0:
                return Ticket()
            time.sleep(min(wait, left))

    def settle(self, ticket: Ticket | None, headers: Mapping[str, str] | None) -> None:
        """After a call (answered or failed): give back what is in flight and learn the headers."""
        now = time.time()
        reading = read_headers(headers, now) if headers is not None else {}
        if not reading and not (ticket and ticket.took):
            return
        self.active = True
        store().update(self.key, self.label, lambda state: settle(state, now, ticket.took if ticket else {}, reading))

    def pause(self, seconds: float) -> None:
        """The server said Retry-After: every worker's calls on this budget wait that long."""
        if seconds <= 0:
            return
        self.active = True
        now = time.time()
        store().update(self.key, self.label, lambda state: pause(state, now, seconds))


_BUDGETS: dict[str, Budget] = {}
_BUDGETS_LOCK = threading.Lock()


def budget_for(vendor: str, base_url: str, model: str, api_key: str | None) -> Budget:
    """The process's handle on a shared budget; the key is a hash (the API key itself is never stored)."""
    url = base_url or VENDOR_URLS.get(vendor.split("-")[0], vendor)
    fingerprint = hashlib.sha256((api_key or "").encode()).hexdigest()[:16]
    key = hashlib.sha256(json.dumps([fingerprint, url, model]).encode()).hexdigest()
    with _BUDGETS_LOCK:
        if key not in _BUDGETS:
            _BUDGETS[key] = Budget(key, f"{vendor}/{model} at {url} (key {fingerprint})")
        return _BUDGETS[key]


def estimate_tokens(messages: list[Message], schema: dict[str, Any] | None, tools: list[dict[str, Any]] | None) -> int:
    """The prompt tokens a call will be billed for, roughly (4 characters a token, the wire format's
    keys and quotes included): what its rate-limit budget is charged before the answer says more."""
    chars = sum(len(m.content) + 40 for m in messages)
    if schema is not None:
        chars += len(json.dumps(schema)) + 120
    if tools:
        chars += len(json.dumps(tools))
    return max(1, chars // 4)
