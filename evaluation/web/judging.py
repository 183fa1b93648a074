"""Judge cards (agreement of one judge configuration with people, as tables and SVG confusion matrices)
and imported transcripts with their labels. Staff only; thin: selectors in, templates out."""

from dataclasses import replace
from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors, services
from evaluation.templatetags.evaluation_extras import label
from evaluation.web.charts import confusion_matrix, svg_label, value_step
from evaluation.web.views import _page, permission_needed

SHOWN_DISAGREEMENTS = 5


@staff_member_required
@permission_needed("evaluation.view_judgescore")
@require_GET
def judge_cards(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        "evaluation/judging_index.html",
        {"title": "Judge cards", "rubrics": selectors.rubrics_with_configurations(), "formats": FORMATS},
    )


FORMATS = ("auto", "json", "jsonl", "text", "candidates", "bridge")
SHOWN_PROBLEMS = 20


@staff_member_required
@permission_needed("evaluation.add_transcript")
@require_http_methods(["GET", "POST"])
def transcripts_upload(request: HttpRequest) -> HttpResponse:
    """The dashboard's upload: one file, through the same import as the command, the API and the admin. Its
    form is on the judge cards page: a GET (a bookmarked or retyped address) is sent there."""
    if request.method == "GET":
        return redirect("evaluation-judging")
    upload = request.FILES.get("file")
    label_map = request.FILES.get("map_labels")
    fmt = request.POST.get("format", "auto")
    rubric = request.POST.get("rubric") or None
    if upload is None:
        messages.error(request, "Choose a file to import.")
    elif fmt not in FORMATS:
        messages.error(request, f"format: {fmt[:20]!r} is not one of {', '.join(FORMATS)}")
    else:
        try:
            report = services.transcripts_import(
                upload.read(services.import_limit() + 1),
                format=fmt,
                rubric=rubric,
                file=upload.name or "upload",
                source=request.POST.get("source", ""),
                annotator=request.POST.get("annotator", ""),
                speaker_separator=request.POST.get("speaker_separator") or ":",
                transcript_separator=request.POST.get("transcript_separator") or "---",
                label_map=label_map.read(services.import_limit() + 1) if label_map else None,
                skip_invalid=request.POST.get("skip_invalid") in ("on", "true", "1"),
            )
        except InvalidInput as exc:
            shown = [str(p) for p in exc.problems[:SHOWN_PROBLEMS]]
            more = len(exc.problems) - len(shown)
            messages.error(
                request,
                "Nothing was imported: " + "; ".join(shown) + (f"; and {more} more" if more > 0 else ""),
            )
        except NotFound as exc:
            messages.error(request, f"Nothing was imported: {exc}")
        else:
            summary, *rejected = report.lines()
            messages.success(request, summary)
            for line in rejected[:SHOWN_PROBLEMS]:
                messages.warning(request, line)
            if len(rejected) > SHOWN_PROBLEMS:
                messages.warning(request, f"... and {len(rejected) - SHOWN_PROBLEMS} more records rejected")
    return redirect("evaluation-judging")


@staff_member_required
@permission_needed("evaluation.view_judgescore")
@require_GET
def judge_card(request: HttpRequest, configuration_id: int) -> HttpResponse:
    configuration = selectors.configuration_get(configuration_id)
    if configuration is None:
        raise Http404("no such judge configuration")
    table = selectors.agreement_table(configuration)
    ids = [i for row in table.rows for i, _, _ in row.disagreements[:SHOWN_DISAGREEMENTS]]
    items = selectors.items_get(ids)
    rows: list[dict[str, Any]] = []
    scales = dict(table.scales)
    for row in table.rows:
        levels = list(row.levels)
        rows.append(
            {
                "row": row,
                "scale": scales.get(row.dimension, ""),
                "matrix": mark_safe(
                    confusion_matrix(
                        levels, [list(r) for r in row.judge_vs_humans.confusion], label=label(row.dimension)
                    )
                ),  # noqa: S308 - built by charts, every text escaped
                "disagreements": [
                    {"item": items[i], "judge": levels[j], "people": levels[int(h)]}
                    for i, j, h in row.disagreements[:SHOWN_DISAGREEMENTS]
                    if i in items
                ],
            }
        )
    return _page(
        request,
        "evaluation/judge_card.html",
        {
            "title": f"Judge card: {table.rubric} v{table.rubric_version}",
            "configuration": configuration,
            "table": table,
            "rows": rows,
            "others": [c for c in selectors.configurations(table.rubric) if c.pk != configuration.pk],
            "versions": selectors.rubric_versions(configuration.rubric),
            "offline": configuration.provider.startswith("offline/"),
            "probes": probes_in_words(selectors.bias_probes(configuration)),
            "estimates": estimates_card(configuration),
        },
    )


def estimand_words(estimand: str) -> str:
    """An estimand as the card says it: "mean" stays, "share:Yes" (the command's and the API's name) is
    "share of Yes"."""
    kind, _, level = estimand.partition(":")
    return f"share of {level}" if kind == "share" and level else estimand


def probes_in_words(table: Any) -> Any:
    """The bias probes with each method named in words (selectors.PROBE_METHODS) for the card."""
    words = selectors.PROBE_METHODS
    return replace(table, probes=tuple(replace(p, method=words.get(p.method, p.method)) for p in table.probes))


CARD_BUDGET_DRAWS = 20
"""Subsamples per label count in the card's "how many labels?" chart (the command takes 40)."""


