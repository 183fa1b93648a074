"""Judging's reads: rubrics and their scales, items to label, the judge card's numbers."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from evaluation.judging import agreement, probes, versions
from evaluation.judging.values import RubricSpec, rubric_spec, scale_from_row
from evaluation.models import (
    Annotation,
    CanarySet,
    Item,
    JudgeConfiguration,
    JudgeScore,
    Rubric,
    RubricDimension,
    RubricVersion,
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
    """Each item with one row per rubric version and dimension that people labelled or a judge scored under:
    the labels, the scores (values of two versions' scales never share a row)."""
    out = []
    items = transcript.items.prefetch_related(
        "annotations__dimension",
        "annotations__rubric_version",
        "judge_scores__dimension",
        "judge_scores__configuration",
    )
    for item in items:
        rows: dict[tuple[int, int], dict[str, Any]] = {}
        entries: list[tuple[RubricDimension, int, str, Any]] = [
            (a.dimension, a.rubric_version.number, "labels", a) for a in item.annotations.all()
        ]
        entries += [(sc.dimension, sc.configuration.rubric_version, "scores", sc) for sc in item.judge_scores.all()]
        for dimension, version, kind, entry in entries:
            rows.setdefault(
                (version, dimension.pk),
                {
                    "dimension": dimension,
                    "version": version,
                    "current": version == dimension.rubric.version,
                    "labels": [],
                    "scores": [],
                },
            )[kind].append(entry)
        ordered = sorted(
            rows.values(), key=lambda r: (r["dimension"].rubric_id, -r["version"], r["dimension"].position)
        )
        for found in ordered:
            found["labels"].sort(key=lambda a: a.annotator)
            found["scores"].sort(key=lambda sc: (sc.configuration_id, sc.repeat))
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


@dataclass(frozen=True)
class VersionedTable(agreement.AgreementTable):
    """One configuration's agreement table, read against the rubric version it judged under: that version's
    scales, the configuration's scores, and the labels whose dimension means the same under that version (same
    name, question, levels and anchors), whichever version they were made under; a person's newest such label
    counts. Values from two different scales are never put in one table."""

    current_version: int = 0
    """The rubric's current version; rubric_version (the table's) may be older."""
    scales: tuple[tuple[str, str], ...] = ()
    """(dimension, its scale under rubric_version): `1-10`, or the categories best first."""
    off_scale: int = 0
    """Stored labels or scores outside that version's scale, left out (only rows written outside the app)."""


def _versions(rubric_id: int) -> list[RubricVersion]:
    return list(RubricVersion.objects.filter(rubric_id=rubric_id).order_by("number"))


def _spec_at(rubric: Rubric, number: int, recorded: list[RubricVersion]) -> RubricSpec:
    """The rubric as it was at version `number`; where that number was never recorded, the newest record
    (values off its scale are then left out and counted), else the rows as they are."""
    version = next((v for v in recorded if v.number == number), None) or (recorded[-1] if recorded else None)
    return versions.version_spec(rubric, version) if version is not None else rubric_spec(rubric)


def _on_scale(values: dict[int, dict[int, list[int]]], spec: RubricSpec) -> tuple[dict[int, dict[int, list[int]]], int]:
    """The judge's values that are places on their dimension's scale under spec, and how many were not."""
    sizes = {d.id: d.scale.size for d in spec.dimensions}
    out: dict[int, dict[int, list[int]]] = {}
    off = 0
    for dimension, per_item in values.items():
        if dimension not in sizes:
            continue
        for item, found in per_item.items():
            kept = [v for v in found if 0 <= v < sizes[dimension]]
            off += len(found) - len(kept)
            if kept:
                out.setdefault(dimension, {})[item] = kept
    return out, off


def _labels_by_dimension(
    spec: RubricSpec, recorded: list[RubricVersion]
) -> tuple[dict[int, dict[int, dict[str, int]]], int]:
    """dimension id -> item id -> annotator -> value, for the labels that read the same under spec (see
    VersionedTable); and how many of those were off the scale."""
    wanted = {d.id: versions.meaning(d) for d in spec.dimensions}
    sizes = {d.id: d.scale.size for d in spec.dimensions}
    compatible: dict[int, set[int]] = {}
    number = {v.pk: v.number for v in recorded}
    for version in recorded:
        for then in map(versions.dimension_spec, version.dimensions):
            if wanted.get(then.id) == versions.meaning(then):
                compatible.setdefault(then.id, set()).add(version.pk)
    out: dict[int, dict[int, dict[str, int]]] = {}
    newest: dict[tuple[int, int, str], int] = {}
    off = 0
    rows = Annotation.objects.filter(dimension_id__in=list(wanted)).values_list(
        "item_id", "dimension_id", "annotator", "score", "rubric_version_id"
    )
    for item, dimension, annotator, score, version_id in rows.iterator(chunk_size=5000):
        if version_id not in compatible.get(dimension, ()):
            continue
        value = int(score)
        if not 0 <= value < sizes[dimension]:
            off += 1
            continue
        if newest.get((dimension, item, annotator), 0) > number[version_id]:
            continue
        newest[(dimension, item, annotator)] = number[version_id]
        out.setdefault(dimension, {}).setdefault(item, {})[annotator] = value
    return out, off


def agreement_table(configuration: JudgeConfiguration, *, epsilon: float | None = None) -> VersionedTable:
    """epsilon: the alternative annotator test's (default: the ALT_TEST_EPSILON setting)."""
    rubric = configuration.rubric
    recorded = _versions(rubric.pk)
    spec = _spec_at(rubric, configuration.rubric_version, recorded)
    judged, off_judged = _on_scale(_scores_by_dimension(configuration.pk), spec)
    labels, off_labels = _labels_by_dimension(spec, recorded)
    rows = tuple(
        agreement.dimension_agreement(
            d.name, d.scale.levels, judged.get(d.id, {}), labels.get(d.id, {}), epsilon=epsilon
        )
        for d in spec.dimensions
    )
    items = {i for per in judged.values() for i in per}
    repeats = max((len(v) for per in judged.values() for v in per.values()), default=0)
    return VersionedTable(
        rubric=spec.slug,
        rubric_version=configuration.rubric_version,
        configuration=configuration.key,
        configuration_id=configuration.pk,
        items=len(items),
        repeats=repeats,
        rows=rows,
        canary=canary_change(configuration, spec, labels, recorded),
        current_version=rubric.version,
        scales=tuple((d.name, versions.scale_summary(d)) for d in spec.dimensions),
        off_scale=off_judged + off_labels,
    )


def canary_change(
    configuration: JudgeConfiguration,
    spec: RubricSpec,
    labels: dict[int, dict[int, dict[str, int]]],
    recorded: list[RubricVersion],
) -> agreement.CanaryChange | None:
    """Agreement on the rubric's canary set under the configuration judged before this one, and under this one,
    on each dimension that means the same under both configurations' rubric versions."""
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
    earlier = _spec_at(configuration.rubric, previous.rubric_version, recorded)
    before, _ = _on_scale(_scores_by_dimension(previous.pk, items), earlier)
    after, _ = _on_scale(_scores_by_dimension(configuration.pk, items), spec)
    shifts = []
    for d in spec.dimensions:
        then = next((e for e in earlier.dimensions if e.id == d.id), None)
        if then is None or versions.meaning(then) != versions.meaning(d):
            continue  # a changed scale or question: the two judges did not answer the same question
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
    if not shifts:
        return None
    return agreement.CanaryChange(canary.name, previous.key, len(items), tuple(shifts))


def configurations(rubric: str) -> list[JudgeConfiguration]:
    """The rubric's judge configurations, grouped by the rubric version they judged under (newest version
    first), newest first within a version."""
    return list(
        JudgeConfiguration.objects.filter(rubric__slug=rubric)
        .select_related("rubric")
        .order_by("-rubric_version", "-created_at")
    )


@dataclass(frozen=True)
class VersionSummary:
    """One recorded version of a rubric, as the judge card, the API and the index list it."""

    number: int
    current: bool
    created_at: datetime
    scales: tuple[tuple[str, str], ...]
    """(dimension, its scale): `1-10`, or the categories best first."""
    changed: tuple[str, ...]
    """Dimensions whose name, question, levels or anchors differ from the version before (or are new)."""
    labels: int
    """Labels made under this version."""
    configurations: tuple[tuple[int, str], ...]
    """(id, key) of each judge configuration that judged under it, newest first."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.number,
            "current": self.current,
            "created_at": self.created_at.isoformat(),
            "scales": [{"dimension": name, "scale": scale} for name, scale in self.scales],
            "changed": list(self.changed),
            "labels": self.labels,
            "configurations": [{"id": pk, "key": key} for pk, key in self.configurations],
        }


def version_scales(version: RubricVersion) -> list[dict[str, str]]:
    """Each dimension of a recorded version with its scale: `1-10`, or the categories best first."""
    return [
        {"dimension": d.name, "scale": versions.scale_summary(d)}
        for d in map(versions.dimension_spec, version.dimensions)
    ]


def rubric_versions(rubric: Rubric) -> list[VersionSummary]:
    """Every recorded version of the rubric, newest first."""
    from django.db.models import Count

    recorded = _versions(rubric.pk)
    counts = dict(
        Annotation.objects.filter(rubric_version__rubric=rubric)
        .values_list("rubric_version_id")
        .annotate(n=Count("id"))
        .values_list("rubric_version_id", "n")
    )
    judged: dict[int, list[tuple[int, str]]] = {}
    for pk, key, number in (
        JudgeConfiguration.objects.filter(rubric=rubric)
        .order_by("-created_at")
        .values_list("pk", "key", "rubric_version")
    ):
        judged.setdefault(number, []).append((pk, key))
    out = []
    before: dict[int, Any] = {}
    for version in recorded:
        spec = versions.version_spec(rubric, version)
        meanings = {d.id: versions.meaning(d) for d in spec.dimensions}
        out.append(
            VersionSummary(
                number=version.number,
                current=version.number == rubric.version,
                created_at=version.created_at,
                scales=tuple((d.name, versions.scale_summary(d)) for d in spec.dimensions),
                changed=tuple(d.name for d in spec.dimensions if before and before.get(d.id) != meanings[d.id]),
                labels=counts.get(version.pk, 0),
                configurations=tuple(judged.get(version.number, ())),
            )
        )
        before = meanings
    return out[::-1]


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

    scales = dict(getattr(table, "scales", ()))
    return {
        "rubric": table.rubric,
        "rubric_version": table.rubric_version,
        "current_version": getattr(table, "current_version", table.rubric_version),
        "off_scale": getattr(table, "off_scale", 0),
        "configuration": table.configuration,
        "configuration_id": table.configuration_id,
        "items": table.items,
        "repeats": table.repeats,
        "dimensions": [
            {
                "dimension": row.dimension,
                "scale": scales.get(row.dimension, ""),
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
    """Each rubric with its versions (newest first), each with its judge configurations (newest first), how
    many items each judged, and how many items people labelled under it."""
    from django.db.models import Count

    out = []
    for rubric in Rubric.objects.order_by("slug"):
        configs = (
            JudgeConfiguration.objects.filter(rubric=rubric)
            .annotate(n_items=Count("scores__item", distinct=True))
            .order_by("-rubric_version", "-created_at")
        )
        labelled = Annotation.objects.filter(dimension__rubric=rubric).values("item").distinct().count()
        by_version: dict[int, list[JudgeConfiguration]] = {}
        for config in configs:
            by_version.setdefault(config.rubric_version, []).append(config)
        groups = [
            {"number": v.number, "summary": v, "configurations": by_version.pop(v.number, [])}
            for v in rubric_versions(rubric)
        ]
        # a configuration naming a version never recorded still shows, under its own number
        groups += [{"number": n, "summary": None, "configurations": c} for n, c in sorted(by_version.items())]
        out.append({"rubric": rubric, "configurations": list(configs), "versions": groups, "labelled_items": labelled})
    return out


def run_labels(run: Any, user: Any, rubric: str = "tutor-session") -> dict[str, Any] | None:
    """The labelling form of a run's report: each dimension with its levels, the user's label and the others',
    under the rubric's current version (labels made under an earlier one are not shown as the current)."""
    found = Rubric.objects.filter(slug=rubric).first()
    if found is None:
        return None
    item = Item.objects.filter(transcript__source="run", transcript__external_id=run.run_id, key="").first()
    labels: dict[int, list[Any]] = {}
    if item is not None:
        for a in item.annotations.filter(
            dimension__rubric=found, rubric_version__number=found.version, rubric_version__rubric=found
        ).order_by("annotator"):
            labels.setdefault(a.dimension_id, []).append(a)
    name = user.get_username()
    rows = []
    for dim in found.dimensions.order_by("position"):
        mine = next((a.value for a in labels.get(dim.pk, []) if a.annotator == name), "")
        others = [(a.annotator, a.value) for a in labels.get(dim.pk, []) if a.annotator != name]
        rows.append({"dimension": dim, "levels": scale_levels(dim), "mine": mine, "others": others})
    return {"rubric": found, "rows": rows, "item": item}


def bias_probes(configuration: JudgeConfiguration) -> probes.ProbeTable:
    """The judge card's bias probes (probes.bias_probes), on the values its agreement table reads: the
    configuration's scores on the scales of the rubric version it judged under, and the labels that mean the
    same under that version."""
    rubric = configuration.rubric
    recorded = _versions(rubric.pk)
    spec = _spec_at(rubric, configuration.rubric_version, recorded)
    judged, _ = _on_scale(_scores_by_dimension(configuration.pk), spec)
    labels, _ = _labels_by_dimension(spec, recorded)
    gaps = {d.name: probes.gaps(judged.get(d.id, {}), labels.get(d.id, {})) for d in spec.dimensions}
    # subqueries rather than lists of ids: a large rubric's ids would pass SQLite's limit on parameters
    judged_items = JudgeScore.objects.filter(configuration=configuration).values("item_id")
    transcripts = {
        pk: (source, messages if isinstance(messages, list) else [])
        for pk, source, messages in Transcript.objects.filter(
            pk__in=Item.objects.filter(pk__in=judged_items).values("transcript_id")
        )
        .values_list("pk", "source", "messages")
        .iterator(chunk_size=500)
    }
    traits = {
        pk: probes.item_traits(
            unit=spec.unit, key=key, response=response, source=transcripts[t][0], messages=transcripts[t][1]
        )
        for pk, key, response, t in Item.objects.filter(pk__in=judged_items)
        .values_list("pk", "key", "response", "transcript_id")
        .iterator(chunk_size=2000)
    }
    return probes.bias_probes(gaps, traits)
