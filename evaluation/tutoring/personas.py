"""Student personas: validation against personas/schema.json, and the file <-> record mapping."""

import json
from functools import cache
from pathlib import Path
from typing import Any

from evaluation.conf import setting
from evaluation.errors import FieldProblem
from evaluation.jsonschema_errors import schema_problems

KNOWN_KEYS = (
    "persona_id",
    "name",
    "grade",
    "age",
    "description",
    "correct_answer_probability",
    "personality_traits",
    "common_mistakes",
    "response_style",
    "behavioral_notes",
    "persona_specific_behaviors",
    "grounding",
)


@cache
def persona_schema() -> dict[str, Any]:
    return json.loads((Path(setting("PERSONAS_DIR")) / "schema.json").read_text())


def validate_persona(data: Any, *, file: str = "") -> list[FieldProblem]:
    """Every way data fails to be a persona, each naming its field."""
    return schema_problems(persona_schema(), data, file=file)


def split_known(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fields we store in columns, every other key kept as extra)."""
    known = {k: data[k] for k in KNOWN_KEYS if k in data}
    extra = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
    return known, extra


def persona_as_dict(persona: Any) -> dict[str, Any]:
    """The persona as its file holds it: known fields in the usual order, then the unknown keys."""
    data: dict[str, Any] = {}
    for key in KNOWN_KEYS:
        value = getattr(persona, key)
        if (key == "age" and value is None) or (key == "grounding" and not value):
            continue
        data[key] = value
    data.update(persona.extra or {})
    return data
