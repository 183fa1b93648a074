"""The app's URLs: the REST API, the reference tutor's session protocol, and / (to the dashboard)."""

from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("api/", include("evaluation.api.urls")),
    # The dashboard is where people start; it sends anonymous visitors to the login page.
    path("", RedirectView.as_view(pattern_name="evaluation-dashboard"), name="home"),
    path("", include("evaluation.protocol.urls")),
]
