"""Labelling queues in the admin frame: the list, a queue's page (progress, agreement between people, the
disagreements and their adjudication, the intervals now against the start), the labelling page built for the
keyboard, exports, and "make a queue" from a judge card. Thin: services and selectors do the work."""

import csv
import io
import json
from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluation.errors import Conflict, InvalidInput, NotFound
from evaluation.judging import selectors, services
from evaluation.web.views import _page, permission_needed


def _queue(request: HttpRequest, queue_id: int) -> Any:
    try:
        return selectors.queue_get(queue_id, request.user)
    except NotFound as exc:
        raise Http404(str(exc)) from None


@staff_member_required
@permission_needed("evaluation.view_labelqueue")
@require_GET
def queues(request: HttpRequest) -> HttpResponse:
    return _page(
        request, "evaluation/queues.html", {"title": "Labelling queues", "queues": selectors.queues_for(request.user)}
    )


@staff_member_required
@permission_needed("evaluation.view_labelqueue")
@require_GET
def queue_page(request: HttpRequest, queue_id: int) -> HttpResponse:
    queue = _queue(request, queue_id)
    role = selectors.queue_role(queue, request.user)
    report = selectors.queue_report(queue)
    return _page(
        request,
        "evaluation/queue.html",
        {
            "title": f"Queue: {queue.name}",
            "queue": queue,
            "role": role,
            "report": report,
            "sees_items": role in ("owner", "adjudicator"),
            "disagreements": _disagreements(report, selectors.queue_dimensions(queue)),
            "annotator": role in ("owner", "annotator"),
        },
    )


