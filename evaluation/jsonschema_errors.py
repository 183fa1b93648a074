"""Turn jsonschema's errors into FieldProblems that name the field the way a person would."""

from typing import Any

from jsonschema import Draft202012Validator

from evaluation.errors import FieldProblem


def schema_problems(schema: dict[str, Any], data: Any, *, file: str = "") -> list[FieldProblem]:
    """Validate data against schema; one problem per error, sorted by field."""
    problems = []
    for error in Draft202012Validator(schema).iter_errors(data):
        path = [str(p) for p in error.absolute_path]
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else ""
            path.append(missing)
            reason = "is required"
        elif error.validator in ("minimum", "maximum"):
            side = "at least" if error.validator == "minimum" else "at most"
            reason = f"{error.instance!r} is out of range ({side} {error.validator_value})"
        elif error.validator == "type":
            reason = f"{error.instance!r} should be of type {error.validator_value}"
        else:
            reason = error.message
        problems.append(FieldProblem(field=".".join(path) or "(document)", reason=reason, file=file))
    return sorted(problems, key=lambda p: p.field)
