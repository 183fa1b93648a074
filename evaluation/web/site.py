"""What every page of the site shares beyond its frame: the not-found page and the favicon."""

import logging
import sys
from functools import cache

from django.contrib import admin
from django.contrib.staticfiles import finders
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotFound
from django.template.loader import render_to_string
from django.views import defaults
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

from evaluation.api import errors as api_errors
from evaluation.web.middleware import database_unavailable_response

log = logging.getLogger(__name__)


def server_error(request: HttpRequest) -> HttpResponse:
    """The site's 500 (handler500): an error that means the database is away, met outside a view (in a
    middleware, a session save), is a 503 with Retry-After like the views' own; anything else is the
    site's standalone 500 page, which needs no database."""
    response = database_unavailable_response(request, sys.exc_info()[1] or Exception())
    if response is not None:
        return response
    return defaults.server_error(request)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The site's 404 (handler404): under /api/ the API's JSON error; elsewhere a page in the admin's
    frame (header, user links, sidebar), which still renders when the database cannot be read."""
    if request.path.startswith("/api/"):
        return api_errors.page_not_found(request, exception)
    context = {"title": "Page not found", "request_path": request.path}
    try:
        frame = admin.site.each_context(request)
    except DatabaseError:
        log.warning("404 page without the admin's frame: the database could not be read", exc_info=True)
    else:
        context = {**frame, **context}
    return HttpResponseNotFound(render_to_string("404.html", context, request))


@cache
def _favicon() -> bytes | None:
    found = finders.find("favicon.ico")
    if not found:
        return None
    with open(found if isinstance(found, str) else found[0], "rb") as icon:
        return icon.read()


@require_safe
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, where browsers and tools ask for it whatever the page's <link rel=icon> says."""
    icon = _favicon()
    if icon is None:
        raise Http404("no favicon.ico among the static files")
    return HttpResponse(icon, content_type="image/x-icon")
