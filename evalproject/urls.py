"""URL map: admin, REST API, OpenAPI schema, the reference tutor's session protocol."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("", include("evaluation.urls")),
]
