"""The schema's pages, Swagger UI and Redoc, under the site's Content-Security-Policy.

Both load their scripts and styles from this server. What they must run or style inline gets the
response's nonce (django-csp), on these two pages only: the rest of the site keeps `'self'` alone.

- Swagger UI's stylesheet draws its icons as `data:` SVG images.
- Redoc puts most of its styles in `<style>` elements it creates and, given the nonce (its `nonce`
  option), marks them with it; two it creates before it reads its options (one empty, one fixed) are
  allowed by their hashes, which hold for the bundled Redoc (drf-spectacular-sidecar) and are checked in
  Chromium by the tests. Its search runs in a worker made from a `blob:` URL, and its menu shows the
  Redocly logo from cdn.redoc.ly (hidden when that cannot load, as offline).
"""

from typing import Any

from csp.constants import NONCE, SELF
from csp.decorators import csp_update
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.permissions import AllowAny

SWAGGER_POLICY = {"script-src": [NONCE], "style-src": [NONCE], "img-src": ["data:"]}
REDOC_STYLE_HASHES = [
    "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",  # an empty <style>
    "'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='",
]
REDOC_POLICY = {
    "script-src": [NONCE],
    "style-src": [NONCE, *REDOC_STYLE_HASHES],
    "worker-src": [SELF, "blob:"],
    "img-src": ["data:", "https://cdn.redoc.ly"],
}


class SwaggerView(SpectacularSwaggerSplitView):
    template_name = "api_docs/swagger_ui.html"
    permission_classes = [AllowAny]


class RedocView(SpectacularRedocView):
    template_name = "api_docs/redoc.html"
    permission_classes = [AllowAny]


def swagger_view(**kwargs: Any) -> Any:
    return csp_update(SWAGGER_POLICY)(SwaggerView.as_view(**kwargs))


def redoc_view(**kwargs: Any) -> Any:
    return csp_update(REDOC_POLICY)(RedocView.as_view(**kwargs))
