"""One error shape for the API: {"error": reason, "fields": {field: [reasons]}}, never a traceback."""

import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from evaluation.errors import Conflict, InvalidInput, NotFound
from evaluation.limits import TooLarge
from evaluation.runs.outage import circuit, close_broken_connection, database_unavailable

log = logging.getLogger(__name__)

NON_FIELD = "non_field_errors"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"

    def __init__(self) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        super().__init__(f"the request body is too large: the limit is {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)")


class DatabaseBusy(exceptions.APIException):
    """The database cannot serve the request now: every connection is taken (the pool's wait ran out,
    or the server refused another client), or it cannot be reached (stopped, restarting, the
    connection lost under the request). A passing state, not a fault of the request, so the client
    is told to come back instead of getting a 500."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "database_unavailable"
    wait = 2  # seconds; DRF's handler sends it as Retry-After

    def __init__(self, reason: str = "the database is busy: every connection is in use") -> None:
        super().__init__(f"{reason}; retry in {self.wait} s")


def database_busy(exc: BaseException) -> bool:
    """Does the error mean the database could not serve the request now (busy or unreachable)?"""
    return database_unavailable(exc) is not None


def database_refusal(exc: BaseException) -> DatabaseBusy | None:
    """The 503 for a database that could not serve the request, after closing the request's broken
    connection (so nothing later in the request, nor the next request on this thread, reuses it);
    None for any other error."""
    reason = database_unavailable(exc)
    if reason is None:
        return None
    close_broken_connection()
    circuit.trip(reason)  # if the database is down, the next requests are answered at once
    return DatabaseBusy(reason)


def flat_fields(detail: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(field, reason) pairs from DRF's nested error detail; nested fields are dotted (`dimensions.0`)."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            yield from flat_fields(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                yield from flat_fields(value, f"{prefix}.{index}" if prefix else str(index))
            else:
                yield prefix or NON_FIELD, str(value)
    else:
        yield prefix or NON_FIELD, str(detail)


def error_body(problems: list[tuple[str, str]]) -> dict[str, Any]:
    fields: dict[str, list[str]] = {}
    for field, reason in problems:
        fields.setdefault(field, []).append(reason)
    summary = "; ".join(f"{k}: {' '.join(v)}" if k != NON_FIELD else " ".join(v) for k, v in fields.items())
    return {"error": summary, "fields": fields}


def exception_handler(exc, context):
    # The services' own refusals map to one status each, so views need no try/except of their own.
    if isinstance(exc, NotFound):
        return Response({"error": str(exc)}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, Conflict):
        return Response({"error": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, InvalidInput):
        body = error_body([(p.field or NON_FIELD, p.reason) for p in exc.problems])
        code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE if isinstance(exc, TooLarge) else status.HTTP_400_BAD_REQUEST
        return Response({**body, "error": str(exc)}, status=code)
    if isinstance(exc, RequestDataTooBig):  # Django's own bound, which DRF's JSON parser also meets
        exc = PayloadTooLarge()
    if isinstance(exc, RecursionError):  # DRF's JSON parser on a deeply nested body
        exc = exceptions.ParseError("body: JSON is nested too deeply")
    refusal = database_refusal(exc)
    if refusal is not None:
        log.warning("API request refused with 503: %s", str(exc).strip())
        exc = refusal
    response = drf_exception_handler(exc, context)
    if response is None:
        log.exception("unhandled API error", exc_info=exc)
        return Response(
            {"error": f"internal error: {type(exc).__name__}"}, status=status.HTTP_500_INTERNAL_SERVER_ERROR
        )
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(list(flat_fields(exc.detail)))
    elif isinstance(exc, (exceptions.APIException, Http404)):
        detail = getattr(exc, "detail", str(exc))
        response.data = {"error": str(detail)}
    return response


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 view for the whole site (handler404): under /api/ the API's error shape, so a
    client that asked for JSON never gets an HTML page; elsewhere Django's own page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": f"no API operation at {request.path}"}, status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)
