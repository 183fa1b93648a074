"""The OpenAPI description of every operation: one decorator that names it, tags it and documents each status."""

from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any, TypeVar

from django.core.validators import RegexValidator
from drf_spectacular import openapi
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from evaluation.api.permissions import NOT_STAFF

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


def _error(description: str, example: dict[str, Any]) -> OpenApiResponse:
    """An error response with one example of what the server answers (its code comes from the response's)."""
    summary = example["error"] if len(example["error"]) <= 60 else example["error"][:57] + "..."
    return OpenApiResponse(
        ErrorSerializer, description=description, examples=[OpenApiExample("error", summary=summary, value=example)]
    )


def field_error(field: str, reason: str) -> dict[str, Any]:
    """The 400 body for one bad field, as the server writes it."""
    return {"error": f"{field}: {reason}", "fields": {field: [reason]}}


UNAUTHENTICATED = _error(
    "No credentials, or bad ones: send `Authorization: Token <key>` (the response carries "
    "`WWW-Authenticate: Token`), or use a staff session.",
    {"error": "Authentication credentials were not provided."},
)
FORBIDDEN = _error(
    "Authenticated, but not a staff user, or without the permission the operation needs.",
    {"error": NOT_STAFF},
)
TOO_LARGE = _error(
    "The request body is larger than `DATA_UPLOAD_MAX_MEMORY_SIZE` (Django's setting, 2.5 MB by default).",
    {"error": "the request body is too large: the limit is 2621440 bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)"},
)
BAD_JSON = {"error": "JSON parse error - line 1: body: invalid JSON: Expecting value (column 1)"}
REPEATED_REASON = "given 2 times; send it once"
CAPACITY_EXAMPLE = (
    "4 runs are active (EVAL_MAX_ACTIVE_RUNS is 4) and 50 wait; the queue limit is 50 (EVAL_MAX_QUEUED_RUNS), "
    "so 1 more cannot be queued now"
)
# What a path parameter that names nothing is answered with, by the parameter's name.
NOT_FOUND_EXAMPLES = {
    "run_id": "run: no run 'run_20260101_120000_nobody'",
    "group": "group: no comparison 'comparison_20260101_120000_0000aa'",
    "topic_id": "topic: no topic 'nope'; the topics are: area-and-perimeter, comparing-decimals, ...",
    "persona_id": "persona: no persona 'nobody'; the personas are: ace, average_student, ...",
    "agent_id": "agent: no agent 'nobody'",
    "suite_id": "suite: no suite 999",
}
# Examples for path parameters, so "Try it out" starts from ids a fresh install has.
PATH_EXAMPLES = {
    "run_id": "run_20260101_120000_ace",
    "group": "comparison_20260101_120000_1a2b3c",
    "topic_id": "comparing-decimals",
    "persona_id": "ace",
    "agent_id": "reference",
    "suite_id": 1,
}


def path_parameter(name: str, description: str, kind: type = str, example: Any = None) -> OpenApiParameter:
    example = PATH_EXAMPLES.get(name) if example is None else example
    examples = [OpenApiExample(name, value=example)] if example is not None else []
    return OpenApiParameter(name, kind, OpenApiParameter.PATH, description=description, examples=examples)


def run_id_parameter(
    description: str = "The run's readable id (`run_20260101_120000_ace`) or its UUID.",
) -> OpenApiParameter:
    return path_parameter("run_id", description)


def group_parameter() -> OpenApiParameter:
    return path_parameter("group", "A comparison group's id (`comparison_20260101_120000_1a2b3c`).")


def _query_fields(parameters: Sequence[Any]) -> list[str]:
    """The names of the query parameters a serializer among `parameters` declares."""
    names: list[str] = []
    for parameter in parameters:
        if isinstance(parameter, type) and issubclass(parameter, serializers.Serializer):
            names.extend(parameter().fields)
    return names


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
    invalid_example: dict[str, Any] | None = None,
    not_found_example: str | None = None,
    conflict_example: str | None = None,
    examples: Sequence[OpenApiExample] = (),
) -> Callable[[F], F]:
    """extend_schema for one operation, with every status it can answer documented.

    `ok` maps the success status (or `(status, media type)`) to its serializer; `invalid`, `not_found`
    and `conflict` describe when 400, 404 and 409 happen (None: they cannot); 401 and 403 always can;
    `body` adds 413 for operations that read a request body. Each error carries an example of the
    body the server answers: the `*_example` arguments, else one that fits the operation (a query
    parameter sent twice, a body that is not JSON, a path id that names nothing, the queue full).
    `examples` are request bodies, for a body whose schema carries none of its own.
    """
    responses: dict[Any, Any] = {
        code: OpenApiResponse(shape, description=HTTPStatus(code[0] if isinstance(code, tuple) else code).phrase)
        for code, shape in ok.items()
    }
    if invalid:
        query = _query_fields(parameters)
        example = invalid_example or (BAD_JSON if body or not query else field_error(query[0], REPEATED_REASON))
        responses[400] = _error(invalid, example)
    responses[401] = UNAUTHENTICATED
    responses[403] = FORBIDDEN
    if not_found:
        names = [p.name for p in parameters if isinstance(p, OpenApiParameter) and p.location == OpenApiParameter.PATH]
        missing = not_found_example or next((NOT_FOUND_EXAMPLES[n] for n in names if n in NOT_FOUND_EXAMPLES), None)
        responses[404] = _error(not_found, {"error": missing or "run: no run 'run_20260101_120000_nobody'"})
    if conflict:
        responses[409] = _error(conflict, {"error": conflict_example or CAPACITY_EXAMPLE})
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
        examples=list(examples),
    )


def body_example(name: str, summary: str, value: Any) -> OpenApiExample:
    """A request body to start from: what "Try it out" fills in."""
    return OpenApiExample(name, summary=summary, value=value, request_only=True)
