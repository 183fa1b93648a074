"""Tutoring topics: validation and the file <-> record mapping."""

from typing import Any

from evaluation.errors import FieldProblem
from evaluation.jsonschema_errors import schema_problems

TOPIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["topic_id", "name", "grade"],
    "properties": {
        "topic_id": {"type": "string", "pattern": "^[a-z0-9_-]+$"},
        "name": {"type": "string", "minLength": 1},
        "grade": {"type": "integer", "minimum": 1, "maximum": 12},
        "subject": {"type": "string"},
        "description": {"type": "string"},
        "learning_objectives": {"type": "array", "items": {"type": "string"}},
        "common_misconceptions": {"type": "array", "items": {"type": "string"}},
        "approved": {"type": "boolean"},
    },
}
KNOWN_KEYS = tuple(TOPIC_SCHEMA["properties"])


def validate_topic(data: Any, *, file: str = "") -> list[FieldProblem]:
    return schema_problems(TOPIC_SCHEMA, data, file=file)


def topic_as_dict(topic: Any) -> dict[str, Any]:
    data = {key: getattr(topic, key) for key in KNOWN_KEYS}
    data.update(topic.extra or {})
    return data
