"""A price before the work: the calls and tokens a job will take, priced direct and by batch, with nothing sent."""

import importlib
from dataclasses import dataclass, field, replace
from typing import Any

from evaluation.providers.base import Usage
from evaluation.providers.offline import estimate_tokens
from evaluation.providers.pricing import FREE_PROVIDERS, price_for
from evaluation.providers.registry import VENDORS, ProviderSpec

__all__ = ["CallPlan", "Forecast", "ForecastLine", "estimate_tokens", "forecast", "model_of"]


@dataclass(frozen=True)
class CallPlan:
    """Calls one role will make, with their tokens in all: low with typical replies, high with every reply at
    its max_tokens (input grows with the replies a conversation carries, so it is a range too)."""

    role: str
    spec: ProviderSpec
    calls: int
    input_low: int
    input_high: int
    output_low: int
    output_high: int
    cacheable: int = 0
    """Of input_high, the tokens its cache breakpoints mark (a stable prefix per call, in all): the high
    prices them as written to the cache, at the write price (a batch's at the 1-hour write price, as batch
    lines ask for that cache), so the high stays a ceiling where writing costs more than plain input."""


@dataclass(frozen=True)
class ForecastLine:
    """One role's calls, tokens and price range (USD); None where the model has no price."""

    role: str
    provider: str
    model: str
    calls: int
    input_tokens: tuple[int, int]
    output_tokens: tuple[int, int]
    direct_usd: tuple[float, float] | None
    batch_usd: tuple[float, float] | None
    free: bool
    """The offline or replay provider: nothing is sent to a vendor, nothing is paid."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "provider": self.provider,
            "model": self.model,
            "calls": self.calls,
            "input_tokens": {"low": self.input_tokens[0], "high": self.input_tokens[1]},
            "output_tokens": {"low": self.output_tokens[0], "high": self.output_tokens[1]},
            "direct_usd": _range(self.direct_usd),
            "batch_usd": _range(self.batch_usd),
            "free": self.free,
        }


def _range(pair: tuple[float, float] | None) -> dict[str, float] | None:
    return None if pair is None else {"low": round(pair[0], 6), "high": round(pair[1], 6)}


@dataclass(frozen=True)
class Forecast:
    """What a job will take before it starts: per role and in all, direct and by batch."""

    lines: tuple[ForecastLine, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def calls(self) -> int:
        return sum(line.calls for line in self.lines)

    def _sum(self, name: str, i: int) -> int:
        return sum(getattr(line, name)[i] for line in self.lines)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Models that will be paid for but have no price: the totals leave them out."""
        return tuple(sorted({line.model for line in self.lines if line.direct_usd is None and not line.free}))

    def _cost(self, name: str, i: int) -> float:
        return sum((getattr(line, name) or (0.0, 0.0))[i] for line in self.lines)

    @property
    def direct_usd(self) -> tuple[float, float]:
        return self._cost("direct_usd", 0), self._cost("direct_usd", 1)

    @property
    def batch_usd(self) -> tuple[float, float]:
        return self._cost("batch_usd", 0), self._cost("batch_usd", 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": {"low": self._sum("input_tokens", 0), "high": self._sum("input_tokens", 1)},
            "output_tokens": {"low": self._sum("output_tokens", 0), "high": self._sum("output_tokens", 1)},
            "direct_usd": _range(self.direct_usd),
            "batch_usd": _range(self.batch_usd),
            "unpriced": list(self.unpriced),
            "roles": [line.as_dict() for line in self.lines],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        """The forecast as lines for a terminal or a page."""

        def usd(pair: tuple[float, float] | None) -> str:
            return "no price" if pair is None else f"${pair[0]:.4f}-${pair[1]:.4f}"

        out = []
        for line in self.lines:
            cost = "offline: free" if line.free else f"direct {usd(line.direct_usd)}, batch {usd(line.batch_usd)}"
            out.append(
                f"{line.role}: {line.calls:,} call{'' if line.calls == 1 else 's'} to {line.provider}/{line.model}, "
                f"{line.input_tokens[0]:,}-{line.input_tokens[1]:,} input and "
                f"{line.output_tokens[0]:,}-{line.output_tokens[1]:,} output tokens; {cost}"
            )
        total = (
            f"In all: {self.calls:,} calls, {self._sum('input_tokens', 0):,}-{self._sum('input_tokens', 1):,} input "
            f"and {self._sum('output_tokens', 0):,}-{self._sum('output_tokens', 1):,} output tokens; "
            f"direct {usd(self.direct_usd)}, by batch {usd(self.batch_usd)}"
        )
        if self.unpriced:
            total += f" (without {', '.join(self.unpriced)}: no price for model {', '.join(self.unpriced)})"
        return "\n".join([*out, total, *self.notes])


def model_of(spec: ProviderSpec) -> str:
    """The model a spec's calls go to: its own, else its vendor's default (the class is imported, not built)."""
    if spec.model:
        return spec.model
    module_name, _, class_name = VENDORS[spec.provider].provider_class.rpartition(".")
    return str(getattr(getattr(importlib.import_module(module_name), class_name), "default_model", ""))


def forecast(plans: list[CallPlan], notes: list[str] | None = None) -> Forecast:
    """Price each plan at today's prices: low is typical replies, high is every reply at its max_tokens and
    every marked prefix written to the cache. Cache reads would lower it; the forecast counts none (an upper
    bound on input's price)."""
    lines = []
    for plan in plans:
        free = plan.spec.provider in FREE_PROVIDERS
        model = model_of(plan.spec)
        price = None if free else price_for(model)
        low = Usage(input_tokens=plan.input_low, output_tokens=plan.output_low, calls=plan.calls)
        writes = min(plan.cacheable, plan.input_high)
        high = Usage(
            input_tokens=plan.input_high, output_tokens=plan.output_high, calls=plan.calls, cache_write_tokens=writes
        )
        # Batch lines ask for the 1-hour cache where the vendor offers it (Anthropic's).
        long_writes = writes if plan.spec.provider.startswith("anthropic") else 0
        high_batch = Usage(**{**high.as_dict(), "cache_write_long_tokens": long_writes})
        direct = batch = None
        if free:
            direct = batch = (0.0, 0.0)
        elif price is not None:
            direct = (price.cost(low), max(price.cost(high), price.cost(replace(high, cache_write_tokens=0))))
            batch = (
                price.cost(low, batch=True),
                max(price.cost(high_batch, batch=True), price.cost(replace(high, cache_write_tokens=0), batch=True)),
            )
        lines.append(
            ForecastLine(
                role=plan.role,
                provider=plan.spec.provider,
                model=model or "(default)",
                calls=plan.calls,
                input_tokens=(plan.input_low, plan.input_high),
                output_tokens=(plan.output_low, plan.output_high),
                direct_usd=direct,
                batch_usd=batch,
                free=free,
            )
        )
    return Forecast(tuple(lines), tuple(notes or ()))
