"""GET /api/: what this API is and what it offers, as JSON: its name, version, the documentation pages and
every operation grouped by tag, read from the OpenAPI schema the docs pages show.

Public, as /api/schema/, /api/docs/ and /api/redoc/ are: it holds the schema's summaries and nothing
stored (no run, no agent, no user); every operation it lists still needs a staff token.
"""

from functools import cache
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

METHODS = ("get", "post", "put", "patch", "delete")


@cache
def operations_by_tag() -> list[dict[str, Any]]:
    """The schema's tags in their documented order, each with its description and operations."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    documented: list[dict[str, str]] = list(settings.SPECTACULAR_SETTINGS.get("TAGS", []))  # type: ignore[call-overload]
    tags: list[dict[str, Any]] = [{**tag, "operations": []} for tag in documented]
    by_name = {tag["name"]: tag for tag in tags}
    for path, item in schema["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            for name in op.get("tags", []):
                tag = by_name.setdefault(name, {"name": name, "description": "", "operations": []})
                if tag not in tags:
                    tags.append(tag)
                tag["operations"].append(
                    {
                        "method": method.upper(),
                        "path": path,
                        "operation_id": op["operationId"],
                        "summary": op.get("summary", ""),
                    }
                )
    return [tag for tag in tags if tag["operations"]]


class IndexView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        spectacular = settings.SPECTACULAR_SETTINGS
        return Response(
            {
                "name": spectacular["TITLE"],
                "version": spectacular["VERSION"],
                "description": spectacular["DESCRIPTION"],
                "authentication": "Every operation needs a staff user: `Authorization: Token <key>` "
                "(docs/api.md says how to get one) or a staff session.",
                "links": {
                    "schema": request.build_absolute_uri(reverse("schema")),
                    "docs": request.build_absolute_uri(reverse("api-docs")),
                    "redoc": request.build_absolute_uri(reverse("api-redoc")),
                },
                "tags": operations_by_tag(),
            }
        )
