"""Judging's reads: rubrics and their scales, items to label, the judge card's numbers."""

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.errors import FieldProblem, InvalidInput, NotFound
from evaluation.judging import agreement, estimates, importing, probes, versions
from evaluation.judging.forecast import judging_forecast as judging_forecast  # the doors price a job here
from evaluation.judging.values import RubricSpec, rubric_spec, scale_from_row
from evaluation.models import (
    Adjudication,
    Annotation,
    CanarySet,
    DimensionScore,
    EvaluationRun,
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


def transcripts_read(path: Path, *, format: str = "auto", source: str = "") -> tuple[importing.ParsedTranscript, ...]:
    """The conversations a file holds, read as an import reads them (every problem refuses the file), not stored."""
    if not path.is_file():
        raise NotFound(f"{path}: no such file")
    if path.stat().st_size > importing.limit("IMPORT_MAX_FILE_BYTES"):
        raise importing.too_large(
            "", f"the file is {path.stat().st_size} bytes", "IMPORT_MAX_FILE_BYTES", file=str(path)
        )
    return importing.parse(path.read_bytes(), format=format, file=str(path), source=source).records


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


def _compatible(
    spec: RubricSpec, recorded: list[RubricVersion]
) -> tuple[dict[int, Any], dict[int, set[int]], dict[int, int]]:
    """Each dimension's meaning under spec; per dimension, the recorded versions (pks) under which it meant the
    same; and each version's number."""
    wanted = {d.id: versions.meaning(d) for d in spec.dimensions}
    compatible: dict[int, set[int]] = {}
    for version in recorded:
        for then in map(versions.dimension_spec, version.dimensions):
            if wanted.get(then.id) == versions.meaning(then):
                compatible.setdefault(then.id, set()).add(version.pk)
    return wanted, compatible, {v.pk: v.number for v in recorded}


def _adjudicated_by_dimension(spec: RubricSpec, recorded: list[RubricVersion]) -> dict[int, dict[int, int]]:
    """dimension id -> item id -> the adjudicated value, for adjudications made under a version where the
    dimension means the same as under spec (the newest such counts)."""
    wanted, compatible, number = _compatible(spec, recorded)
    sizes = {d.id: d.scale.size for d in spec.dimensions}
    out: dict[int, dict[int, int]] = {}
    newest: dict[tuple[int, int], int] = {}
    rows = Adjudication.objects.filter(dimension_id__in=list(wanted)).values_list(
        "item_id", "dimension_id", "score", "rubric_version_id"
    )
    for item, dimension, score, version_id in rows.iterator(chunk_size=5000):
        value = int(score)
        if version_id not in compatible.get(dimension, ()) or not 0 <= value < sizes[dimension]:
            continue
        if newest.get((dimension, item), 0) > number[version_id]:
            continue
        newest[(dimension, item)] = number[version_id]
        out.setdefault(dimension, {})[item] = value
    return out


def _labels_by_dimension(
    spec: RubricSpec, recorded: list[RubricVersion]
) -> tuple[dict[int, dict[int, dict[str, int]]], int]:
    """dimension id -> item id -> annotator -> value, for the labels that read the same under spec (see
    VersionedTable); and how many of those were off the scale."""
    wanted, compatible, number = _compatible(spec, recorded)
    sizes = {d.id: d.scale.size for d in spec.dimensions}
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
    settled = _adjudicated_by_dimension(spec, recorded)
    rows = tuple(
        agreement.dimension_agreement(
            d.name,
            d.scale.levels,
            judged.get(d.id, {}),
            labels.get(d.id, {}),
            epsilon=epsilon,
            settled=settled.get(d.id, {}),
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
                "adjudicated": row.adjudicated,
                "people_value": estimates.PEOPLE_VALUE,
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


PROBE_METHODS = {
    probes.OLS: "trend (least-squares slope)",
    probes.ANOVA: "difference between sources (one-way analysis of variance)",
}
"""How the judge card names each probe's method (the command and the API keep the library's names)."""


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


# --- corrected estimates (the statistics are estimates.py's; the reads are here) -------------------------

# The estimates' values, as the doors name them (a door reads a room through its selectors only).
Selection = estimates.Selection
EstimateTable = estimates.EstimateTable
MeanEstimate = estimates.MeanEstimate
DifferenceRow = estimates.DifferenceRow
Budget = estimates.Budget
GROUPINGS = estimates.GROUPINGS
PEOPLE_VALUE = estimates.PEOPLE_VALUE

RUN_SOURCE = "run"
"""The source of the transcripts made of this app's own runs (services.run_item)."""
RUNS_JUDGE = "runs-judge"
"""The prompt_hash of the configuration that holds the runs' own judge scores (services.run_item)."""


def _estimate_items(selection: estimates.Selection) -> set[int] | None:
    if selection == estimates.EVERYTHING:
        return None
    rows = Item.objects.all()
    if selection.source is not None:
        rows = rows.filter(transcript__source=selection.source)
    if selection.candidate is not None:
        rows = rows.filter(key=selection.candidate)
    if selection.group is not None:
        runs = EvaluationRun.objects.filter(group=selection.group).values_list("run_id", flat=True)
        rows = rows.filter(transcript__source=RUN_SOURCE, transcript__external_id__in=runs)
    return set(rows.values_list("pk", flat=True))


def _runs_without_item(
    configuration: JudgeConfiguration, group: str, spec: RubricSpec, judged: set[int]
) -> dict[int, dict[int, int]]:
    """The group's runs scored by the runs' own judge of this configuration that no person labelled yet: a run
    becomes an item only when someone labels it, but the judge's scores of the others are what the corrected
    estimate corrects with. dimension id -> key -> place on the scale; keys are negative (-1, -2, ...) so they
    never meet an item's id."""
    if configuration.prompt_hash != RUNS_JUDGE:
        return {}
    have = set(Item.objects.filter(pk__in=judged).values_list("transcript__external_id", flat=True))
    runs = (
        EvaluationRun.objects.filter(group=group, judge_label=configuration.provider, status="completed")
        .exclude(run_id__in=have)
        .order_by("run_id")
    )
    scores: dict[Any, dict[str, float]] = {}
    for run_pk, name, score in DimensionScore.objects.filter(run__in=runs).values_list("run_id", "dimension", "score"):
        scores.setdefault(run_pk, {})[name] = score
    out: dict[int, dict[int, int]] = {}
    for k, run_pk in enumerate(runs.values_list("pk", flat=True), 1):
        for d in spec.dimensions:
            found = scores.get(run_pk, {}).get(d.name)
            level = d.scale.level_of(round(found)) if found is not None else None
            if level is not None:
                out.setdefault(d.id, {})[-k] = d.scale.score_of(level)
    return out


def estimate_data(
    configuration: JudgeConfiguration, selection: estimates.Selection = estimates.EVERYTHING
) -> list[estimates.DimensionData]:
    """Each dimension of the rubric version the configuration judged under, with the judge's and the people's
    values on the selected judged items (the labels read as the judge card reads them). A run group read with
    the runs' own judge also counts the group's runs nobody labelled yet (their judge scores)."""
    rubric = configuration.rubric
    recorded = _versions(rubric.pk)
    spec = _spec_at(rubric, configuration.rubric_version, recorded)
    wanted = _estimate_items(selection)
    judged, _ = _on_scale(_scores_by_dimension(configuration.pk, wanted), spec)
    if selection.group is not None:
        seen = {i for per_item in judged.values() for i in per_item}
        for dimension, extra in _runs_without_item(configuration, selection.group, spec, seen).items():
            judged.setdefault(dimension, {}).update({k: [v] for k, v in extra.items()})
    labels, _ = _labels_by_dimension(spec, recorded)
    adjudicated = _adjudicated_by_dimension(spec, recorded)
    out = []
    for d in spec.dimensions:
        judge = {i: agreement.lower_median(v) for i, v in judged.get(d.id, {}).items()}
        people = {i: agreement.lower_median(list(v.values())) for i, v in labels.get(d.id, {}).items() if i in judge}
        settled = {i: v for i, v in adjudicated.get(d.id, {}).items() if i in judge}
        people.update(settled)
        out.append(estimates.DimensionData(d.name, d.scale.levels, d.scale.integer, judge, people, frozenset(settled)))
    return out


def estimate_configuration(rubric: str, configuration: int | None = None) -> JudgeConfiguration:
    """The rubric's newest judge configuration (newest rubric version first), or the one named; NotFound names
    what is missing."""
    if not Rubric.objects.filter(slug=rubric).exists():
        known = ", ".join(Rubric.objects.values_list("slug", flat=True)) or "none"
        raise NotFound(f"no rubric {rubric!r}; rubrics: {known}")
    found = configurations(rubric)
    if configuration is not None:
        found = [c for c in found if c.pk == configuration]
        if not found:
            raise NotFound(f"no judge configuration {configuration} of rubric {rubric!r}")
    if not found:
        raise NotFound(f"nothing judged with rubric {rubric!r} yet: run judge_imported first")
    return found[0]


def estimate_table(
    rubric: str,
    *,
    configuration: int | None = None,
    selection: estimates.Selection = estimates.EVERYTHING,
    labelled: int | None = None,
    seed: int = 0,
) -> estimates.EstimateTable:
    """Per dimension, the judge-only, people-only and corrected estimates (and the all-people figure where every
    judged item has labels). labelled: keep the people's labels of that many items only (seeded)."""
    config = estimate_configuration(rubric, configuration)
    data = estimate_data(config, selection)
    keep = estimates.labelled_subset(data, labelled, seed) if labelled is not None else None
    every = {i for d in data for i in d.people}
    return estimates.EstimateTable(
        rubric=rubric,
        rubric_version=config.rubric_version,
        configuration=config.key,
        configuration_id=config.pk,
        selection=selection.describe(),
        items=len({i for d in data for i in d.judged}),
        labelled=len(every if keep is None else every & keep),
        labelled_of=len(every),
        rows=estimates.table_rows(data, keep),
        data=tuple(data),
        keep=keep,
        adjudicated=len({i for d in data for i in d.adjudicated if keep is None or i in keep}),
    )


def estimate_compare(
    rubric: str,
    by: str,
    a: str,
    b: str,
    *,
    configuration: int | None = None,
    labelled: int | None = None,
    seed: int = 0,
    selection: estimates.Selection = estimates.EVERYTHING,
    budget: bool = False,
) -> tuple[estimates.EstimateTable, estimates.EstimateTable, list[estimates.DifferenceRow]]:
    """The corrected difference between two groups of items (two sources, candidates or run groups), a minus b,
    within one judge configuration. InvalidInput (field "compare") names a group with no judged items; a
    selection beside it (source, candidate or group) is refused, naming it: the two groups are the selection; and so
    is a labelling budget, which is one table's, not a difference's."""
    if by not in estimates.GROUPINGS:
        raise InvalidInput([FieldProblem("by", f"{by!r} is not one of {', '.join(estimates.GROUPINGS)}")])
    chosen = [key for key in estimates.GROUPINGS if getattr(selection, key) is not None] + (
        ["budget"] if budget else []
    )
    if chosen:
        raise InvalidInput(
            [FieldProblem(chosen[0], "cannot be combined with compare: compare names the two groups itself (see by)")]
        )
    first, second = (
        estimate_table(
            rubric,
            configuration=configuration,
            selection=estimates.Selection(**{by: name}),
            labelled=labelled,
            seed=seed,
        )
        for name in (a, b)
    )
    empty = [name for name, table in ((a, first), (b, second)) if not table.items]
    if empty:
        raise InvalidInput(
            [
                FieldProblem("compare", f"{by} {name!r} has no items judged under {first.configuration!r}")
                for name in empty
            ]
        )
    return first, second, estimates.differences(first, second)


def estimate_budget(
    table: estimates.EstimateTable, *, draws: int = 40, seed: int = 0, count: int = 10
) -> list[estimates.Budget]:
    """How many labels (estimates.budget): the width curve and what to label next, per dimension, widest first."""
    return estimates.budget(table, draws=draws, seed=seed, count=count)


def estimate_notes(rows: Any) -> list[str]:
    """Each caveat the estimates of these rows carry (few labels, a Wilson interval, clipping...), once, in order."""
    return estimates.notes_of(rows)


def comparison_estimates(
    group: str, baseline: str | None = None, rubric: str = "tutor-session"
) -> dict[str, Any] | None:
    """The comparison page's corrected estimates: where people labelled runs of the group, per dimension the
    judge's own mean over the group's runs, the corrected (PPI++) estimate, and, where the baseline group's runs
    (judged by the same judge) carry labels too, the corrected difference against it. None where no run of the
    group has people's labels: the page then says nothing."""
    labels = set(
        EvaluationRun.objects.filter(group=group, status="completed")
        .exclude(judge_label="")
        .values_list("judge_label", flat=True)
    )
    found = [
        c
        for c in JudgeConfiguration.objects.filter(rubric__slug=rubric, prompt_hash=RUNS_JUDGE, provider__in=labels)
        .select_related("rubric")
        .order_by("-rubric_version", "-created_at")
    ]
    for config in found:
        table = estimate_table(rubric, configuration=config.pk, selection=estimates.Selection(group=group))
        if table.labelled:
            break
    else:
        return None
    other = None
    if baseline:
        other = estimate_table(rubric, configuration=config.pk, selection=estimates.Selection(group=baseline))
    compared = estimates.differences(table, other) if other is not None and other.labelled else []
    rows = [{"row": row, "difference": compared[k] if compared else None} for k, row in enumerate(table.rows)]
    return {
        "table": table,
        "rows": rows,
        "baseline": None if other is None else {"group": baseline, "table": other, "compared": bool(compared)},
        "multiple_judges": len(labels) > 1,
    }


# --- labelling queues (services.queue_* write them) ------------------------------------------------------


def queue_role(queue: Any, user: Any) -> str | None:
    """What the user is to the queue: "owner" (its owner, or a superuser: sees everything), "adjudicator",
    "annotator" (sees only the queue's items and its figures), or None."""
    if user is None or not user.is_authenticated:
        return None
    if user.is_superuser or queue.owner_id == user.pk:
        return "owner"
    if queue.adjudicators.filter(pk=user.pk).exists():
        return "adjudicator"
    if queue.annotators.filter(pk=user.pk).exists():
        return "annotator"
    return None


def queues_for(user: Any) -> list[Any]:
    """The queues the user owns, labels or adjudicates (a superuser: every queue), newest first."""
    from django.db.models import Count, Q

    from evaluation.models import LabelQueue

    rows = LabelQueue.objects.select_related("rubric", "rubric_version", "owner").annotate(
        n_items=Count("entries", distinct=True)
    )
    if not user.is_superuser:
        rows = rows.filter(Q(owner=user) | Q(annotators=user) | Q(adjudicators=user)).distinct()
    return list(rows.order_by("-created_at"))


def queue_get(pk: int, user: Any) -> Any:
    """The queue, if the user may see it; NotFound otherwise (a queue not theirs is not shown to exist)."""
    from evaluation.models import LabelQueue

    queue = (
        LabelQueue.objects.select_related("rubric", "rubric_version", "configuration", "owner").filter(pk=pk).first()
    )
    if queue is None or queue_role(queue, user) is None:
        raise NotFound(f"no queue {pk} of yours")
    return queue


def level_descriptions(dimension: Any) -> dict[str, str]:
    """level -> what it means, from the dimension's anchors (keyed by a level, or by a range of integer levels
    such as `1-2`)."""
    out: dict[str, str] = {}
    for key, text in dimension.anchors:
        if key in dimension.scale.levels:
            out[key] = text
            continue
        low, sep, high = key.partition("-")
        if sep and dimension.scale.integer and low.strip().isdigit() and high.strip().isdigit():
            for level in dimension.scale.levels:
                if int(low) <= int(level) <= int(high):
                    out.setdefault(level, text)
    return out


def _queue_spec(queue: Any) -> RubricSpec:
    return rubric_spec(queue.rubric)


SHORTCUTS = "1234567890"
"""A level's key on the labelling page: the first ten levels as shown."""


def queue_dimensions(queue: Any, spec: RubricSpec | None = None) -> list[dict[str, Any]]:
    """Each dimension of the queue's rubric as the labelling page shows it: its question and its levels
    (integer scales low to high, categories best first), each with its meaning and its key."""
    out = []
    for d in (spec or _queue_spec(queue)).dimensions:
        shown = list(d.scale.levels) if d.scale.integer else list(reversed(d.scale.levels))
        meanings = level_descriptions(d)
        levels = [
            {"value": v, "key": SHORTCUTS[k] if k < len(SHORTCUTS) else "", "description": meanings.get(v, "")}
            for k, v in enumerate(shown)
        ]
        out.append({"id": d.id, "name": d.name, "question": d.question, "levels": levels})
    return out


def queue_item_view(queue: Any, entry: Any, user: Any) -> dict[str, Any]:
    """What the labelling page and the API show of one item: the conversation (or the candidate response in its
    dialogue), each dimension with its levels (integer scales low to high, categories best first), their meanings
    and keys, and the user's own labels. Judge scores and other people's labels only where the queue is not blind
    or the user's own labels are in."""
    from evaluation.models import QueueLabel

    item = entry.item
    transcript = item.transcript
    spec = _queue_spec(queue)
    name = user.get_username()
    turn = QueueLabel.objects.filter(entry=entry, user=user).first()
    submitted = turn is not None and turn.submitted_at is not None
    labels = list(
        Annotation.objects.filter(item=item, dimension__rubric=queue.rubric, rubric_version__rubric=queue.rubric)
        .filter(rubric_version__number=queue.rubric.version)
        .values_list("dimension_id", "annotator", "value")
    )
    mine = {d: v for d, a, v in labels if a == name}
    reveal = not queue.blind or submitted
    dimensions = [d | {"mine": mine.get(d["id"], "")} for d in queue_dimensions(queue, spec)]
    out: dict[str, Any] = {
        "queue": queue.pk,
        "item": item.pk,
        "position": entry.position,
        "transcript": str(transcript),
        "messages": transcript.messages if isinstance(transcript.messages, list) else [],
        "candidate": item.key,
        "response": item.response,
        "dimensions": dimensions,
        "submitted": submitted,
        "comment": turn.comment if turn is not None else "",
        "blind": queue.blind,
        "revealed": reveal,
        "others": [],
        "judge": [],
    }
    if reveal:
        names = {d.id: d.name for d in spec.dimensions}
        out["others"] = [
            {"dimension": names.get(d, str(d)), "annotator": a, "value": v} for d, a, v in labels if a != name
        ]
        if queue.configuration_id is not None:
            out["judge"] = [
                {"dimension": dim, "repeat": r, "value": v}
                for dim, r, v in JudgeScore.objects.filter(item=item, configuration_id=queue.configuration_id)
                .order_by("dimension__position", "repeat")
                .values_list("dimension__name", "repeat", "value")
            ]
    return out


def queue_previous(queue: Any, user: Any, before: int | None) -> int | None:
    """The item the user submitted last in this queue (before the one they submitted at `before`, an item id):
    where "back" goes."""
    from evaluation.models import QueueLabel

    turns = QueueLabel.objects.filter(entry__queue=queue, user=user, submitted_at__isnull=False)
    if before is not None:
        pivot = turns.filter(entry__item_id=before).values_list("submitted_at", flat=True).first()
        if pivot is not None:
            turns = turns.filter(submitted_at__lt=pivot)
    return turns.order_by("-submitted_at").values_list("entry__item_id", flat=True).first()


def queue_entry_submitted(queue: Any, user: Any, item_id: int) -> Any:
    """The queue item, where the user already submitted labels for it (going back to it); else None."""
    from evaluation.models import QueueLabel

    turn = (
        QueueLabel.objects.filter(entry__queue=queue, entry__item_id=item_id, user=user, submitted_at__isnull=False)
        .select_related("entry__item__transcript")
        .first()
    )
    return turn.entry if turn is not None else None


def queue_held(queue: Any, user: Any) -> Any:
    """The item the user holds a live claim on, if any."""
    from django.utils import timezone

    return (
        queue.entries.filter(claimed_by=user, claim_expires__gt=timezone.now())
        .select_related("item__transcript")
        .order_by("position")
        .first()
    )


@dataclass(frozen=True)
class PersonProgress:
    """One person's work on a queue."""

    name: str
    labelled: int
    skipped: int
    seconds_median: float | None
    """Median seconds from an item shown to its labels submitted."""
    remaining: int
    """Items still open to them (not labelled or skipped by them, not yet fully labelled)."""


@dataclass(frozen=True)
class PeopleAgreement:
    """Agreement between people on one dimension of a queue's items, on raw labels (never adjudicated ones):
    Krippendorff's alpha (ordinal) with its bootstrap 95% interval, as on the judge card (agreement.alpha_estimate),
    and the share of items with two or more labels where everyone gave the same level."""

    dimension: str
    alpha: agreement.Estimate
    items: int
    """Items with two or more labels."""
    exact: float | None
    disagreements: int


@dataclass(frozen=True)
class Disagreement:
    """An item where people's labels differ on some dimension, with the adjudication where one was set."""

    item: int
    label: str
    labels: tuple[tuple[str, str, str], ...]
    """(dimension, annotator, value), by dimension then annotator."""
    differing: tuple[str, ...]
    adjudicated: tuple[tuple[str, str, str], ...]
    """(dimension, value, adjudicator)."""


@dataclass(frozen=True)
class QueueReport:
    """A queue's progress, its agreement between people, its disagreements and its intervals now against at
    the start."""

    items: int
    complete: int
    """Items with all the labels they need."""
    held: int
    """Items someone holds a live claim on now."""
    people: tuple[PersonProgress, ...]
    agreement: tuple[PeopleAgreement, ...]
    disagreements: tuple[Disagreement, ...]
    widths: tuple[tuple[str, float | None, float | None], ...]
    """(dimension, corrected interval width at the start, now)."""
    adjudicated: int
    """Items with an adjudicated label."""
    people_value: str = estimates.PEOPLE_VALUE

    def as_dict(self, *, owner: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "items": self.items,
            "complete": self.complete,
            "held": self.held,
            "people": [p.__dict__ for p in self.people],
            "agreement": [
                {
                    "dimension": a.dimension,
                    "alpha": a.alpha.as_dict(),
                    "items": a.items,
                    "exact": a.exact,
                    "disagreements": a.disagreements,
                    "labels_used": "raw labels (adjudicated ones are not an annotator)",
                }
                for a in self.agreement
            ],
            "widths": [{"dimension": d, "start": s, "now": n} for d, s, n in self.widths],
            "adjudicated": self.adjudicated,
            "people_value": self.people_value,
        }
        if owner:
            out["disagreements"] = [
                {
                    "item": d.item,
                    "labels": [{"dimension": x, "annotator": a, "value": v} for x, a, v in d.labels],
                    "differing": list(d.differing),
                    "adjudicated": [{"dimension": x, "value": v, "adjudicator": a} for x, v, a in d.adjudicated],
                }
                for d in self.disagreements
            ]
        return out


def queue_widths(configuration: Any) -> dict[str, float | None]:
    """Per dimension, the corrected 95% interval's width of its leading estimand (as the judge card shows it)."""
    table = estimate_table(configuration.rubric.slug, configuration=configuration.pk)
    out: dict[str, float | None] = {}
    for row in table.rows:
        out.setdefault(row.dimension, row.corrected.width)
    return out


@dataclass(frozen=True)
class QueueProgress:
    """How far a queue is: its items, those with all their labels, those held now, and each person's work."""

    items: int
    complete: int
    held: int
    people: tuple[PersonProgress, ...]

    def person(self, name: str) -> PersonProgress | None:
        return next((p for p in self.people if p.name == name), None)


def queue_progress(queue: Any) -> QueueProgress:
    """A queue's progress from a few aggregate reads (the labelling page shows it with every item)."""
    import statistics

    from django.utils import timezone

    from evaluation.models import QueueLabel

    entries = list(queue.entries.values_list("item_id", "done", "claimed_by_id", "claim_expires"))
    now = timezone.now()
    turns = list(
        QueueLabel.objects.filter(entry__queue=queue).values_list(
            "user__username", "entry__item_id", "submitted_at", "skipped", "seconds"
        )
    )
    names = sorted({u.get_username() for u in queue.annotators.all()} | {t[0] for t in turns})
    open_items = {e[0] for e in entries if e[1] < queue.labels_per_item}
    people = []
    for n in names:
        mine = [t for t in turns if t[0] == n]
        secs = [t[4] for t in mine if t[2] is not None and t[4] is not None]
        people.append(
            PersonProgress(
                name=n,
                labelled=sum(1 for t in mine if t[2] is not None),
                skipped=sum(1 for t in mine if t[3]),
                seconds_median=statistics.median(secs) if secs else None,
                remaining=len(open_items - {t[1] for t in mine if t[2] is not None or t[3]}),
            )
        )
    return QueueProgress(
        items=len(entries),
        complete=sum(1 for e in entries if e[1] >= queue.labels_per_item),
        held=sum(1 for e in entries if e[2] is not None and e[3] is not None and e[3] > now),
        people=tuple(people),
    )


def queue_report(queue: Any) -> QueueReport:
    spec = _queue_spec(queue)
    progress = queue_progress(queue)
    item_ids = list(queue.entries.order_by("position", "pk").values_list("item_id", flat=True))
    labels: dict[int, dict[int, dict[str, int]]] = {}
    values: dict[tuple[int, int, str], str] = {}
    for item, dim, who, score, value in Annotation.objects.filter(
        item_id__in=item_ids, rubric_version__rubric=queue.rubric, rubric_version__number=queue.rubric.version
    ).values_list("item_id", "dimension_id", "annotator", "score", "value"):
        labels.setdefault(dim, {}).setdefault(item, {})[who] = int(score)
        values[(item, dim, who)] = value
    settled: dict[int, list[tuple[str, str, str]]] = {}
    for settled_item, dim_name, final, adjudicator in (
        Adjudication.objects.filter(item_id__in=item_ids, rubric_version__rubric=queue.rubric)
        .order_by("dimension__position")
        .values_list("item_id", "dimension__name", "value", "adjudicator")
    ):
        settled.setdefault(settled_item, []).append((dim_name, final, adjudicator))
    rows = []
    differing: dict[int, list[str]] = {}
    for d in spec.dimensions:
        per_item = labels.get(d.id, {})
        multi = {i: v for i, v in per_item.items() if len(v) >= 2}
        differ = [i for i, v in multi.items() if len(set(v.values())) > 1]
        for i in differ:
            differing.setdefault(i, []).append(d.name)
        rows.append(
            PeopleAgreement(
                dimension=d.name,
                alpha=agreement.alpha_estimate([list(v.values()) for v in multi.values()], d.scale.size),
                items=len(multi),
                exact=(len(multi) - len(differ)) / len(multi) if multi else None,
                disagreements=len(differ),
            )
        )
    order = {i: k for k, i in enumerate(item_ids)}
    items = items_get(list(differing))
    disagreements = []
    dim_names = {d.id: d.name for d in spec.dimensions}
    for i in sorted(differing, key=lambda x: order.get(x, 0)):
        disagreements.append(
            Disagreement(
                item=i,
                label=str(items[i]) if i in items else str(i),
                labels=tuple(
                    sorted(
                        (dim_names[dim], who, values[(i, dim, who)])
                        for dim in dim_names
                        for who in labels.get(dim, {}).get(i, {})
                    )
                ),
                differing=tuple(differing[i]),
                adjudicated=tuple(settled.get(i, ())),
            )
        )
    now_widths = queue_widths(queue.configuration) if queue.configuration_id is not None else {}
    return QueueReport(
        items=progress.items,
        complete=progress.complete,
        held=progress.held,
        people=progress.people,
        agreement=tuple(rows),
        disagreements=tuple(disagreements),
        widths=tuple((d.name, queue.start_widths.get(d.name), now_widths.get(d.name)) for d in spec.dimensions),
        adjudicated=len(settled),
    )


EXPORT_FIELDS = (
    "queue",
    "item",
    "transcript",
    "candidate",
    "dimension",
    "kind",
    "annotator",
    "value",
    "rubric",
    "rubric_version",
    "labelled_at",
    "seconds",
    "comment",
    "adjudicated_value",
    "adjudicator",
)
"""An export row: `kind` is "label" (a person's raw label) or "adjudication" (the final label, stored apart)."""


def queue_export_rows(queue: Any) -> list[dict[str, Any]]:
    """Every label of the queue's items under the queue's rubric, with its annotator, when it was made, the
    rubric version, the seconds the person took and their comment; then each adjudication, named as such. A
    label row also carries the item's adjudicated value on its dimension, where one was set."""
    from evaluation.models import QueueLabel

    item_ids = list(queue.entries.values_list("item_id", flat=True))
    turns = {
        (item, user): (secs, comment)
        for item, user, secs, comment in QueueLabel.objects.filter(entry__queue=queue).values_list(
            "entry__item_id", "user_id", "seconds", "comment"
        )
    }
    settled = {
        (a.item_id, a.dimension_id): a
        for a in Adjudication.objects.filter(item_id__in=item_ids, rubric_version__rubric=queue.rubric).select_related(
            "dimension", "rubric_version"
        )
    }
    out = []
    for a in (
        Annotation.objects.filter(item_id__in=item_ids, rubric_version__rubric=queue.rubric)
        .select_related("item__transcript", "dimension", "rubric_version")
        .order_by("item_id", "dimension__position", "annotator")
    ):
        secs, comment = turns.get((a.item_id, a.user_id or 0), (None, ""))
        adj = settled.get((a.item_id, a.dimension_id))
        out.append(
            {
                "queue": queue.pk,
                "item": a.item_id,
                "transcript": str(a.item.transcript),
                "candidate": a.item.key,
                "dimension": a.dimension.name,
                "kind": "label",
                "annotator": a.annotator,
                "value": a.value,
                "rubric": queue.rubric.slug,
                "rubric_version": a.rubric_version.number,
                "labelled_at": a.updated_at.isoformat(),
                "seconds": None if secs is None else round(secs, 3),
                "comment": comment,
                "adjudicated_value": adj.value if adj else "",
                "adjudicator": adj.adjudicator if adj else "",
            }
        )
    for (item, _), adj in sorted(settled.items()):
        out.append(
            {
                "queue": queue.pk,
                "item": item,
                "transcript": "",
                "candidate": "",
                "dimension": adj.dimension.name,
                "kind": "adjudication",
                "annotator": adj.adjudicator,
                "value": adj.value,
                "rubric": queue.rubric.slug,
                "rubric_version": adj.rubric_version.number,
                "labelled_at": adj.updated_at.isoformat(),
                "seconds": None,
                "comment": "",
                "adjudicated_value": adj.value,
                "adjudicator": adj.adjudicator,
            }
        )
    return out
