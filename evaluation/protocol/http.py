"""HTTP half of the session protocol (docs/session-protocol.md): create, read back, health."""

import json
import uuid

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from evaluation.errors import InvalidInput
from evaluation.tutoring import selectors, services


@require_GET
def health_db(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})


@csrf_exempt  # a machine protocol, called without a browser session
@require_POST
def create_session(request: HttpRequest) -> JsonResponse:
    try:
        body = json.loads(request.body or b"{}")
    except json.JSONDecodeError as exc:
        return JsonResponse({"error": f"body: not JSON ({exc.msg})"}, status=400)
    if not isinstance(body, dict) or not isinstance(body.get("topic_id"), str):
        return JsonResponse(
            {"error": "topic_id: is required (a string)", "fields": {"topic_id": ["is required"]}}, status=400
        )
    try:
        session = services.session_create(topic_id=body["topic_id"], user=str(body.get("user") or "eval-student"))
    except InvalidInput as exc:
        return JsonResponse({"error": str(exc), "fields": {p.field: [p.reason] for p in exc.problems}}, status=404)
    return JsonResponse(selectors.session_public_state(session), status=201)


@require_GET
def get_session(request: HttpRequest, session_id: uuid.UUID) -> JsonResponse:
    session = selectors.session_lookup(session_id)
    if session is None:
        return JsonResponse({"error": f"session_id: no session {session_id}"}, status=404)
    return JsonResponse(
        {
            **selectors.session_public_state(session),
            "full_conversation_log": session.full_conversation_log,
            "conversation_history": session.conversation_history,
            "created_at": session.created_at.isoformat(),
        }
    )
