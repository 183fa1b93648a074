"""Rubric documents (rubrics/*.json): their checks and the rows they become. The shipped ones load in migration 0008."""

from pathlib import Path
from typing import Any

from evaluation.errors import FieldProblem

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "rubrics"
"""tutor-session.json (spec 001's five dimensions, 1-10) and tutor-response.json (MRBench's eight, categories)."""
UNITS = ("session", "response")


def rubric_problems(doc: Any, *, file: str = "") -> list[FieldProblem]:
    """Every problem with a rubric document, each naming its field."""
    if not isinstance(doc, dict):
        return [FieldProblem("(document)", "must be a JSON object", file)]
    problems = []
    for key in ("slug", "name", "judge_prompt"):
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            problems.append(FieldProblem(key, "is required (a non-empty string)", file))
    if doc.get("unit", "session") not in UNITS:
        problems.append(FieldProblem("unit", f"must be one of {', '.join(UNITS)}", file))
    if isinstance(doc.get("judge_prompt"), str) and "{dimensions}" not in doc["judge_prompt"]:
        problems.append(FieldProblem("judge_prompt", "must contain {dimensions}, where the scales go", file))
    dims = doc.get("dimensions")
    if not isinstance(dims, list) or not dims:
        return [*problems, FieldProblem("dimensions", "must be a non-empty list", file)]
    names = set()
    for i, dim in enumerate(dims):
        where = f"dimensions[{i}]"
        if not isinstance(dim, dict) or not isinstance(dim.get("name"), str) or not dim["name"]:
            problems.append(FieldProblem(f"{where}.name", "is required", file))
            continue
        if dim["name"] in names:
            problems.append(FieldProblem(f"{where}.name", f"{dim['name']!r} is named twice", file))
        names.add(dim["name"])
        scale = dim.get("scale") or {}
        cats = scale.get("categories")
        if cats is not None:
            if not isinstance(cats, list) or len(cats) < 2 or len(set(map(str, cats))) != len(cats):
                problems.append(
                    FieldProblem(f"{where}.scale.categories", "needs two or more distinct categories", file)
                )
        elif not (
            isinstance(scale.get("min"), int) and isinstance(scale.get("max"), int) and scale["min"] < scale["max"]
        ):
            problems.append(
                FieldProblem(f"{where}.scale", 'needs {"min": int, "max": int} with min < max, or "categories"', file)
            )
    return problems


def rubric_rows(doc: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the Rubric's fields, each RubricDimension's fields) for a checked document."""
    rubric = {
        "name": doc["name"],
        "version": int(doc.get("version", 1)),
        "unit": doc.get("unit", "session"),
        "description": doc.get("description", ""),
        "judge_prompt": doc["judge_prompt"],
    }
    dims = []
    for position, dim in enumerate(doc["dimensions"]):
        scale = dim.get("scale") or {}
        cats = scale.get("categories")
        dims.append(
            {
                "name": dim["name"],
                "position": position,
                "question": dim.get("question", ""),
                "scale_kind": "categories" if cats is not None else "integer",
                "scale_min": None if cats is not None else scale["min"],
                "scale_max": None if cats is not None else scale["max"],
                "categories": [str(c) for c in cats] if cats is not None else [],
                "aliases": dict(dim.get("aliases") or {}),
                "anchors": dict(dim.get("anchors") or {}),
            }
        )
    return rubric, dims
