"""Token usage and cost: a Meter sums the calls of one run and stops it at its cost limit."""

import threading
from collections.abc import Callable

from django.db import connection

from evaluation.conf import setting
from evaluation.providers.base import CostLimitReached, Usage


def estimate_cost(model: str, usage: Usage, *, batch: bool = False) -> float:
    """USD from settings.EVALUATION['PRICES'] (per million tokens); 0 for unknown or local models."""
    prices = setting("PRICES")
    price = prices.get(model)
    if price is None:
        # Dated model names ("gpt-5.2-2026-01-15") price as their base name.
        price = next((p for name, p in prices.items() if model.startswith(name)), None)
    if price is None:
        return 0.0
    per_in, per_out = price
    return (usage.input_tokens * per_in + usage.output_tokens * per_out) / 1_000_000


def _release_helper_thread_connection() -> None:
    """on_change saves the totals, often from a helper thread (an async call runs in asyncio.to_thread):
    give that thread's connection back at once (to the pool, on PostgreSQL), or it stays open, and
    counted against the pool, until the garbage collector finds it. The main thread and open
    transactions keep theirs."""
    if threading.current_thread() is threading.main_thread() or connection.in_atomic_block:
        return
    connection.close()


class Meter:
    """Thread-safe running total for one run; on_change is called after every call is added."""

    def __init__(self, *, limit_usd: float | None = None, on_change: Callable[["Meter"], None] | None = None):
        self.limit_usd = limit_usd
        self.on_change = on_change
        self.usage = Usage()
        self.cost_usd = 0.0
        self.by_role: dict[str, Usage] = {}
        self.by_provider: dict[str, int] = {}
        """Calls per provider name: a report tells a run whose every call was `offline` from one that paid."""
        self._lock = threading.Lock()

    def restore(self, saved: dict, cost_usd: float) -> "Meter":
        """Continue from totals stored earlier (as_dict's shape), e.g. when a run is re-evaluated."""
        self.usage = Usage.from_dict(saved)
        self.by_role = {role: Usage.from_dict(u) for role, u in (saved.get("by_role") or {}).items()}
        self.by_provider = {name: int(n) for name, n in (saved.get("by_provider") or {}).items()}
        self.cost_usd = float(cost_usd or 0.0)
        return self

    def check(self) -> None:
        if self.limit_usd is not None and self.cost_usd >= self.limit_usd:
            raise CostLimitReached(f"cost limit reached: ${self.cost_usd:.4f} spent of a ${self.limit_usd:.4f} limit")

    def add(self, role: str, usage: Usage, cost_usd: float, provider: str = "") -> None:
        with self._lock:
            self.usage = self.usage + usage
            self.by_role[role] = self.by_role.get(role, Usage()) + usage
            if provider:
                self.by_provider[provider] = self.by_provider.get(provider, 0) + usage.calls
            self.cost_usd += cost_usd
        if self.on_change:
            try:
                self.on_change(self)
            finally:
                _release_helper_thread_connection()

    def as_dict(self) -> dict:
        return {
            **self.usage.as_dict(),
            "by_role": {r: u.as_dict() for r, u in self.by_role.items()},
            "by_provider": dict(self.by_provider),
        }
