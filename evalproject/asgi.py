"""ASGI entry point: HTTP goes to Django, WebSocket to the Channels routes."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalproject.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from evaluation.routing import websocket_urlpatterns  # noqa: E402

# The embedded default serves its own static files (admin and dashboard CSS/JS) so one daphne
# process is the whole web tier; behind a proxy, set EVAL_SERVE_STATIC=0 and serve collectstatic.
http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.EVALUATION["SERVE_STATIC"] else django_asgi_app

application = ProtocolTypeRouter({"http": http_app, "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns))})
