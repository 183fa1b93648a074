"""Runs as CSV, streamed row by row: one column per field of the export shape, one per score dimension."""

import csv
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from evaluation.api.serializers import RunExportOutput
from evaluation.runs.selectors import RunExport

DEFAULT_EXPORT_MAX_ROWS = 10_000


def export_max_rows() -> int:
    """settings.EVALUATION["EXPORT_MAX_ROWS"], else 10000: the most runs one export may hold."""
    value: Any = settings.EVALUATION.get("EXPORT_MAX_ROWS", DEFAULT_EXPORT_MAX_ROWS)
    return int(value)


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can feed a streaming response."""

    def write(self, value: str) -> str:
        return value


SCALARS = [name for name, field in RunExportOutput().fields.items() if name not in ("scores", "problems")]


def _problems_cell(problems: list[dict[str, Any]]) -> str:
    return " | ".join(f"[{p['severity']}] {p['title']} ({p['root_cause']})" for p in problems)


def _cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (judge-written titles can start with '=') is quoted."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(("=", "+", "-", "@", "\t", "\r")):
        return "'" + value
    return value


def runs_csv_stream(export: RunExport) -> Iterator[str]:
    """The header, then one line per run (read from the database in chunks)."""
    writer = csv.writer(_Echo())
    yield writer.writerow([*SCALARS, *(f"score:{d}" for d in export.dimensions), "problem_count", "problems"])
    for run in export.runs.iterator(chunk_size=500):
        row = RunExportOutput(run).data
        scores = row["scores"]
        yield writer.writerow(
            [
                *(_cell(row[name]) for name in SCALARS),
                *(scores.get(d, "") for d in export.dimensions),
                len(row["problems"]),
                _cell(_problems_cell(row["problems"])),
            ]
        )
