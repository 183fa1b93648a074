"""WebSocket routes (Channels).

Only the staff's live-run socket reads the Django session and user (AuthMiddlewareStack). The
tutor's session socket authenticates by its session token alone, so it neither parses cookies nor
loads a session or a user, at its opening or with every frame it sends.
"""

from channels.auth import AuthMiddlewareStack
from django.urls import path

from evaluation import consumers
from evaluation.protocol import ws

websocket_urlpatterns = [
    path("sessions/ws/<uuid:session_id>", ws.TutorSessionConsumer.as_asgi()),
    path("ws/runs/", AuthMiddlewareStack(consumers.RunProgressConsumer.as_asgi())),
]
