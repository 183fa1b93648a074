"""Door-wide guards for every page and API operation.

- A URL holding a NUL character is refused with 400 before any view looks it up: no id or filter
  may hold one, and PostgreSQL cannot store or compare text that does (it raised, as a 500, on
  every lookup by a path id).
- Pages answer 503 with Retry-After, not 500, when every database connection is taken. The API maps
  the same condition in its exception handler (evaluation/api/errors.py); this does it for the
  dashboard, the reports and the admin, whose views raise the pool's timeout as OperationalError.
"""

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape

from evaluation.api.errors import DatabaseBusy, database_busy, error_body

log = logging.getLogger(__name__)

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Busy: try again shortly</title></head>
<body><h1>The server is busy</h1><p>{reason}</p><p>This page will answer again in a moment; reload it in {wait} s.</p></body></html>"""


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
    """A view that found no free database connection gets a 503 page instead of a server error."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_busy(exception):
            return None
        busy = DatabaseBusy()
        log.warning("page %s refused with 503: %s", request.path, exception)
        response = HttpResponse(PAGE.format(reason=escape(str(busy.detail)), wait=busy.wait), status=503)
        response["Retry-After"] = str(busy.wait)
        return response
