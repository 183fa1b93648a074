"""Small template helpers for the dashboard, and the one way every page names an id for people."""

from typing import Any

from django import template

from evaluation.text.labels import label

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
def rate_band(value: Any) -> str:
    """The colour class of a rate from 0 to 1 (a suite's pass rate), on the scores' bands: 1.0 is s10, 0.5 s5."""
    try:
        return score_band(float(value) * 10)
    except (TypeError, ValueError):
        return ""


@register.filter
def percent(value: Any) -> str:
    """A rate from 0 to 1 as a whole percentage ("100%", "50%"), a dash when there is none."""
    try:
        return f"{float(value) * 100:.0f}%"
    except (TypeError, ValueError):
        return "–"


@register.filter
def dimension_short(name: str) -> str:
    """A judged dimension's short label (`resp`), as the CLI's table shows it."""
    from evaluation.tutoring.selectors import DIMENSIONS

    dimension = DIMENSIONS.get(name)
    return dimension.short if dimension else name[:4]


@register.filter(name="label")
def label_filter(value: Any) -> str:
    return label(value)


@register.filter
def status_detail(run: Any) -> str:
    """What an active run's status line adds to its status: its detail ("Turn 5/20"), else its stage when that
    says more than the status ("Evaluating"); nothing that repeats the status ("Queued · queued")."""
    detail = (run.detail or "").strip()
    if not detail and run.stage != run.status:
        detail = run.get_stage_display()
    return "" if detail.lower() == str(run.status).lower() else detail


@register.filter
def plumbing_note(label: Any) -> str:
    """The warning shown beside scores whose judge (its label or configuration key) is a plumbing-only model."""
    from evaluation.providers.compat import plumbing_only

    return plumbing_only(str(label or ""))
