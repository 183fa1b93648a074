"""A tool module for the schema tests: string annotations, and parameter types beyond the basics."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

from pydantic import BaseModel, Field


class Unit(enum.Enum):
    METRIC = "metric"
    IMPERIAL = "imperial"


class Point(BaseModel):
    """A place on the map."""

    lat: float
    lon: float
    title: str = ""


def plan_route(
    stops: list[float],
    limit: int | None,
    mode: Literal["walk", "cycle"],
    unit: Unit,
    start: Point,
    note: Annotated[str, Field(description="Shown to the rider.")] = "",
) -> str:
    """Plan a route through the stops.

    This paragraph is for readers of the code, not for the model.

    Args:
        stops: Distances of the stops from the start.
        limit (int | None): The most stops to visit;
            null visits them all.
        mode: How to travel.
        unit: Units for the answer.
        start: Where the route begins.
        note: Loses to the Annotated description.

    Returns:
        A one-line summary.
    """
    kept = stops if limit is None else stops[:limit]
    total = sum(kept)
    return f"{mode} {len(kept)} stops, {total:g} {unit.value} units from {start.lat:g},{start.lon:g}{note}"


TOOLS = [plan_route]
