"""Judge cards (agreement of one judge configuration with people, as tables and SVG confusion matrices)
and imported transcripts with their labels. Staff only; thin: selectors in, templates out."""

from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from evaluation.errors import InvalidInput, NotFound
from evaluation.judging import selectors, services
from evaluation.web.charts import confusion_matrix
from evaluation.web.views import permission_needed

SHOWN_DISAGREEMENTS = 5


@staff_member_required
@permission_needed("evaluation.view_judgescore")
@require_GET
def judge_cards(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "evaluation/judging_index.html",
        {"rubrics": selectors.rubrics_with_configurations(), "formats": FORMATS},
    )


FORMATS = ("auto", "json", "jsonl", "text", "candidates")
SHOWN_PROBLEMS = 20


@staff_member_required
@permission_needed("evaluation.add_transcript")
@require_POST
def transcripts_upload(request: HttpRequest) -> HttpResponse:
    """The dashboard's upload: one file, through the same import as the command, the API and the admin."""
    upload = request.FILES.get("file")
    fmt = request.POST.get("format", "auto")
    rubric = request.POST.get("rubric") or None
    if upload is None:
        messages.error(request, "Choose a file to import.")
    elif fmt not in FORMATS:
        messages.error(request, f"format: {fmt[:20]!r} is not one of {', '.join(FORMATS)}")
    else:
        try:
            report = services.transcripts_import(
                upload.read(services.import_limit() + 1), format=fmt, rubric=rubric, file=upload.name or "upload"
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
            messages.success(request, f"Imported {report}")
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
                    confusion_matrix(levels, [list(r) for r in row.judge_vs_humans.confusion], label=row.dimension)
                ),  # noqa: S308 - built by charts, every text escaped
                "disagreements": [
                    {"item": items[i], "judge": levels[j], "people": levels[int(h)]}
                    for i, j, h in row.disagreements[:SHOWN_DISAGREEMENTS]
                    if i in items
                ],
            }
        )
    return render(
        request,
        "evaluation/judge_card.html",
        {
            "configuration": configuration,
            "table": table,
            "rows": rows,
            "others": [c for c in selectors.configurations(table.rubric) if c.pk != configuration.pk],
            "versions": selectors.rubric_versions(configuration.rubric),
            "offline": configuration.provider.startswith("offline/"),
        },
    )


@staff_member_required
@permission_needed("evaluation.view_transcript")
@require_GET
def transcript(request: HttpRequest, transcript_id: int) -> HttpResponse:
    found = selectors.transcript_get(transcript_id)
    if found is None:
        raise Http404("no such transcript")
    return render(
        request, "evaluation/transcript.html", {"transcript": found, "items": selectors.transcript_items(found)}
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