def _disagreements(report: Any, dimensions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each disagreement as the page lays it out: per differing dimension, who gave what, the levels to settle
    on and the adjudicated value."""
    levels = {d["name"]: [x["value"] for x in d["levels"]] for d in dimensions}
    items = selectors.items_get([d.item for d in report.disagreements])
    out = []
    for d in report.disagreements:
        settled = {dim: (value, who) for dim, value, who in d.adjudicated}
        rows = [
            {
                "dimension": name,
                "labels": [(who, value) for dim, who, value in d.labels if dim == name],
                "levels": levels.get(name, []),
                "final": settled.get(name, ("", ""))[0],
                "adjudicator": settled.get(name, ("", ""))[1],
            }
            for name in d.differing
        ]
        item = items.get(d.item)
        out.append({"item": d.item, "label": d.label, "transcript": item.transcript_id if item else 0, "rows": rows})
    return out


@staff_member_required
@permission_needed("evaluation.add_annotation")
@require_http_methods(["GET", "POST"])
def queue_label(request: HttpRequest, queue_id: int) -> HttpResponse:
    """One item at a time: GET shows the item the person holds (claiming the next free one), or with ?item= one
    they labelled before ("back"); POST saves the labels (or a skip) and sends them straight to the next item."""
    queue = _queue(request, queue_id)
    here = reverse("evaluation-queue-label", args=[queue.pk])
    if request.method == "POST":
        item_id = request.POST.get("item", "")
        if not item_id.isdigit():
            messages.error(request, "item: missing")
            return redirect(here)
        values = {k[6:]: v for k, v in request.POST.items() if k.startswith("label_")}
        try:
            services.queue_submit(
                queue=queue,
                user=request.user,
                item_id=int(item_id),
                values=values,
                comment=request.POST.get("comment", ""),
                skip=request.POST.get("action") == "skip",
            )
        except InvalidInput as exc:
            messages.error(request, f"Not saved: {exc}")
            return redirect(f"{here}?item={item_id}")
        except (Conflict, NotFound) as exc:
            messages.error(request, f"Not saved: {exc}")
        return redirect(here)
    wanted = request.GET.get("item", "")
    try:
        if wanted:
            entry = selectors.queue_entry_submitted(queue, request.user, int(wanted)) if wanted.isdigit() else None
            if entry is None:
                entry = selectors.queue_held(queue, request.user)
                if entry is None or str(entry.item_id) != wanted:
                    raise Http404("you have not labelled or been given this item")
        else:
            entry = services.queue_claim(queue=queue, user=request.user)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    report = selectors.queue_progress(queue)
    mine = report.person(request.user.get_username())
    context: dict[str, Any] = {
        "title": f"Label: {queue.name}",
        "queue": queue,
        "mine": mine,
        "report": report,
        "view": None,
        "back": selectors.queue_previous(queue, request.user, int(wanted) if wanted.isdigit() else None),
    }
    if entry is not None:
        entry = queue.entries.select_related("item__transcript").get(pk=entry.pk)
        context["view"] = selectors.queue_item_view(queue, entry, request.user)
    return _page(request, "evaluation/queue_label.html", context)


@staff_member_required
@permission_needed("evaluation.add_annotation")
@require_POST
def queue_adjudicate(request: HttpRequest, queue_id: int) -> HttpResponse:
    queue = _queue(request, queue_id)
    item_id = request.POST.get("item", "")
    values = {k[6:]: v for k, v in request.POST.items() if k.startswith("final_") and v}
    try:
        written = services.queue_adjudicate(
            queue=queue, user=request.user, item_id=int(item_id) if item_id.isdigit() else 0, values=values
        )
    except NotFound as exc:
        raise Http404(str(exc)) from None
    except (InvalidInput, Conflict) as exc:
        messages.error(request, f"Not settled: {exc}")
    else:
        messages.success(request, f"Settled {written} dimension(s) of item {item_id} as {request.user.get_username()}.")
    return redirect(reverse("evaluation-queue", args=[queue.pk]) + "#disagreements")


@staff_member_required
@permission_needed("evaluation.view_labelqueue")
@require_GET
def queue_export(request: HttpRequest, queue_id: int, fmt: str) -> HttpResponse:
    """Every label of the queue (owner and adjudicators: they see every item), as CSV or JSON."""
    queue = _queue(request, queue_id)
    if fmt not in ("csv", "json"):
        raise Http404("exports are labels.csv and labels.json")
    if selectors.queue_role(queue, request.user) not in ("owner", "adjudicator"):
        raise Http404("the export is the queue owner's")
    rows = selectors.queue_export_rows(queue)
    name = f"queue-{queue.pk}-labels.{fmt}"
    if fmt == "json":
        response = HttpResponse(json.dumps(rows, indent=1), content_type="application/json")
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(selectors.EXPORT_FIELDS))
        writer.writeheader()
        writer.writerows(rows)
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@staff_member_required
@permission_needed("evaluation.add_labelqueue")
@require_POST
def queue_from_card(request: HttpRequest, configuration_id: int) -> HttpResponse:
    """The judge card's "make a queue": label next's picks for this configuration, to the people named."""
    configuration = selectors.configuration_get(configuration_id)
    if configuration is None:
        raise Http404("no such judge configuration")
    count = request.POST.get("count", "20")
    per_item = request.POST.get("labels_per_item", "2")
    try:
        queue = services.queue_create(
            name=request.POST.get("name", "") or f"label next: {configuration.rubric.slug}",
            rubric=configuration.rubric.slug,
            owner=request.user,
            origin="label-next",
            configuration=configuration.pk,
            count=int(count) if count.isdigit() else -1,
            labels_per_item=int(per_item) if per_item.isdigit() else 0,
            blind=request.POST.get("blind") in ("on", "true", "1"),
            annotators=[n for n in request.POST.get("annotators", "").replace(",", " ").split() if n],
            adjudicators=[n for n in request.POST.get("adjudicators", "").replace(",", " ").split() if n],
        )
    except InvalidInput as exc:
        messages.error(request, f"No queue made: {exc}")
        return redirect(reverse("evaluation-judge-card", args=[configuration.pk]) + "#label-next")
    messages.success(request, f"Queue {queue.name!r} made with {queue.entries.count()} items.")
    return redirect("evaluation-queue", queue.pk)
