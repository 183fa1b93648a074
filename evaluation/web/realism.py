"""The realism page: a persona's simulated students (or an imported set) against a reference of real students."""

from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from evaluation.errors import InvalidInput, NotFound
from evaluation.tutoring import selectors
from evaluation.web.views import _page, permission_needed

FIELDS = ("persona", "reference", "transcripts", "group")


@staff_member_required
@permission_needed("evaluation.view_evaluationrun")
@require_GET
def realism(request: HttpRequest) -> HttpResponse:
    """One card per persona and simulator model (or for one imported set) against one reference; bad input is a
    400 page that says what was wrong."""
    asked = {name: request.GET.get(name, "").strip()[:120] for name in FIELDS}
    asked["reference"] = asked["reference"] or selectors.DEFAULT_REFERENCE
    ctx: dict[str, Any] = {
        "title": "Realism: simulated students against real ones",
        "asked": asked,
        "personas": list(selectors.persona_list().values_list("persona_id", flat=True)),
        "cards": [],
        "error": "",
    }
    try:
        ctx["cards"] = selectors.realism_cards(
            reference=asked["reference"],
            persona=asked["persona"] or "all",
            transcripts=asked["transcripts"],
            group=asked["group"],
        ).cards
    except InvalidInput as exc:
        ctx["error"] = "; ".join(str(p) for p in exc.problems)
    except NotFound as exc:
        ctx["error"] = str(exc)
    return _page(request, "evaluation/realism.html", ctx, status=400 if ctx["error"] else 200)
