"""Judging's reads: rubrics and their scales, items to label, the judge card's numbers."""

from typing import Any

import numpy as np

from evaluation.judging import agreement
from evaluation.judging.values import rubric_spec, scale_from_row
from evaluation.models import (
    Annotation,
    CanarySet,
    Item,
    JudgeConfiguration,
    JudgeScore,
    Rubric,
    RubricDimension,
    Transcript,
)


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
    """Each item with one row per dimension that people labelled or a judge scored: the labels, the scores."""
    out = []
    items = transcript.items.prefetch_related(
        "annotations__dimension", "judge_scores__dimension", "judge_scores__configuration"
    )
    for item in items:
        rows: dict[int, dict[str, Any]] = {}
        for a in item.annotations.all():
            rows.setdefault(a.dimension_id, {"dimension": a.dimension, "labels": [], "scores": []})["labels"].append(a)
        for score in item.judge_scores.all():
            row = rows.setdefault(score.dimension_id, {"dimension": score.dimension, "labels": [], "scores": []})
            row["scores"].append(score)
        ordered = sorted(rows.values(), key=lambda r: (r["dimension"].rubric_id, r["dimension"].position))
        for row in ordered:
            row["labels"].sort(key=lambda a: a.annotator)
            row["scores"].sort(key=lambda sc: (sc.configuration_id, sc.repeat))
        out.append({"item": item, "rows": ordered})
    return out


def _scores_by_dimension(configuration_id: int, item_ids: set[int] | None = None) -> dict[int, dict[int, list[int]]]:
    """dimension id -> item id -> the judge's values over repeats."""
    rows = JudgeScore.objects.filter(configuration_id=configuration_id)
    if item_ids is not None:
        rows = rows.filter(item_id__in=item_ids)
    out: dict[int, dict[int, list[int]]] = {}
    for item, dimension, score in (
        rows.order_by("repeat").values_list("item_id", "dimension_id", "score").iterator(chunk_size=5000)
    ):
        out.setdefault(dimension, {}).setdefault(item, []).append(int(score))
    return out


def _labels_by_dimension(rubric_id: int) -> dict[int, dict[int, dict[str, int]]]:
    """dimension id -> item id -> annotator -> value."""
    out: dict[int, dict[int, dict[str, int]]] = {}
    rows = Annotation.objects.filter(dimension__rubric_id=rubric_id).values_list(
        "item_id", "dimension_id", "annotator", "score"
    )
    for item, dimension, annotator, score in rows.iterator(chunk_size=5000):
        out.setdefault(dimension, {}).setdefault(item, {})[annotator] = int(score)
    return out


def agreement_table(configuration: JudgeConfiguration, *, epsilon: float | None = None) -> agreement.AgreementTable:
    """epsilon: the alternative annotator test's (default: the ALT_TEST_EPSILON setting)."""
    spec = rubric_spec(configuration.rubric)
    judged = _scores_by_dimension(configuration.pk)
    labels = _labels_by_dimension(spec.id)
    rows = tuple(
        agreement.dimension_agreement(
            d.name, d.scale.levels, judged.get(d.id, {}), labels.get(d.id, {}), epsilon=epsilon
        )
        for d in spec.dimensions
    )
    items = {i for per in judged.values() for i in per}
    repeats = max((len(v) for per in judged.values() for v in per.values()), default=0)
    return agreement.AgreementTable(
        rubric=spec.slug,
        rubric_version=configuration.rubric_version,
        configuration=configuration.key,
        configuration_id=configuration.pk,
        items=len(items),
        repeats=repeats,
        rows=rows,
        canary=canary_change(configuration, spec, labels),
    )


