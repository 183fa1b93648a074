"""Small template helpers for the dashboard."""

from typing import Any

from django import template

register = template.Library()


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def score(value: Any) -> str:
    """Every score on the dashboard in one format: one decimal ("7.0", "6.4"), a dash when there is none."""
    if value is None or value == "":
        return "–"
    try:
        return f"{float(value):.1f}"
    except (TypeError, ValueError):
        return "–"


@register.filter
def score_band(value: Any) -> str:
    """The colour class of a score (s1 .. s10), from the rounded value."""
    try:
        return f"s{min(10, max(1, round(float(value))))}"
    except (TypeError, ValueError):
        return ""


@register.filter
def dimension_short(name: str) -> str:
    """A judged dimension's short label (`resp`), as the CLI's table shows it."""
    from evaluation.tutoring.selectors import DIMENSIONS

    dimension = DIMENSIONS.get(name)
    return dimension.short if dimension else name[:4]
