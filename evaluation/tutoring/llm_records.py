"""What a run records about each model it used: resolved provider and model, settings and seed."""

from typing import Any

from evaluation.providers import LLM, Usage
from evaluation.providers.registry import settings_for

RECORD_KEYS = ("provider", "model", "source", "temperature", "seed", "seed_sent")


def llm_record(llm: LLM, seed: int | None) -> dict[str, Any]:
    """Which model played a role and how: the resolved provider and model, where that choice came from
    (override, database, environment, default), the temperature, and the seed its calls derive from
    (`seed_sent`: whether the vendor takes a seed at all)."""
    settings = settings_for(llm.role, llm.spec)
    return {
        "provider": llm.provider.name,
        "model": llm.provider.model,
        "source": llm.spec.source,
        "temperature": settings.temperature,
        "seed": seed,
        "seed_sent": llm.provider.takes_seed,
    }


def usage_of(record: dict[str, Any]) -> Usage:
    """The token usage a record carries (a session's tutor record does), zero when none."""
    usage = record.get("usage")
    stored: dict[str, Any] = usage if isinstance(usage, dict) else {}
    return Usage.from_dict(stored)


def add_usage(record: dict[str, Any], usage: Usage) -> dict[str, Any]:
    """The record with this call's usage added to its running total."""
    return {**record, "usage": (usage_of(record) + usage).as_dict()}
