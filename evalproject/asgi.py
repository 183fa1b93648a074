"""ASGI entry point: HTTP goes to Django, WebSocket to the Channels routes."""

import os
from urllib.parse import ParseResult

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalproject.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import OriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from evaluation.conf import setting  # noqa: E402
from evaluation.routing import websocket_urlpatterns  # noqa: E402
from evaluation.web.circuit import DatabaseCircuit  # noqa: E402
from evaluation.web.concurrency import RequestLimit  # noqa: E402


class PageOriginValidator(OriginValidator):
    """Channels' AllowedHostsOriginValidator, except that a handshake without an Origin passes.

    A browser always sends Origin with a WebSocket handshake, so a page on another site is refused
    (cross-site WebSocket hijacking with the staff member's cookie). A machine client, such as the
    evaluation runner on the session protocol, sends none and carries no browser's cookies.
    """

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        return parsed_origin is None or super().valid_origin(parsed_origin)


# The embedded default serves its own static files (admin and dashboard CSS/JS) so one uvicorn
# process is the whole web tier; behind a proxy, set EVAL_SERVE_STATIC=0 and serve collectstatic.
django_http = ASGIStaticFilesHandler(django_asgi_app) if settings.EVALUATION["SERVE_STATIC"] else django_asgi_app
# A few requests at a time inside Django, the rest waiting in the event loop (evaluation/web/concurrency.py);
# while the database is known down, answered 503 at once, before and after waiting (evaluation/web/circuit.py).
http_app = DatabaseCircuit(RequestLimit(DatabaseCircuit(django_http), setting("WEB_CONCURRENCY")))

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": PageOriginValidator(URLRouter(websocket_urlpatterns), settings.ALLOWED_HOSTS),
    }
)