def canary_change(
    configuration: JudgeConfiguration, spec: Any, labels: dict[int, dict[int, dict[str, int]]]
) -> agreement.CanaryChange | None:
    """Agreement on the rubric's canary set under the configuration judged before this one, and under this one."""
    canary = CanarySet.objects.filter(rubric_id=spec.id).order_by("-created_at").first()
    if canary is None:
        return None
    items = set(canary.items.values_list("pk", flat=True))
    previous = (
        JudgeConfiguration.objects.filter(
            rubric_id=spec.id, created_at__lt=configuration.created_at, scores__item_id__in=items
        )
        .exclude(pk=configuration.pk)
        .order_by("-created_at")
        .first()
    )
    if previous is None or not items:
        return None
    before, after = _scores_by_dimension(previous.pk, items), _scores_by_dimension(configuration.pk, items)
    shifts = []
    for d in spec.dimensions:
        people = {i: v for i, v in labels.get(d.id, {}).items() if i in items}
        pair = []
        for judged in (before.get(d.id, {}), after.get(d.id, {})):
            shared = sorted(set(judged) & set(people))
            pair.append(
                agreement.judge_vs_humans(
                    np.array([agreement.lower_median(judged[i]) for i in shared], dtype=np.int64),
                    np.array([agreement.lower_median(list(people[i].values())) for i in shared], dtype=np.int64),
                    d.scale.size,
                )
            )
        shifts.append(agreement.CanaryShift(d.name, pair[0], pair[1]))
    return agreement.CanaryChange(canary.name, previous.key, len(items), tuple(shifts))


def configurations(rubric: str) -> list[JudgeConfiguration]:
    return list(JudgeConfiguration.objects.filter(rubric__slug=rubric).select_related("rubric").order_by("-created_at"))


def items_get(ids: list[int]) -> dict[int, Item]:
    return {i.pk: i for i in Item.objects.filter(pk__in=ids).select_related("transcript")}


def table_as_dict(table: agreement.AgreementTable) -> dict[str, Any]:
    """The numbers of one judge card, as the API returns them."""

    def jvh(x: agreement.JudgeVsHumans) -> dict[str, Any]:
        return {
            "kappa_quadratic": x.kappa.as_dict(),
            "spearman_rho": x.rho.as_dict(),
            "exact": x.exact.as_dict(),
            "within_one": x.within_one.as_dict(),
        }

    return {
        "rubric": table.rubric,
        "rubric_version": table.rubric_version,
        "configuration": table.configuration,
        "configuration_id": table.configuration_id,
        "items": table.items,
        "repeats": table.repeats,
        "dimensions": [
            {
                "dimension": row.dimension,
                "levels": list(row.levels),
                "judge_vs_humans": {
                    **jvh(row.judge_vs_humans),
                    "confusion": [list(r) for r in row.judge_vs_humans.confusion],
                },
                "humans_alpha": row.humans.as_dict() if row.humans else None,
                "self_consistency_alpha": row.self_consistency.as_dict() if row.self_consistency else None,
                "human_ceiling": row.ceiling.as_dict(),
                "disagreements": [{"item": i, "judge": j, "humans": h} for i, j, h in row.disagreements],
            }
            for row in table.rows
        ],
        "canary": None
        if table.canary is None
        else {
            "canary": table.canary.canary,
            "previous": table.canary.previous,
            "items": table.canary.items,
            "dimensions": [
                {"dimension": s.dimension, "before": jvh(s.before), "after": jvh(s.after)} for s in table.canary.shifts
            ],
        },
    }


def rubrics_with_configurations() -> list[dict[str, Any]]:
    """Each rubric with its judge configurations (newest first) and how many items each judged."""
    from django.db.models import Count

    out = []
    for rubric in Rubric.objects.order_by("slug"):
        configs = (
            JudgeConfiguration.objects.filter(rubric=rubric)
            .annotate(n_items=Count("scores__item", distinct=True))
            .order_by("-created_at")
        )
        labelled = Annotation.objects.filter(dimension__rubric=rubric).values("item").distinct().count()
        out.append({"rubric": rubric, "configurations": list(configs), "labelled_items": labelled})
    return out


def run_labels(run: Any, user: Any, rubric: str = "tutor-session") -> dict[str, Any] | None:
    """The labelling form of a run's report: each dimension with its levels, the user's label and the others'."""
    found = Rubric.objects.filter(slug=rubric).first()
    if found is None:
        return None
    item = Item.objects.filter(transcript__source="run", transcript__external_id=run.run_id, key="").first()
    labels: dict[int, list[Any]] = {}
    if item is not None:
        for a in item.annotations.filter(dimension__rubric=found).order_by("annotator"):
            labels.setdefault(a.dimension_id, []).append(a)
    name = user.get_username()
    rows = []
    for dim in found.dimensions.order_by("position"):
        mine = next((a.value for a in labels.get(dim.pk, []) if a.annotator == name), "")
        others = [(a.annotator, a.value) for a in labels.get(dim.pk, []) if a.annotator != name]
        rows.append({"dimension": dim, "levels": scale_levels(dim), "mine": mine, "others": others})
    return {"rubric": found, "rows": rows, "item": item}
