"""The session protocol's HTTP routes (the WebSocket route is in evaluation/routing.py)."""

from django.urls import path

from evaluation.protocol import http

urlpatterns = [
    path("health/db", http.health_db, name="health-db"),
    path("sessions", http.create_session, name="session-create"),
    path("sessions/<uuid:session_id>", http.get_session, name="session-detail"),
]