def estimates_card(configuration: Any) -> dict[str, Any]:
    """The judge card's corrected estimates: each dimension's leading estimand (its mean, or the share of the
    scale's first label), the width of the corrected interval against the labels behind it, and what to label next."""
    table = selectors.estimate_table(configuration.rubric.slug, configuration=configuration.pk)
    lead: dict[str, Any] = {}
    for row in table.rows:
        lead.setdefault(row.dimension, row)
    budgets = selectors.estimate_budget(table, draws=CARD_BUDGET_DRAWS)
    widest = next((b for b in budgets if b.next_items), None)
    items = selectors.items_get(list(widest.next_items)) if widest else {}
    shown = [replace(b, estimand=estimand_words(b.estimand)) for b in budgets]
    return {
        "table": table,
        "rows": [replace(r, estimand=estimand_words(r.estimand)) for r in lead.values()],
        "notes": selectors.estimate_notes(lead.values()),
        "budgets": shown,
        "chart": mark_safe(width_chart(shown)),  # noqa: S308 - every text escaped
        "widest": widest and replace(widest, estimand=estimand_words(widest.estimand)),
        "next": [
            {"item": items[i], "href": _labelling_href(items[i])}
            for i in (widest.next_items if widest else ())
            if i in items
        ],
    }


def _labelling_href(item: Any) -> str:
    """Where people label this item: a run's conversation on its report's form, an imported one on its page."""
    if item.transcript.source == "run" and not item.key:
        return reverse("evaluation-run-report", args=[item.transcript.external_id]) + "#labels"
    return reverse("evaluation-transcript", args=[item.transcript_id]) + f"#item-{item.pk}"


LEGEND_COLUMNS, LEGEND_WIDTH, LEGEND_CHARS = 2, 210, 34
"""The "how many labels?" chart's legend: two columns of 210 px, a name past 34 characters shortened at a word."""


def width_chart(budgets: list[Any]) -> str:
    """The corrected interval's median width (y) against labelled items (x), one line per dimension."""
    from html import escape

    from evaluation.web.charts import PALETTE

    shown = [b for b in budgets if b.points]
    if not shown:
        return ""
    left, top, width, height = 44, 10, 420, 160
    most_x = max(p.labelled for b in shown for p in b.points)
    most_y = max(p.corrected for b in shown for p in b.points) or 1.0
    full_h = height + 54 + 14 * ((len(shown) + LEGEND_COLUMNS - 1) // LEGEND_COLUMNS)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart budget" width="{left + width + 20}" height="{full_h}" '
        f'viewBox="0 0 {left + width + 20} {full_h}" role="img" aria-label="Corrected interval width by labelled items">'
    ]
    for k in range(5):
        y = top + height - k / 4 * height
        parts.append(
            f'<line x1="{left}" x2="{left + width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{most_y * k / 4:.2f}</text>'
        )
    step = value_step(most_x)
    for tick in range(0, most_x + 1, step):
        x = left + tick / most_x * width
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + height}" y2="{top + height + 4}" stroke="#999"/>'
            f'<text class="x-tick" x="{x:.1f}" y="{top + height + 15}" font-size="10" text-anchor="middle">{tick}</text>'
        )
    parts.append(
        f'<text x="{left + width / 2}" y="{top + height + 30}" font-size="10" text-anchor="middle">labelled items</text>'
    )
    for index, b in enumerate(shown):
        colour = PALETTE[index % len(PALETTE)]
        points = [
            (left + p.labelled / most_x * width, top + height - p.corrected / most_y * height, p) for p in b.points
        ]
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
            f'points="{" ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)}"/>'
        )
        parts += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"><title>{escape(label(b.dimension))} '
            f"({escape(b.estimand)}): {p.labelled} labelled, width {p.corrected:.3f} "
            f"(people only {p.people_only:.3f})</title></circle>"
            for x, y, p in points
        ]
        lx, ly = left + (index % LEGEND_COLUMNS) * LEGEND_WIDTH, top + height + 48 + (index // LEGEND_COLUMNS) * 14
        parts.append(
            f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>'
            + svg_label(label(b.dimension), LEGEND_CHARS, f'x="{lx + 14}" y="{ly}" font-size="10"')
        )
    parts.append("</svg>")
    return "".join(parts)


@staff_member_required
@permission_needed("evaluation.view_transcript")
@require_GET
def transcript(request: HttpRequest, transcript_id: int) -> HttpResponse:
    found = selectors.transcript_get(transcript_id)
    if found is None:
        raise Http404("no such transcript")
    return _page(
        request,
        "evaluation/transcript.html",
        {"title": f"Transcript {found}", "transcript": found, "items": selectors.transcript_items(found)},
    )


@staff_member_required
@permission_needed("evaluation.add_annotation")
@require_POST
def run_labels(request: HttpRequest, run_id: str) -> HttpResponse:
    """Staff label a run's conversation on the report page; each label is the signed-in user's."""
    values = {k[6:]: request.POST.get(k, "") for k in request.POST if k.startswith("label_")}
    try:
        written = services.run_labels_set(run_id=run_id, user=request.user, values=values)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    except InvalidInput as exc:
        messages.error(request, f"Labels not saved: {exc}")
    else:
        messages.success(request, f"Saved {written} label(s) as {request.user.get_username()}.")
    return redirect(reverse("evaluation-run-report", args=[run_id]) + "#labels")
