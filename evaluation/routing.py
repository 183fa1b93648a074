"""WebSocket routes (Channels)."""

from django.urls import path

from evaluation import consumers

websocket_urlpatterns = [
    path("sessions/ws/<uuid:session_id>", consumers.TutorSessionConsumer.as_asgi()),
    path("ws/runs/", consumers.RunProgressConsumer.as_asgi()),
]
