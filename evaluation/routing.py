"""WebSocket routes (Channels)."""

from django.urls import path

from evaluation import consumers
from evaluation.protocol import ws

websocket_urlpatterns = [
    path("sessions/ws/<uuid:session_id>", ws.TutorSessionConsumer.as_asgi()),
    path("ws/runs/", consumers.RunProgressConsumer.as_asgi()),
]
