"""URL map: the staff dashboard (inside the admin's URL space), admin, REST API, schema, session protocol."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import AllowAny

from evaluation.web import site

# A path no route matches (or whose converter refuses it, e.g. /api/suites/abc) answers in the shape
# of its door: JSON under /api/, the site's page elsewhere. A 500 is Django's view with templates/500.html,
# which needs no database, no request and no context processor.
handler404 = "evaluation.web.site.page_not_found"
handler500 = "evaluation.web.site.server_error"

urlpatterns = [
    # Before admin.site.urls: /admin/evaluation/ is the dashboard rather than the app's model index.
    path("admin/evaluation/", include("evaluation.web.urls")),
    path("admin/", admin.site.urls),
    path("favicon.ico", site.favicon, name="favicon"),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path("", include("evaluation.urls")),
]
