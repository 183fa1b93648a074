"""The reference tutor's session protocol over HTTP (the WebSocket half is in consumers.py)."""

from django.urls import path

from evaluation.tutoring import protocol_views

urlpatterns = [
    path("health/db", protocol_views.health_db, name="health-db"),
]
