"""The dashboard's query parameters, checked as the API checks its own: a value the page cannot read is
refused (400, the page shown with the reason) instead of silently ignored."""

from datetime import date

from django.http import QueryDict

from evaluation.models.runs import RunSource, RunStatus
from evaluation.tutoring.selectors import RUN_FILTERS

MAX_CHARS = {"persona": 64, "topic": 100}
"""The columns' widths of the ids the text filters name."""
CHOICES = {"source": dict(RunSource.choices), "status": dict(RunStatus.choices)}
MAX_RUN_IDS = 100
RUN_ID_MAX_CHARS = 120


def run_filters(query: QueryDict, *, paged: bool = True) -> tuple[dict[str, str], list[str]]:
    """The run list's filters (every key of RUN_FILTERS, "" where blank), and a problem for each parameter
    that is not readable: a date that is not YYYY-MM-DD, date_from after date_to, an unknown source or status,
    an id wider than its column, a page that is not a whole number from 1, a parameter sent twice."""
    filters = {key: query.get(key, "").strip() for key in RUN_FILTERS}
    problems = [
        f"{key}: given {len(query.getlist(key))} times; send it once" for key in query if len(query.getlist(key)) > 1
    ]
    dates: dict[str, date] = {}
    for key in ("date_from", "date_to"):
        if filters[key]:
            try:
                dates[key] = date.fromisoformat(filters[key])
            except ValueError:
                problems.append(f"{key}: {filters[key][:40]!r} is not a date (YYYY-MM-DD)")
    if len(dates) == 2 and dates["date_from"] > dates["date_to"]:
        problems.append(f"date_to: {dates['date_to']} is before date_from ({dates['date_from']})")
    for key, choices in CHOICES.items():
        if filters[key] and filters[key] not in choices:
            problems.append(f"{key}: {filters[key][:40]!r} is not one of {', '.join(choices)}")
    for key, most in MAX_CHARS.items():
        if len(filters[key]) > most:
            problems.append(f"{key}: is {len(filters[key])} characters: an id has at most {most}")
    page = query.get("page", "")
    if paged and page and not (page.isascii() and page.isdigit() and 1 <= int(page[:12]) and len(page) <= 9):
        problems.append(f"page: {page[:40]!r} is not a page number (1 or more)")
    return filters, problems


def run_ids(query: QueryDict) -> tuple[list[str], list[str]]:
    """The `ids` of the live status poll (comma-separated run ids), and a problem if there are too many or
    one is wider than a run id."""
    ids = [i for i in query.get("ids", "").split(",") if i]
    if len(ids) > MAX_RUN_IDS:
        return [], [f"ids: {len(ids)} run ids: at most {MAX_RUN_IDS}"]
    wide = next((i for i in ids if len(i) > RUN_ID_MAX_CHARS), None)
    if wide is not None:
        return [], [f"ids: {wide[:40]!r}... is {len(wide)} characters: a run id has at most {RUN_ID_MAX_CHARS}"]
    return ids, []
