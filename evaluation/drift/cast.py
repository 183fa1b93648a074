"""Cast files (character agents): validated against cast/schema.json, unknown keys kept with a warning."""

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from evaluation.conf import setting
from evaluation.errors import FieldProblem
from evaluation.jsonschema_errors import schema_problems

CAST_KEYS = ("id", "display_name", "persona_spec")


@cache
def cast_schema() -> dict[str, Any]:
    return json.loads((Path(setting("CAST_DIR")) / "schema.json").read_text())


@dataclass(frozen=True)
class CastMember:
    """One character agent as its file describes it."""

    id: str
    display_name: str
    persona_spec: str
    extra: dict[str, Any] = field(default_factory=dict)
    """Every other key (setting, nudge, sample_lines, ...), kept."""
    warnings: tuple[str, ...] = ()


def parse_cast(data: Any, *, file: str = "") -> tuple[CastMember | None, list[FieldProblem]]:
    """(the member, []) or (None, every problem, each naming file, path and reason)."""
    schema = cast_schema()
    problems = schema_problems(schema, data, file=file)
    if problems:
        return None, problems
    extra = {k: v for k, v in data.items() if k not in CAST_KEYS}
    warnings = tuple(f"{file}: unknown key {key!r} kept" for key in extra if key not in schema["properties"])
    return CastMember(data["id"], data["display_name"], data["persona_spec"], extra, warnings), []
