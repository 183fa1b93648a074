"""Judging's reads: rubrics and their scales, items to label, the judge card's numbers."""

from typing import Any

from evaluation.judging.values import scale_from_row
from evaluation.models import Item, JudgeConfiguration, RubricDimension, Transcript


def scale_levels(dimension: RubricDimension) -> list[str]:
    """A dimension's levels, best first, as people pick them."""
    scale = scale_from_row(
        dimension.scale_kind, dimension.scale_min, dimension.scale_max, dimension.categories, dimension.aliases
    )
    return list(reversed(scale.levels))


def dimensions_for_item(item: Item) -> list[RubricDimension]:
    """The dimensions of every rubric that judges this kind of item (a whole conversation or a response)."""
    unit = "response" if item.key else "session"
    return list(
        RubricDimension.objects.filter(rubric__unit=unit).select_related("rubric").order_by("rubric__slug", "position")
    )


def configuration_get(pk: int) -> JudgeConfiguration | None:
    return JudgeConfiguration.objects.select_related("rubric").filter(pk=pk).first()


def transcript_get(pk: int) -> Transcript | None:
    return Transcript.objects.select_related("topic").filter(pk=pk).first()


def transcript_items(transcript: Transcript) -> list[dict[str, Any]]:
    """Each item with its labels and the judge's values, for the transcript page."""
    out = []
    for item in transcript.items.prefetch_related(
        "annotations__dimension", "judge_scores__dimension", "judge_scores__configuration"
    ):
        out.append(
            {
                "item": item,
                "labels": sorted(item.annotations.all(), key=lambda a: (a.dimension.position, a.annotator)),
                "scores": sorted(
                    item.judge_scores.all(), key=lambda s: (s.configuration_id, s.dimension.position, s.repeat)
                ),
            }
        )
    return out
