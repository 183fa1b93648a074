"""Door-wide guards for every page and API operation.

- A URL holding a NUL character is refused with 400 before any view looks it up: no id or filter
  may hold one, and PostgreSQL cannot store or compare text that does (it raised, as a 500, on
  every lookup by a path id).
- Pages answer 503 with Retry-After, not 500, when the database cannot serve them: every connection
  taken, or the database stopped, restarting or lost under the request. The API maps the same
  condition (one predicate, evaluation/api/errors.py) in its exception handler; this does it for the
  dashboard, the reports, the admin and the session protocol's plain views.
"""

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape

from evaluation.api.errors import database_refusal, error_body

log = logging.getLogger(__name__)

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Unavailable: try again shortly</title></head>
<body><h1>The database cannot answer now</h1><p>{reason}</p><p>This page will answer again in a moment; reload it in {wait} s.</p></body></html>"""


JSON_PATHS = ("/api/", "/sessions", "/health/")
"""Doors whose clients read JSON: the API and the session protocol's HTTP half."""


class NulInUrlMiddleware:
    """400 naming the part of the URL (the path, or a query parameter) that holds a NUL character."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = "path" if "\x00" in request.path else None
        if where is None:
            where = next((k for k, v in request.GET.lists() if "\x00" in k or any("\x00" in x for x in v)), None)
        if where is None:
            return self.get_response(request)
        reason = "contains a NUL character (%00)"
        if request.path.startswith("/api/"):
            return JsonResponse(error_body([(where, reason)]), status=400)
        return HttpResponse(f"Bad request: {escape(where)} {reason}.", status=400, content_type="text/plain")


class DatabaseBusyMiddleware:
    """A view whose database was busy or unreachable gets a 503 with Retry-After instead of a server
    error: JSON under /api/ and for the protocol's JSON views, a page elsewhere."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return database_unavailable_response(request, exception)


def database_unavailable_response(request: HttpRequest, exception: BaseException) -> HttpResponse | None:
    """The 503 with Retry-After for an error that means the database could not serve the request (its
    broken connection closed); None for any other error. Also for a handler500 that meets such an
    error outside a view."""
    refusal = database_refusal(exception)
    if refusal is None:
        return None
    log.warning("%s refused with 503: %s", request.path, str(exception).strip())
    response: HttpResponse
    if request.path.startswith(JSON_PATHS):
        response = JsonResponse({"error": str(refusal.detail)}, status=503)
    else:
        response = HttpResponse(PAGE.format(reason=escape(str(refusal.detail)), wait=refusal.wait), status=503)
    response["Retry-After"] = str(refusal.wait)
    return response
