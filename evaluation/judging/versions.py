"""Rubric versions as values: the snapshot a version records, its hash, the spec it reads labels with, and
which dimensions two versions share unchanged (so a label of one may be read under the other)."""

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from evaluation.judging.values import DimensionSpec, RubricSpec, scale_from_row

SNAPSHOT_FIELDS = (
    "name",
    "position",
    "question",
    "scale_kind",
    "scale_min",
    "scale_max",
    "categories",
    "aliases",
    "anchors",
)
"""What a version records of each dimension, besides its id."""
MEANING_FIELDS = ("name", "question", "levels", "anchors")
"""What a label's meaning rests on: a dimension whose name, question, levels and anchors did not change reads
the same under both versions. Its position and its aliases (other spellings) do not change what a label says."""


def snapshot(dimensions: Iterable[Any]) -> list[dict[str, Any]]:
    """Each dimension row (RubricDimension, or its historical model in a migration) as a version records it."""
    rows = sorted(dimensions, key=lambda d: (d.position, d.pk))
    return [{"id": d.pk, **{name: getattr(d, name) for name in SNAPSHOT_FIELDS}} for d in rows]


def content_hash(unit: str, dimensions: list[dict[str, Any]]) -> str:
    """A version's content: its unit and its dimensions, as recorded."""
    body = json.dumps([unit, dimensions], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def dimension_spec(recorded: dict[str, Any]) -> DimensionSpec:
    return DimensionSpec(
        id=int(recorded["id"]),
        name=str(recorded["name"]),
        question=str(recorded.get("question") or ""),
        scale=scale_from_row(
            str(recorded.get("scale_kind") or "integer"),
            recorded.get("scale_min"),
            recorded.get("scale_max"),
            list(recorded.get("categories") or []),
            recorded.get("aliases") or {},
        ),
        anchors=tuple((str(k), str(v)) for k, v in (recorded.get("anchors") or {}).items()),
    )


def version_spec(rubric: Any, version: Any) -> RubricSpec:
    """The rubric as it was at `version` (a RubricVersion): its scales read the labels and scores made under it."""
    return RubricSpec(
        id=rubric.pk,
        slug=rubric.slug,
        name=rubric.name,
        version=version.number,
        unit=version.unit,
        judge_prompt=rubric.judge_prompt,
        dimensions=tuple(dimension_spec(d) for d in version.dimensions),
    )


def meaning(dimension: DimensionSpec) -> tuple[Any, ...]:
    """What must be equal for a label of this dimension to mean the same under two versions."""
    return (dimension.name, dimension.question, dimension.scale.levels, dimension.anchors)


def scale_summary(dimension: DimensionSpec) -> str:
    """A dimension's scale in a few words: `1-10`, or the categories best first."""
    levels = dimension.scale.levels
    if dimension.scale.integer:
        return f"{levels[0]}-{levels[-1]}"
    return " / ".join(reversed(levels))
