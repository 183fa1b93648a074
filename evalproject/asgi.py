"""ASGI entry point: HTTP goes to Django, WebSocket to the Channels routes."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalproject.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from evaluation.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {"http": django_asgi_app, "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns))}
)
