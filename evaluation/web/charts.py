"""Server-rendered SVG charts (no JavaScript library, no CDN)."""

from datetime import datetime, timedelta
from html import escape

TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800]
"""Seconds between a time axis's ticks, the shortest that keeps them apart is used (1 s ... 1 week)."""
VALUE_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000]


def fit(text: str, chars: int) -> str:
    """The text if it has at most `chars` characters, else cut at the last word boundary before them, with an
    ellipsis (never mid-word; a single word too long is cut with the ellipsis after it)."""
    if len(text) <= chars:
        return text
    head = text[: chars - 1]
    cut = head.rsplit(" ", 1)[0] if " " in head else head
    return cut.rstrip(" ,;:(-") + "\u2026"


def svg_label(text: str, chars: int, attributes: str) -> str:
    """An SVG <text> of `text` fitted to `chars` characters; a shortened one carries the full text in a <title>
    (shown on hover and read by screen readers)."""
    shown = fit(text, chars)
    title = f"<title>{escape(text)}</title>" if shown != text else ""
    return f"<text {attributes}>{title}{escape(shown)}</text>"


def value_step(scale: float, most: int = 6) -> int:
    """The step of a value axis from 0 to scale: the smallest round step giving at most `most` intervals
    (0-10: 2; 0-9: 3; 0-56: 10), so the labels stay readable."""
    if scale <= 5:
        return 1
    if int(scale) % 3 == 0 and scale <= 9:
        return 3
    return next((s for s in VALUE_STEPS if scale / s <= most), VALUE_STEPS[-1])


def time_ticks(first: datetime, last: datetime, most: int) -> list[tuple[datetime, str]]:
    """Round moments between first and last for a time axis, at most `most`, each with its label: seconds
    shown when the step is under a minute, the date on the first tick and wherever the day changes, dates
    alone for steps of a day or more."""
    total = (last - first).total_seconds()
    step = next((s for s in TIME_STEPS if total / s <= max(1, most - 1)), TIME_STEPS[-1])
    if step < 86400:
        start = first.replace(microsecond=0)
        into_day = start.hour * 3600 + start.minute * 60 + start.second
        tick = start - timedelta(seconds=into_day % step)
    else:
        tick = first.replace(hour=0, minute=0, second=0, microsecond=0)
    if tick < first:
        tick += timedelta(seconds=step)
    clock = "%H:%M:%S" if step < 60 else "%H:%M"
    out: list[tuple[datetime, str]] = []
    day = None
    while tick <= last:
        if step >= 86400:
            text = tick.strftime("%m-%d")
        else:
            text = (tick.strftime("%m-%d ") if tick.date() != day else "") + tick.strftime(clock)
            day = tick.date()
        out.append((tick, text))
        tick += timedelta(seconds=step)
    return out


