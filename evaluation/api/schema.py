"""The OpenAPI description of every operation: one decorator that names it, tags it and documents each status."""

from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any, TypeVar

from django.core.validators import RegexValidator
from drf_spectacular import openapi
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

F = TypeVar("F", bound=Callable[..., Any])


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's schema, saying what the server does with text in a request: DRF refuses a
    NUL character in any text field, and a field that refuses blank (trimming whitespace first)
    refuses "" and whitespace alone: `minLength: 1` and a pattern. A field with its own regex keeps it."""

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> dict[str, Any]:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        text = isinstance(field, serializers.CharField) and schema.get("type") == "string"
        if direction != "request" or not text or field.read_only or "pattern" in schema:
            return schema
        if not field.allow_blank:
            schema["minLength"] = max(schema.get("minLength", 1), 1)
        if not any(isinstance(v, RegexValidator) for v in field.validators):
            schema["pattern"] = NOT_BLANK_TEXT if field.trim_whitespace and not field.allow_blank else TEXT
        return schema


TEXT = r"^[^\u0000]*$"
NOT_BLANK_TEXT = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"


class ErrorSerializer(serializers.Serializer):
    """Every error the API returns has this shape."""

    error = serializers.CharField(help_text="What was wrong, in one line a person can read.")
    # DRF's metaclass takes declared fields off the class, so this does not hide Serializer.fields.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="400 only: each bad input field (dotted when nested) with its reasons; "
        "`non_field_errors` for the input as a whole.",
    )


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


UNAUTHENTICATED = _error(
    "No credentials, or bad ones: send `Authorization: Token <key>` (the response carries "
    "`WWW-Authenticate: Token`), or use a staff session."
)
FORBIDDEN = _error("Authenticated, but not a staff user.")
TOO_LARGE = _error(
    "The request body is larger than `DATA_UPLOAD_MAX_MEMORY_SIZE` (Django's setting, 2.5 MB by default)."
)


def path_parameter(name: str, description: str, kind: type = str) -> OpenApiParameter:
    return OpenApiParameter(name, kind, OpenApiParameter.PATH, description=description)


def run_id_parameter(
    description: str = "The run's readable id (`run_20260101_120000_ace`) or its UUID.",
) -> OpenApiParameter:
    return path_parameter("run_id", description)


def group_parameter() -> OpenApiParameter:
    return path_parameter("group", "A comparison group's id (`comparison_20260101_120000_1a2b3c`).")


def operation(
    *,
    operation_id: str,
    tag: str,
    summary: str,
    description: str,
    ok: dict[Any, Any],
    request: Any = None,
    parameters: Sequence[Any] = (),
    invalid: str | None = None,
    not_found: str | None = None,
    conflict: str | None = None,
    body: bool = False,
) -> Callable[[F], F]:
    """extend_schema for one operation, with every status it can answer documented.

    `ok` maps the success status (or `(status, media type)`) to its serializer; `invalid`, `not_found`
    and `conflict` describe when 400, 404 and 409 happen (None: they cannot); 401 and 403 always can;
    `body` adds 413 for operations that read a request body.
    """
    responses: dict[Any, Any] = {
        code: OpenApiResponse(shape, description=HTTPStatus(code[0] if isinstance(code, tuple) else code).phrase)
        for code, shape in ok.items()
    }
    if invalid:
        responses[400] = _error(invalid)
    responses[401] = UNAUTHENTICATED
    responses[403] = FORBIDDEN
    if not_found:
        responses[404] = _error(not_found)
    if conflict:
        responses[409] = _error(conflict)
    if body:
        responses[413] = TOO_LARGE
    return extend_schema(
        operation_id=operation_id,
        tags=[tag],
        summary=summary,
        description=description,
        request=request,
        parameters=list(parameters),
        responses=responses,
    )
