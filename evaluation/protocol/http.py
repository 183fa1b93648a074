"""HTTP half of the session protocol (docs/session-protocol.md): create, read back, health."""

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from evaluation import limits
from evaluation.errors import InvalidInput
from evaluation.protocol import auth
from evaluation.tutoring import selectors, services

USER_MAX_CHARS = 100
"""The stored user name's column width."""


def _refused(message: str, status: int = 401) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="session protocol"'
    return response


def _invalid(exc: InvalidInput, status: int = 400) -> JsonResponse:
    fields: dict[str, list[str]] = {}
    for problem in exc.problems:
        fields.setdefault(problem.field, []).append(problem.reason)
    return JsonResponse({"error": str(exc), "fields": fields}, status=status)


@require_GET
def health_db(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})


@csrf_exempt  # a machine protocol, called without a browser session
@require_POST
def create_session(request: HttpRequest) -> JsonResponse:
    refusal = auth.create_refusal(request.headers.get("Authorization", ""))
    if refusal is not None:
        status, message = refusal
        return _refused(message, status)
    try:
        raw = request.body
    except RequestDataTooBig:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return JsonResponse(
            {"error": f"body: too large: the limit is {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)"}, status=413
        )
    try:
        body: Any = limits.json_loads(raw or b"{}", where="")
    except InvalidInput as exc:
        return _invalid(exc)
    if not isinstance(body, dict) or not isinstance(body.get("topic_id"), str):
        return JsonResponse(
            {"error": "topic_id: is required (a string)", "fields": {"topic_id": ["is required"]}}, status=400
        )
    user = body.get("user") or "eval-student"
    if not isinstance(user, str) or len(user) > USER_MAX_CHARS:
        reason = f"must be a string of at most {USER_MAX_CHARS} characters"
        return JsonResponse({"error": f"user: {reason}", "fields": {"user": [reason]}}, status=400)
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or abs(seed) >= 2**53):
        reason = "must be an integer (|seed| < 2**53) or absent"
        return JsonResponse({"error": f"seed: {reason}", "fields": {"seed": [reason]}}, status=400)
    faults = body.get("faults")
    if faults is not None and (
        not isinstance(faults, list) or len(faults) > 10 or not all(isinstance(f, str) and len(f) <= 50 for f in faults)
    ):
        reason = "must be a list of at most 10 fault names (the degraded tutor's) or absent"
        return JsonResponse({"error": f"faults: {reason}", "fields": {"faults": [reason]}}, status=400)
    try:
        session = services.session_create(topic_id=body["topic_id"], user=user, seed=seed, faults=faults)
    except InvalidInput as exc:
        return _invalid(exc, status=400 if any(p.field == "faults" for p in exc.problems) else 404)
    state = selectors.session_public_state(session)
    return JsonResponse({**state, "session_token": auth.session_token(state["session_id"])}, status=201)


@require_GET
def get_session(request: HttpRequest, session_id: uuid.UUID) -> JsonResponse:
    # The token is checked first: without it, a caller learns nothing, not even whether the id exists.
    if not auth.session_token_ok(session_id, auth.bearer(request.headers.get("Authorization", ""))):
        return _refused(auth.READ_REFUSED)
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