def _legend(names: list[str], width: int, left: int) -> tuple[int, int]:
    """The legend's column width and columns: as wide as the longest name (about 6 px a character at 10 px),
    as many columns as fit, so long names ("pacing · openai/gpt-4o") never overlap."""
    column = max(150, 22 + 6 * max((len(n) for n in names), default=0))
    return column, max(1, (width - left) // column)


PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


def grouped_bars(
    series: dict[str, dict[str, float]],
    dimensions: list[str],
    *,
    scale: float = 10.0,
    label: str = "Scores by dimension and persona",
) -> str:
    """One group of bars per dimension, one bar per series (persona, tutor version); values 0..scale."""
    names = list(series)
    bar_w, gap, left, top, height = 10 if len(dimensions) > 1 else 24, 18, 34, 12, 180
    group_w = max(130, max(1, len(names)) * bar_w + gap)
    width = max(left + group_w * len(dimensions) + 10, left + 4 * 150)
    column, columns = _legend(names, width, left)
    legend_rows = (len(names) + columns - 1) // columns
    full_height = height + 40 + 14 * legend_rows
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{full_height}" '
        f'viewBox="0 0 {width} {full_height}" role="img" aria-label="{escape(label)}">'
    ]
    for tick in range(0, int(scale) + 1, value_step(scale)):
        y = top + height - tick / scale * height
        parts.append(
            f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/><text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick}</text>'
        )
    for d_index, dim in enumerate(dimensions):
        x0 = left + d_index * group_w + (group_w - len(names) * bar_w) / 2
        for s_index, name in enumerate(names):
            value = series[name].get(dim)
            if value is None:
                continue
            h = value / scale * height
            parts.append(
                f'<rect x="{x0 + s_index * bar_w:.1f}" y="{top + height - h:.1f}" width="{bar_w - 1}" height="{h:.1f}" fill="{PALETTE[s_index % len(PALETTE)]}">'
                f"<title>{escape(name)} / {escape(dim)}: {value:g}</title></rect>"
            )
        label = escape(dim.replace("_", " "))
        parts.append(
            f'<text x="{x0 + len(names) * bar_w / 2:.1f}" y="{top + height + 14}" font-size="10" text-anchor="middle">{label}</text>'
        )
    for s_index, name in enumerate(names):
        x = left + (s_index % columns) * column
        y = top + height + 32 + (s_index // columns) * 14
        parts.append(
            f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{PALETTE[s_index % len(PALETTE)]}"/><text x="{x + 14}" y="{y}" font-size="10">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def lines(
    series: dict[str, list[float | None]],
    labels: list[str],
    *,
    scale: float = 9.0,
    label: str = "Scores over time",
    times: list[datetime] | None = None,
) -> str:
    """One line per series over the runs or time buckets, values 0..scale.

    With `times` (one per label) the x axis is a time axis: points sit at their time, so 23:24, 23:48
    and 23:50 are not evenly spaced, and the axis is marked at round moments (every 2 s for runs 10 s
    apart, every hour over a day, ...) labelled to that precision; each point's own label is in its
    tooltip. One period only (one run, one week) draws bars: a line needs two points.
    """
    if len(labels) == 1:
        one = {name: {labels[0]: values[0]} for name, values in series.items() if values and values[0] is not None}
        return grouped_bars(one, labels, scale=scale, label=label)
    left, top, height, step = 30, 10, 160, 70
    span_px = max(step * max(1, len(labels) - 1), 4 * 150 - 20)
    width = left + span_px + 40
    ticks: list[tuple[float, str]] = []
    if times is not None and len(times) == len(labels) and len(labels) > 1 and times[-1] > times[0]:
        t0, total = times[0], (times[-1] - times[0]).total_seconds()
        xs = [left + (t - t0).total_seconds() / total * span_px for t in times]
        ticks = [
            (left + (t - t0).total_seconds() / total * span_px, text)
            for t, text in time_ticks(times[0], times[-1], max(2, span_px // 90))
        ]
    else:
        xs = [left + i * span_px / max(1, len(labels) - 1) for i in range(len(labels))]
    column, columns = _legend(list(series), width, left)
    full_height = height + 50 + 14 * ((len(series) + columns - 1) // columns)  # the legend under the axis
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{full_height}" viewBox="0 0 {width} {full_height}" role="img" aria-label="{escape(label)}">'
    ]
    for tick in range(0, int(scale) + 1, value_step(scale)):
        y = top + height - tick / scale * height
        parts.append(
            f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/><text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick}</text>'
        )
    for index, (name, values) in enumerate(series.items()):
        colour = PALETTE[index % len(PALETTE)]
        points = [
            (xs[i], top + height - v / scale * height, labels[i], v) for i, v in enumerate(values) if v is not None
        ]
        if len(points) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)}"/>'
            )
        parts += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"><title>{escape(name)}, {escape(when)}: {v:g}</title></circle>'
            for x, y, when, v in points
        ]
        lx, ly = left + (index % columns) * column, height + 44 + (index // columns) * 14
        parts.append(
            f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{colour}"/><text x="{lx + 14}" y="{ly}" font-size="10">{escape(name)}</text>'
        )
    shown = -1e9
    for x, text in ticks or list(zip(xs, labels, strict=True)):
        parts.append(
            f'<line class="x-tick" x1="{x:.1f}" x2="{x:.1f}" y1="{top + height}" y2="{top + height + 4}" stroke="#999"/>'
        )
        if ticks or x - shown >= 8 * len(text) * 0.6 + 8:
            parts.append(
                f'<text class="x-label" x="{x:.1f}" y="{top + height + 16}" font-size="9" text-anchor="middle">{escape(text)}</text>'
            )
            shown = x
    parts.append("</svg>")
    return "".join(parts)


LEVEL_CHARS = 24
"""A confusion matrix's level names are shortened past this many characters (about 140 px at 10 px)."""


def confusion_matrix(levels: list[str], counts: list[list[int]], *, label: str = "") -> str:
    """A k x k grid: rows the people's level, columns the judge's (both worst first); darker is more items.
    A level's name longer than LEVEL_CHARS is shortened at a word boundary, the full name in its <title>."""
    k = len(levels)
    cell, left, top = 34, 150, 100
    most = max((c for row in counts for c in row), default=0) or 1
    longest = max((len(fit(level, LEVEL_CHARS)) for level in levels), default=0)
    # the column labels lean right at 45 degrees: room for the last one's run past the grid
    width = left + k * cell + max(10, int(longest * 6 * 0.71) - cell // 2)
    height = top + k * cell + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart confusion" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="Confusion matrix {escape(label)}: people (rows) by judge (columns)">'
    ]
    for j, level in enumerate(levels):
        x = left + j * cell + cell / 2
        parts.append(
            svg_label(
                level,
                LEVEL_CHARS,
                f'x="{x:.1f}" y="{top - 6}" font-size="10" text-anchor="start" transform="rotate(-45 {x:.1f} {top - 6})"',
            )
        )
    for i, level in enumerate(levels):
        y = top + i * cell
        parts.append(
            svg_label(level, LEVEL_CHARS, f'x="{left - 6}" y="{y + cell / 2 + 4:.1f}" font-size="10" text-anchor="end"')
        )
        for j in range(k):
            count = counts[i][j]
            shade = 0.08 + 0.85 * count / most if count else 0.0
            fill = f"rgba(78,121,167,{shade:.2f})" if count else "#f6f6f6"
            stroke = "#333" if i == j else "#ddd"
            parts.append(
                f'<rect x="{left + j * cell}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}" stroke="{stroke}">'
                f"<title>people {escape(level)}, judge {escape(levels[j])}: {count}</title></rect>"
                f'<text x="{left + j * cell + cell / 2 - 1:.1f}" y="{y + cell / 2 + 3:.1f}" font-size="10" text-anchor="middle" '
                f'class="cell" fill="{"#fff" if shade > 0.55 else "#222"}">{count}</text>'
            )
    parts.append(
        f'<text x="{left + k * cell / 2:.1f}" y="{height - 4}" font-size="10" text-anchor="middle">judge &#8594; (rows: people)</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
