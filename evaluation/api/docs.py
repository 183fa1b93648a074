"""The schema's pages, Swagger UI and Redoc, under the site's Content-Security-Policy.

Both load their scripts and styles from this server. What they must run or style inline gets the
response's nonce (django-csp), on these two pages only: the rest of the site keeps `'self'` alone.

- Swagger UI's stylesheet draws its icons as `data:` SVG images.
- Redoc puts most of its styles in `<style>` elements it creates and, given the nonce (its `nonce`
  option), marks them with it; two it creates before it reads its options (one empty, one fixed) are
  allowed by their hashes, which hold for the bundled Redoc (drf-spectacular-sidecar) and are checked in
  Chromium by the tests. Its search runs in a worker made from a `blob:` URL. Its menu's footer draws
  a logo whose address, cdn.redoc.ly, is written into the bundle: the bundle is served by `redoc_bundle`
  with that address turned into this site's own icon, so the page loads nothing from elsewhere (offline,
  the CDN's image was a failed request and a console error).
"""

from functools import cache
from pathlib import Path
from typing import Any

import drf_spectacular_sidecar
from csp.constants import NONCE, SELF
from csp.decorators import csp_update
from django.http import HttpRequest, HttpResponse
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET
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
    "img-src": [SELF, "data:"],
}
REDOC_BUNDLE = (
    Path(drf_spectacular_sidecar.__file__).parent / "static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
)
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


class SwaggerView(SpectacularSwaggerSplitView):
    template_name = "api_docs/swagger_ui.html"
    permission_classes = [AllowAny]


class RedocView(SpectacularRedocView):
    template_name = "api_docs/redoc.html"
    permission_classes = [AllowAny]

    @staticmethod
    def _redoc_standalone() -> str:
        return reverse("api-redoc-bundle")


@cache
def _bundle(logo: str) -> bytes:
    text = REDOC_BUNDLE.read_text(encoding="utf-8")
    if REDOC_CDN_LOGO not in text:  # another Redoc: the page would load nothing from the CDN, or fail the tests
        raise RuntimeError(f"{REDOC_BUNDLE} no longer names {REDOC_CDN_LOGO}: check its logo's address")
    return text.replace(REDOC_CDN_LOGO, logo).encode()


@require_GET
def redoc_bundle(request: HttpRequest) -> HttpResponse:
    """The bundled Redoc (drf-spectacular-sidecar) with its menu's logo served from this site."""
    response = HttpResponse(_bundle(static("favicon.svg")), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=86400"
    return response


def swagger_view(**kwargs: Any) -> Any:
    return csp_update(SWAGGER_POLICY)(SwaggerView.as_view(**kwargs))


def redoc_view(**kwargs: Any) -> Any:
    return csp_update(REDOC_POLICY)(RedocView.as_view(**kwargs))
