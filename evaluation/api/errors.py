"""One error shape for the API: {"error": reason, "fields": {field: [reasons]}}, never a traceback."""

import logging

from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from evaluation.errors import Conflict, InvalidInput, NotFound

log = logging.getLogger(__name__)


def exception_handler(exc, context):
    # The services' own refusals map to one status each, so views need no try/except of their own.
    if isinstance(exc, NotFound):
        return Response({"error": str(exc)}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, Conflict):
        return Response({"error": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, InvalidInput):
        fields: dict[str, list[str]] = {}
        for p in exc.problems:
            fields.setdefault(p.field or "non_field_errors", []).append(p.reason)
        return Response({"error": str(exc), "fields": fields}, status=status.HTTP_400_BAD_REQUEST)
    response = drf_exception_handler(exc, context)
    if response is None:
        log.exception("unhandled API error", exc_info=exc)
        return Response(
            {"error": f"internal error: {type(exc).__name__}"}, status=status.HTTP_500_INTERNAL_SERVER_ERROR
        )
    if isinstance(exc, exceptions.ValidationError):
        data = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        summary = "; ".join(f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in data.items())
        response.data = {"error": summary, "fields": data}
    elif isinstance(exc, (exceptions.APIException, Http404)):
        detail = getattr(exc, "detail", str(exc))
        response.data = {"error": str(detail)}
    return response
