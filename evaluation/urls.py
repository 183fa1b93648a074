"""The app's URLs: the REST API and the reference tutor's session protocol."""

from django.urls import include, path

urlpatterns = [
    path("api/", include("evaluation.api.urls")),
    path("", include("evaluation.protocol.urls")),
]
