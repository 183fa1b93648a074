"""Typed values of the judging room: a rubric and its scales as the importer, the judge and the statistics read them."""

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Scale:
    """A dimension's scale: ordered levels, worst first; a level's score is its index (higher is better).

    An integer range 1-10 has levels "1".."10" and scores 0..9; categories listed best first in the
    rubric ("Yes", "To some extent", "No") become levels worst first, so "No" scores 0 and "Yes" 2.
    """

    levels: tuple[str, ...]
    """Worst first."""
    integer: bool
    aliases: tuple[tuple[str, str], ...] = ()
    """(other spelling, level)."""

    @property
    def size(self) -> int:
        return len(self.levels)

    def allowed(self) -> str:
        if self.integer:
            return f"an integer from {self.levels[0]} to {self.levels[-1]}"
        return ", ".join(repr(level) for level in reversed(self.levels))

    def level_of(self, value: Any) -> str | None:
        """The level a label means (an integer, a category or one of its aliases, case and spacing ignored), else None."""
        if self.integer:
            if isinstance(value, bool):
                return None
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            text = str(value).strip()
            return text if text.lstrip("-").isdigit() and str(int(text)) in self.levels else None
        wanted = " ".join(str(value).split()).casefold()
        for level in self.levels:
            if level.casefold() == wanted:
                return level
        for alias, level in self.aliases:
            if alias.casefold() == wanted:
                return level
        return None

    def score_of(self, level: str) -> int:
        if self.integer:
            return self.levels.index(str(int(level)))
        return self.levels.index(level)

    def level_at(self, score: int) -> str:
        return self.levels[max(0, min(self.size - 1, score))]


@dataclass(frozen=True)
class DimensionSpec:
    """One dimension of a rubric, with its database id."""

    id: int
    name: str
    question: str
    scale: Scale
    anchors: tuple[tuple[str, str], ...] = ()
    """(level or level range as written in the rubric, what it means), in the rubric's order."""


@dataclass(frozen=True)
class RubricSpec:
    """A rubric as the judge and the statistics read it, built once from its rows."""

    id: int
    slug: str
    name: str
    version: int
    unit: str
    judge_prompt: str
    dimensions: tuple[DimensionSpec, ...] = field(default=())

    def dimension(self, name: str) -> DimensionSpec | None:
        return next((d for d in self.dimensions if d.name == name), None)

    def fingerprint(self) -> str:
        """A hash of everything in the rubric that a judge reads."""
        body = [
            self.slug,
            self.version,
            self.unit,
            self.judge_prompt,
            [(d.name, d.question, d.scale.levels, d.anchors) for d in self.dimensions],
        ]
        return hashlib.sha256(json.dumps(body).encode()).hexdigest()


def scale_from_row(kind: str, minimum: int | None, maximum: int | None, categories: list[Any], aliases: Any) -> Scale:
    if kind == "integer":
        low, high = int(minimum if minimum is not None else 1), int(maximum if maximum is not None else 10)
        return Scale(tuple(str(v) for v in range(low, high + 1)), integer=True)
    return Scale(
        tuple(str(c) for c in reversed(categories)),
        integer=False,
        aliases=tuple((str(k), str(v)) for k, v in (aliases or {}).items()),
    )


def rubric_spec(rubric: Any) -> RubricSpec:
    """From a Rubric row (its dimensions are read once here)."""
    return RubricSpec(
        id=rubric.pk,
        slug=rubric.slug,
        name=rubric.name,
        version=rubric.version,
        unit=rubric.unit,
        judge_prompt=rubric.judge_prompt,
        dimensions=tuple(
            DimensionSpec(
                id=d.pk,
                name=d.name,
                question=d.question,
                scale=scale_from_row(d.scale_kind, d.scale_min, d.scale_max, d.categories, d.aliases),
                anchors=tuple((str(k), str(v)) for k, v in (d.anchors or {}).items()),
            )
            for d in rubric.dimensions.order_by("position", "id")
        ),
    )
