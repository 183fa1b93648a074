"""The reference tutor's session protocol over HTTP (the WebSocket half is in consumers.py)."""

from django.urls import path

from evaluation.tutoring import protocol_views

urlpatterns = [
    path("health/db", protocol_views.health_db, name="health-db"),
    path("sessions", protocol_views.create_session, name="session-create"),
    path("sessions/<uuid:session_id>", protocol_views.get_session, name="session-detail"),
]
