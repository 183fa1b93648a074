"""Token usage and cost: a Meter sums the calls of one run and stops it at its cost limit."""

import threading
from collections.abc import Callable

from evaluation.providers.base import CostLimitReached, Usage
from evaluation.providers.pricing import FREE_PROVIDERS, price_for
from evaluation.providers.threads import release_helper_thread_connection


def estimate_cost(model: str, usage: Usage, *, batch: bool = False) -> float:
    """USD for one call's usage at the price in force today (the price table, see pricing.price_for):
    uncached input, cached-read input, cache-write input and output each at their price, less the
    vendor's batch discount when batch; 0 for a model with no price (pages then say so, see unpriced)."""
    price = price_for(model)
    return 0.0 if price is None else price.cost(usage, batch=batch)


def unpriced(model: str, provider: str = "") -> bool:
    """Whether a call to model costs money the table cannot price (offline and replay calls cost nothing)."""
    return bool(model) and provider not in FREE_PROVIDERS and price_for(model) is None


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
        self.unpriced: set[str] = set()
        """Models called that the price table does not price: their calls count 0 toward the cost and the limit."""
        self._lock = threading.Lock()

    def restore(self, saved: dict, cost_usd: float) -> "Meter":
        """Continue from totals stored earlier (as_dict's shape), e.g. when a run is re-evaluated."""
        self.usage = Usage.from_dict(saved)
        self.by_role = {role: Usage.from_dict(u) for role, u in (saved.get("by_role") or {}).items()}
        self.by_provider = {name: int(n) for name, n in (saved.get("by_provider") or {}).items()}
        self.unpriced = {str(m) for m in saved.get("unpriced") or ()}
        self.cost_usd = float(cost_usd or 0.0)
        return self

    def check(self) -> None:
        if self.limit_usd is not None and self.cost_usd >= self.limit_usd:
            raise CostLimitReached(f"cost limit reached: ${self.cost_usd:.4f} spent of a ${self.limit_usd:.4f} limit")

    def add(self, role: str, usage: Usage, cost_usd: float, provider: str = "", *, model: str = "") -> None:
        """Count one call; model (when given) notes a model with no price, so its 0 is not shown as free."""
        missing = not cost_usd and unpriced(model, provider)
        with self._lock:
            if missing:
                self.unpriced.add(model)
            self.usage = self.usage + usage
            self.by_role[role] = self.by_role.get(role, Usage()) + usage
            if provider:
                self.by_provider[provider] = self.by_provider.get(provider, 0) + usage.calls
            self.cost_usd += cost_usd
        if self.on_change:
            try:
                self.on_change(self)
            finally:
                release_helper_thread_connection()

    def as_dict(self) -> dict:
        return {
            **self.usage.as_dict(),
            "by_role": {r: u.as_dict() for r, u in self.by_role.items()},
            "by_provider": dict(self.by_provider),
            **({"unpriced": sorted(self.unpriced)} if self.unpriced else {}),
        }
