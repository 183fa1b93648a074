"""Judging's writes: import transcripts, load rubrics, judge items, label items, keep canaries."""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluation.errors import Conflict, FieldProblem, InvalidInput, NotFound
from evaluation.judging import importing, judge, versions
from evaluation.judging.judge import JudgeReport, judge_items
from evaluation.judging.rubrics import SHIPPED_DIR, rubric_problems, rubric_rows
from evaluation.judging.values import RubricSpec, rubric_spec
from evaluation.models import (
    Annotation,
    BatchState,
    CanarySet,
    Item,
    JudgeConfiguration,
    JudgeScore,
    ProviderBatch,
    Rubric,
    RubricDimension,
    RubricVersion,
    Topic,
    Transcript,
)
from evaluation.providers import ProviderError

DEFAULT_RUBRIC = {"session": "tutor-session", "response": "tutor-response"}
"""The rubric a record's labels are read against when the caller names none."""

__all__ = [
    "ImportReport",
    "JudgeReport",
    "annotation_set",
    "canary_rejudge",
    "canary_rejudge_later",
    "canary_set",
    "judging_batch_poll",
    "judging_batches_repoll",
    "JudgingJob",
    "transcripts_judge_later",
    "rubric_get",
    "run_labels_set",
    "rubric_load",
    "rubric_version_record",
    "VersionChange",
    "transcripts_import",
    "transcripts_judge",
    "queue_adjudicate",
    "queue_claim",
    "queue_create",
    "queue_items_add",
    "queue_people_set",
    "queue_submit",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportReport:
    """What one import did. Nothing is stored unless every record was valid."""

    file: str
    format: str
    rubrics: tuple[str, ...]
    """The rubrics the labels were read against."""
    created: int
    updated: int
    unchanged: int
    items: int
    """Items (whole conversations or candidate responses) in the file."""
    labels: int
    """Annotations written (created or changed)."""
    sources: tuple[str, ...] = field(default=())
    merged: int = 0
    """Records folded into an earlier one with the same id and dialogue."""
    rejected: tuple[importing.Rejected, ...] = field(default=())
    """Records set aside, each with its reasons (only when asked to skip invalid records)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "format": self.format,
            "rubrics": list(self.rubrics),
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "items": self.items,
            "labels": self.labels,
            "sources": list(self.sources),
            "merged": self.merged,
            "rejected": [r.as_dict() for r in self.rejected],
        }

    def __str__(self) -> str:
        merged = f"; {self.merged} repeated ids merged" if self.merged else ""
        rejected = f"; {len(self.rejected)} records rejected" if self.rejected else ""
        return (
            f"{self.file or 'body'} ({self.format}): {self.created} created, {self.updated} updated, "
            f"{self.unchanged} unchanged; {self.items} items, {self.labels} labels written "
            f"(rubric {', '.join(self.rubrics) or '-'}){merged}{rejected}"
        )

    def lines(self) -> list[str]:
        """What every door shows: the summary, then each rejected record and why."""
        return [f"Imported {self}", *(f"Rejected {r}" for r in self.rejected)]


def import_limit() -> int:
    """The most bytes an import reads (EVALUATION['IMPORT_MAX_FILE_BYTES']); doors read one byte more to tell."""
    return importing.limit("IMPORT_MAX_FILE_BYTES")


def rubric_get(slug: str) -> Rubric:
    """The rubric; a shipped one (rubrics/<slug>.json) missing from the database is loaded again first,
    so a database emptied after its migrations still has the defaults."""
    rubric = Rubric.objects.filter(slug=slug).first()
    shipped = SHIPPED_DIR / f"{slug}.json"
    if rubric is None and "/" not in slug and shipped.is_file():
        rubric = rubric_load(shipped)
    if rubric is None:
        known = ", ".join(Rubric.objects.values_list("slug", flat=True)) or "none"
        raise NotFound(f"no rubric {slug!r}; rubrics: {known}")
    return rubric


def rubric_load(path: Path) -> Rubric:
    """Create or update a rubric from its JSON document; the same document again changes nothing.

    A changed scale, question or anchor of a rubric with labels or judgements becomes a new version (see
    rubric_version_record); the document's "version" may raise the number, never lower it. Dimensions the
    document no longer names keep their rows while labels or scores point at them."""
    doc = importing.json_loads(path.read_bytes(), field="", file=str(path))
    problems = rubric_problems(doc, file=str(path))
    if problems:
        raise InvalidInput(problems)
    fields, dims = rubric_rows(doc)
    declared = fields.pop("version")
    with transaction.atomic():
        rubric, _ = Rubric.objects.update_or_create(slug=doc["slug"], defaults=fields)
        for dim in dims:
            RubricDimension.objects.update_or_create(rubric=rubric, name=dim["name"], defaults=dim)
        rubric.dimensions.exclude(name__in=[d["name"] for d in dims]).filter(
            annotations__isnull=True, judge_scores__isnull=True
        ).delete()
        rubric_version_record(rubric=rubric, declared=declared)
    return rubric


@dataclass(frozen=True)
class VersionChange:
    """What recording a rubric's current scales, questions and anchors did to its versions."""

    rubric: str
    version: int
    """The current version's number, after the change."""
    version_id: int
    """Its RubricVersion's id: the version new labels are stored under."""
    previous: int | None
    """The number that was current before; None for a rubric's first version."""
    created: bool
    """A new version was made (the previous one had labels or judgements, or the number was raised)."""
    changed: bool
    """The recorded content or number changed (a new version, or in place)."""

    def __str__(self) -> str:
        if self.created and self.previous is not None:
            return (
                f"{self.rubric}: labels or judgements exist under v{self.previous}, so the change is "
                f"v{self.version}; v{self.previous} stays as it was, with its labels and judgements"
            )
        if self.changed:
            return f"{self.rubric} v{self.version}: nothing was labelled or judged under it yet, changed in place"
        return f"{self.rubric} v{self.version}: unchanged"


def rubric_version_used(version: RubricVersion) -> bool:
    """Whether a label or a judge score was made under this version (then it never changes again)."""
    return (
        Annotation.objects.filter(rubric_version=version).exists()
        or JudgeScore.objects.filter(
            configuration__rubric_id=version.rubric_id, configuration__rubric_version=version.number
        ).exists()
    )


def rubric_version_record(*, rubric: Rubric, declared: int | None = None) -> VersionChange:
    """Record the rubric's rows (unit, dimensions with their scales, questions and anchors) as its current version.

    Unchanged: nothing happens. Changed while nothing was labelled or judged under the current version: it
    changes in place. Changed after that, or with a number raised (rubric.version set higher by staff, or a
    file's `declared` version): a new version, numbered max(the raised number, the last + 1); the old one
    stays as recorded, and the labels and judgements made under it are read against it.
    """
    with transaction.atomic():
        locked = Rubric.objects.select_for_update().get(pk=rubric.pk)
        dimensions = versions.snapshot(locked.dimensions.all())
        digest = versions.content_hash(locked.unit, dimensions)
        latest = locked.versions.order_by("-number").first()
        wanted = max(locked.version, declared or 0)
        content = {"unit": locked.unit, "dimensions": dimensions, "content_hash": digest}
        if latest is None:
            current = RubricVersion.objects.create(rubric=locked, number=wanted, **content)
            change = VersionChange(locked.slug, wanted, current.pk, None, created=True, changed=True)
        else:
            wanted = max(wanted, latest.number)
            if digest == latest.content_hash and wanted == latest.number:
                current = latest
                change = VersionChange(locked.slug, latest.number, latest.pk, latest.number, False, False)
            elif not rubric_version_used(latest):
                current = latest
                RubricVersion.objects.filter(pk=latest.pk).update(number=wanted, updated_at=timezone.now(), **content)
                change = VersionChange(locked.slug, wanted, latest.pk, latest.number, created=False, changed=True)
            else:
                number = max(wanted, latest.number + 1)
                current = RubricVersion.objects.create(rubric=locked, number=number, **content)
                change = VersionChange(locked.slug, number, current.pk, latest.number, created=True, changed=True)
        if locked.version != change.version:
            Rubric.objects.filter(pk=locked.pk).update(version=change.version)
        rubric.version = change.version
    return change


def transcripts_import(
    data: bytes | str | Path,
    *,
    format: str = "auto",
    rubric: str | None = None,
    file: str = "",
    source: str = "",
    annotator: str = "",
    speaker_separator: str = ":",
    transcript_separator: str = "---",
    label_map: importing.LabelMap | bytes | str | None = None,
    skip_invalid: bool = False,
) -> ImportReport:
    """Import a file of conversations, all or nothing unless `skip_invalid`; idempotent on (source, external id).

    data: the file's bytes or text, or its path. Labels are checked against `rubric` (a slug), else tutor-session
    for transcripts and tutor-response for candidate-response sets; a value off the scale (neither a label, nor
    one of its aliases, nor mapped by `label_map`: {dimension or "*": {wording: label}}, or its JSON/YAML text)
    is refused naming the value and the allowed ones. A record without labels is imported unlabelled. Records
    repeating an id with the same dialogue are one conversation (importing.merge_repeats). With `skip_invalid`
    the valid records are stored and the others listed in the report with their reasons; a file with no valid
    record is refused whole.
    """
    if isinstance(data, Path):
        path = data
        file = file or str(path)
        if not path.is_file():
            raise NotFound(f"{path}: no such file")
        if path.stat().st_size > importing.limit("IMPORT_MAX_FILE_BYTES"):
            raise importing.too_large(
                "", f"the file is {path.stat().st_size} bytes", "IMPORT_MAX_FILE_BYTES", file=file
            )
        raw = path.read_bytes()
    else:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if not isinstance(label_map, importing.LabelMap):
        label_map = importing.label_map_read(label_map or "")
    parsed = importing.parse(
        raw,
        format=format,
        file=file,
        source=source,
        annotator=annotator,
        speaker_separator=speaker_separator,
        transcript_separator=transcript_separator,
        skip_invalid=True,  # set aside here, refused below with the labels' problems unless skip_invalid
    )
    chosen = _current_spec(rubric) if rubric else None
    specs: dict[str, tuple[RubricSpec, int]] = {}
    if label_map:
        wanted = {chosen[0].slug} if chosen else {DEFAULT_RUBRIC[r.kind] for r in parsed.records if r.labelled}
        for slug in sorted(wanted - set(specs)):
            specs[slug] = _current_spec(slug)
        problems = label_map.problems([chosen[0]] if chosen else [s for s, _ in specs.values()])
        if problems:
            raise InvalidInput(problems)
    topics = _topics({r.topic_id for r in parsed.records if r.topic_id})
    rejected = list(parsed.rejected)
    records: list[importing.ParsedTranscript] = []
    for record in parsed.records:
        problems = []
        if record.topic_id and record.topic_id not in topics:
            problems.append(FieldProblem(f"{record.where}.topic", f"no topic {record.topic_id!r}", file, record.line))
        if record.labelled:
            if chosen is not None and chosen[0].unit != record.kind:
                reason = f"labels {record.kind}s but rubric {chosen[0].slug!r} judges {chosen[0].unit}s"
                problems.append(FieldProblem(record.where, reason, file, record.line))
            else:
                slug = chosen[0].slug if chosen else DEFAULT_RUBRIC[record.kind]
                if chosen is None and slug not in specs:
                    specs[slug] = _current_spec(slug)
                spec, version_id = chosen or specs[slug]
                record, found = importing.labels_read(record, spec, version_id, label_map, file=file)
                problems += found
        if problems:
            rejected.append(importing.Rejected(record.where, tuple(problems), record.position))
        else:
            records.append(record)
    merged, refused = importing.merge_repeats(records, file=file)
    rejected = sorted(rejected + refused, key=lambda r: r.position)
    if rejected and (not skip_invalid or not merged):
        raise InvalidInput([p for r in rejected for p in r.problems])
    used = sorted({chosen[0].slug} if chosen else set(specs))
    report = _store(merged, topics, parsed.format, file, tuple(used))
    return replace(report, merged=len(records) - len(merged) - len(refused), rejected=tuple(rejected))


def _current_spec(slug: str) -> tuple[RubricSpec, int]:
    """The rubric as it is now, and the id of its current version (the one new labels are stored under)."""
    found = rubric_get(slug)
    change = rubric_version_record(rubric=found)
    return rubric_spec(found), change.version_id


def _topics(ids: set[str]) -> dict[str, Topic]:
    return {t.topic_id: t for t in Topic.objects.filter(topic_id__in=ids)} if ids else {}


def _store(
    records: list[importing.ParsedTranscript],
    topics: dict[str, Topic],
    fmt: str,
    file: str,
    rubrics: tuple[str, ...],
) -> ImportReport:
    created = updated = unchanged = labels = 0
    with transaction.atomic():
        existing = {}
        for source in {r.source for r in records}:
            ids = [r.external_id for r in records if r.source == source]
            for row in Transcript.objects.filter(source=source, external_id__in=ids).only(
                "id", "source", "external_id", "content_hash"
            ):
                existing[(row.source, row.external_id)] = row
        to_create: list[Transcript] = []
        to_update: list[Transcript] = []
        changed: list[int] = []
        for index, record in enumerate(records):
            digest = record.content_hash()
            fields = {
                "messages": [{"role": role, "content": content} for role, content in record.messages],
                "metadata": record.metadata,
                "topic": topics.get(record.topic_id),
                "content_hash": digest,
            }
            found = existing.get((record.source, record.external_id))
            if found is None:
                to_create.append(Transcript(source=record.source, external_id=record.external_id, **fields))
                changed.append(index)
            elif found.content_hash != digest:
                for name, value in fields.items():
                    setattr(found, name, value)
                found.updated_at = timezone.now()
                to_update.append(found)
                changed.append(index)
            else:
                unchanged += 1
        Transcript.objects.bulk_create(to_create, batch_size=500)
        Transcript.objects.bulk_update(
            to_update, ["messages", "metadata", "topic", "content_hash", "updated_at"], batch_size=500
        )
        created, updated = len(to_create), len(to_update)
        if changed:
            rows = {}
            for source in {records[i].source for i in changed}:
                ids = [records[i].external_id for i in changed if records[i].source == source]
                for row in Transcript.objects.filter(source=source, external_id__in=ids).only(
                    "id", "source", "external_id"
                ):
                    rows[(row.source, row.external_id)] = row.pk
            items = [
                Item(
                    transcript_id=rows[(records[i].source, records[i].external_id)],
                    key=item.key,
                    response=item.response,
                )
                for i in changed
                for item in records[i].items
            ]
            Item.objects.bulk_create(
                items,
                batch_size=500,
                update_conflicts=True,
                unique_fields=["transcript", "key"],
                update_fields=["response"],
            )
            item_ids = {
                (t, k): pk
                for pk, t, k in Item.objects.filter(transcript_id__in=list(rows.values())).values_list(
                    "id", "transcript_id", "key"
                )
            }
            now = timezone.now()
            annotations = []
            for i in changed:
                transcript_id = rows[(records[i].source, records[i].external_id)]
                for item in records[i].items:
                    for label in item.labels:
                        if label.dimension_id is None or label.version_id is None or label.score is None:
                            raise RuntimeError(f"{label.where}: stored before importing.labels_read read it")
                        annotations.append(
                            Annotation(
                                item_id=item_ids[(transcript_id, item.key)],
                                dimension_id=label.dimension_id,
                                rubric_version_id=label.version_id,
                                annotator=label.annotator,
                                value=label.value,
                                score=label.score,
                                updated_at=now,
                            )
                        )
            Annotation.objects.bulk_create(
                annotations,
                batch_size=500,
                update_conflicts=True,
                unique_fields=["item", "dimension", "annotator", "rubric_version"],
                update_fields=["value", "score", "updated_at"],
            )
            labels = len(annotations)
    return ImportReport(
        file=file,
        format=fmt,
        rubrics=rubrics,
        created=created,
        updated=updated,
        unchanged=unchanged,
        items=sum(len(r.items) for r in records),
        labels=labels,
        sources=tuple(sorted({r.source for r in records})),
    )


def annotation_set(*, item_id: int, dimension_id: int, value: Any, user: Any = None, annotator: str = "") -> Annotation:
    """A person's label of one item on one dimension (annotator = the user's name), under the rubric's current
    version; replaces their earlier label under that version (labels under earlier versions stay)."""
    item = Item.objects.filter(pk=item_id).first()
    dimension = RubricDimension.objects.select_related("rubric").filter(pk=dimension_id).first()
    if item is None or dimension is None:
        raise NotFound("no such item or dimension")
    version = rubric_version_record(rubric=dimension.rubric)
    spec = rubric_spec(dimension.rubric).dimension(dimension.name)
    assert spec is not None
    level = _level(spec, value)
    name = annotator or (user.get_username() if user is not None else "")
    if not name:
        raise InvalidInput([FieldProblem("annotator", "is required")])
    annotation, _ = Annotation.objects.update_or_create(
        item=item,
        dimension=dimension,
        annotator=name,
        rubric_version_id=version.version_id,
        defaults={"value": level, "score": float(spec.scale.score_of(level)), "user": user},
    )
    return annotation


def _level(spec: Any, value: Any) -> str:
    """The level a label means on the dimension's scale; InvalidInput names the dimension and the allowed values."""
    level = spec.scale.level_of(value)
    if level is None:
        raise InvalidInput([FieldProblem(spec.name, f"{value!r} is not on the scale; allowed: {spec.scale.allowed()}")])
    return str(level)


RUN_SOURCE = "run"
"""The source of the transcripts made from this app's own runs, so staff labels of a run sit beside imported ones."""


def run_item(run: Any, rubric: Rubric) -> Item:
    """The run's newest conversation as a transcript (source "run", id its run id) and its session item, with
    the run's judge scores recorded under a configuration of their own, so agreement covers runs too."""
    from evaluation.models import DimensionScore, RunMessage

    attempt = RunMessage.objects.filter(run=run).order_by("-attempt").values_list("attempt", flat=True).first() or 0
    messages = [
        {"role": m.role, "content": m.content}
        for m in RunMessage.objects.filter(run=run, attempt=attempt).order_by("turn", "id")
    ]
    if not messages:
        raise InvalidInput([FieldProblem("run", f"run {run.run_id} has no conversation to label")])
    transcript, _ = Transcript.objects.update_or_create(
        source=RUN_SOURCE,
        external_id=run.run_id,
        defaults={
            "messages": messages,
            "metadata": {"persona": run.persona.persona_id if run.persona else None, "judge": run.judge_label},
            "topic": run.topic,
            "content_hash": f"run:{run.pk}:{attempt}",
        },
    )
    item, _ = Item.objects.get_or_create(transcript=transcript, key="")
    spec = rubric_spec(rubric)
    scores = {d.dimension: d.score for d in DimensionScore.objects.filter(run=run)}
    if run.judge_label and scores:
        configuration, _ = JudgeConfiguration.objects.get_or_create(
            key=f"{run.judge_label} | the runs' own judge | {spec.slug} v{spec.version}",
            defaults={
                "rubric": rubric,
                "provider": run.judge_label,
                "prompt_hash": "runs-judge",
                "rubric_version": spec.version,
            },
        )
        for dim in spec.dimensions:
            level = dim.scale.level_of(round(scores[dim.name])) if dim.name in scores else None
            if level is not None:
                JudgeScore.objects.update_or_create(
                    item=item,
                    dimension_id=dim.id,
                    configuration=configuration,
                    repeat=1,
                    defaults={"value": level, "score": float(dim.scale.score_of(level))},
                )
    return item


def run_labels_set(*, run_id: str, user: Any, values: dict[str, str], rubric: str = "tutor-session") -> int:
    """A staff member's labels of a run's conversation (annotator = their user name); blank values are skipped."""
    from evaluation.models import EvaluationRun

    run = EvaluationRun.objects.filter(run_id=run_id).select_related("persona", "topic").first()
    if run is None:
        raise NotFound(f"no run {run_id!r}")
    found = rubric_get(rubric)
    rubric_version_record(rubric=found)
    names = {d.name: d.pk for d in found.dimensions.all()}
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise InvalidInput([FieldProblem(name, f"rubric {rubric!r} has no such dimension") for name in unknown])
    with transaction.atomic():
        item = run_item(run, found)
        written = 0
        for name, value in values.items():
            if str(value).strip():
                annotation_set(item_id=item.pk, dimension_id=names[name], value=value, user=user)
                written += 1
    return written


def canary_set(*, name: str, rubric: str, item_ids: list[int]) -> CanarySet:
    """Mark labelled items as a rubric's canary: a new judge configuration re-judges them first."""
    spec = rubric_get(rubric)
    labelled = set(
        Annotation.objects.filter(item_id__in=item_ids, dimension__rubric=spec).values_list("item_id", flat=True)
    )
    missing = sorted(set(item_ids) - labelled)
    if missing:
        raise InvalidInput([FieldProblem("items", f"items {missing[:10]} have no labels on rubric {rubric!r}")])
    canary, _ = CanarySet.objects.get_or_create(name=name, defaults={"rubric": spec})
    if canary.rubric_id != spec.pk:
        raise InvalidInput([FieldProblem("name", f"canary {name!r} belongs to rubric {canary.rubric.slug!r}")])
    canary.items.add(*item_ids)
    return canary


def transcripts_judge(
    *,
    rubric: str,
    provider: str | None = None,
    repeats: int = 1,
    workers: int = 4,
    only_missing: bool = True,
    item_ids: list[int] | None = None,
    batch: bool | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    wait: bool = True,
) -> JudgeReport:
    """Judge imported items with a rubric (canary items first, under a new configuration).

    batch: True sends the calls as one provider batch and waits for it (a stored batch of the same job
    is resumed), False calls directly, None follows the judge's LLM config (options {"batch": true}).
    wait=False (by batch) sends the batch and leaves it to a worker's polling task (judging_batch_poll)."""
    if repeats < 1 or repeats > 20:
        raise InvalidInput([FieldProblem("repeats", "must be from 1 to 20")])
    if workers < 1 or workers > 64:
        raise InvalidInput([FieldProblem("workers", "must be from 1 to 64")])
    found = rubric_get(rubric)
    rubric_version_record(rubric=found)  # the version the scores are made under is on record first
    report = judge_items(
        rubric_spec(found),
        provider=provider,
        repeats=repeats,
        workers=workers,
        only_missing=only_missing,
        item_ids=item_ids,
        batch=batch,
        on_progress=on_progress,
        wait=wait,
    )
    if report.batch_pk is not None:
        judging_batch_poll_later(batch_pk=report.batch_pk)
    return report


def judging_batch_poll(*, batch_pk: int) -> str:
    """Poll a judging batch once (django-q task); store its answers when it has ended, else poll again later."""
    stored = ProviderBatch.objects.filter(pk=batch_pk, kind=judge.BATCH_KIND).first()
    if stored is None:
        return "missing"
    try:
        report = judge.judge_batch_poll(stored)
    except ProviderError as exc:
        # One failed poll (a vendor's 5xx after the SDK's retries, a lost connection) must not end the chain:
        # the batch is still the vendor's to finish, so it is polled again later.
        stored.refresh_from_db()
        if stored.state not in (BatchState.SUBMITTING, BatchState.WAITING):
            raise
        log.warning("polling batch %s failed, polling again later: %s", stored.provider_batch_id, exc)
        judging_batch_poll_later(batch_pk=batch_pk)
        return f"poll failed, polling again later: {exc}"
    if report is not None:
        return str(report)
    stored.refresh_from_db()
    if stored.state in (BatchState.SUBMITTING, BatchState.WAITING):
        judging_batch_poll_later(batch_pk=batch_pk)
        return stored.stage_text
    return stored.state


def judging_batches_repoll() -> list[int]:
    """Judging batches left open with no poll to come (its worker was killed mid-poll, or the process that
    waited on it died) get one: the ids of those scheduled. The sweep calls it."""
    from django_q.models import Schedule

    from evaluation.providers.batch import poll_seconds

    quiet = timezone.now() - timedelta(seconds=max(3 * poll_seconds(), 120.0))
    open_batches = ProviderBatch.objects.filter(
        kind=judge.BATCH_KIND, state__in=(BatchState.SUBMITTING, BatchState.WAITING), updated_at__lt=quiet
    ).values_list("pk", flat=True)
    orphans = [
        pk
        for pk in open_batches
        if not Schedule.objects.filter(func="evaluation.tasks.batch_poll_task", args=str(pk)).exists()
    ]
    for pk in orphans:
        judging_batch_poll_later(batch_pk=pk)
    return orphans


def judging_batch_poll_later(*, batch_pk: int) -> None:
    """A django-q schedule that runs the poll once, BATCH_POLL_SECONDS from now (after this transaction)."""
    from django_q.models import Schedule

    from evaluation.providers.batch import poll_seconds

    def schedule() -> None:
        Schedule.objects.create(
            name=f"batch-poll-{batch_pk}-{timezone.now():%Y%m%d%H%M%S%f}",
            func="evaluation.tasks.batch_poll_task",
            args=str(int(batch_pk)),
            schedule_type=Schedule.ONCE,
            next_run=timezone.now() + timedelta(seconds=poll_seconds()),
        )

    transaction.on_commit(schedule)


def canary_rejudge(
    *, rubric: str, provider: str | None = None, repeats: int = 1, batch: bool | None = None
) -> JudgeReport:
    """Judge the rubric's canary items under the current judge configuration (nothing else); items it
    already judged are skipped, so a configuration that did not change costs no call."""
    if not CanarySet.objects.filter(rubric__slug=rubric).exists():
        raise NotFound(f"rubric {rubric!r} has no canary set: mark labelled items as one in the admin first")
    return transcripts_judge(rubric=rubric, provider=provider, repeats=repeats, item_ids=[], batch=batch)


def canary_rejudge_later(*, rubric: str) -> bool:
    """After this transaction commits, queue the canary's re-judging on a worker; False when there is no canary."""
    if not CanarySet.objects.filter(rubric__slug=rubric).exists():
        return False
    from django_q.tasks import async_task

    transaction.on_commit(lambda: async_task("evaluation.tasks.canary_task", rubric, task_name=f"canary-{rubric}"))
    return True


@dataclass(frozen=True)
class JudgingJob:
    """A judging job queued on a worker (transcripts_judge_later): what it will judge, and its task's name."""

    task: str
    """The django-q task's name (its result is the job's report: judged, failed, calls, tokens, cost)."""
    rubric: str
    provider: str
    """The judge that will be called (vendor/model), as resolved when the job was queued."""
    repeats: int
    batch: bool
    again: bool
    items: int
    """Items of the rubric's unit now (already judged ones are skipped unless again)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "rubric": self.rubric,
            "provider": self.provider,
            "repeats": self.repeats,
            "batch": self.batch,
            "again": self.again,
            "items": self.items,
        }


def transcripts_judge_later(
    *, rubric: str, provider: str | None = None, repeats: int = 1, batch: bool = False, again: bool = False
) -> JudgingJob:
    """Check a judging job as transcripts_judge would, then queue it on a worker after this transaction commits
    (evaluation.tasks.judging_task). Bad input is refused now, by field, not by a failed task later."""
    import uuid

    from django_q.tasks import async_task

    from evaluation.providers import keys_check, resolve

    if repeats < 1 or repeats > 20:
        raise InvalidInput([FieldProblem("repeats", "must be from 1 to 20")])
    try:
        found = rubric_get(rubric)
    except NotFound as exc:
        raise InvalidInput([FieldProblem("rubric", str(exc))]) from None
    keys_check([judge.ROLE], provider or None, field="provider")
    spec = resolve(judge.ROLE, provider or None)
    unit_items = Item.objects.filter(key="") if found.unit == "session" else Item.objects.exclude(key="")
    task = f"judging-{found.slug}-{uuid.uuid4().hex[:12]}"
    args = (found.slug, provider or "", repeats, batch, again)
    transaction.on_commit(lambda: async_task("evaluation.tasks.judging_task", *args, task_name=task))
    return JudgingJob(task, found.slug, spec.label, repeats, batch, again, unit_items.count())


# --- labelling queues -----------------------------------------------------------------------------------
# A queue's labels are Annotations like any other (the judge card, the estimates and the label budget read them
# as soon as they are saved); a QueueLabel keeps each person's turn (when shown, when submitted, the seconds it
# took, a comment); an Adjudication is stored apart. Items are handed out by a claim taken with a conditional
# UPDATE (claimed_by empty or expired), so two people never hold the same item at once, on any database.

QUEUE_MAX_ITEMS = 5000
"""Items one queue may hold (a queue is labelled by people: more than this is a mistake, or several queues)."""


def _users(names: list[str] | tuple[str, ...], field: str) -> list[Any]:
    from django.contrib.auth import get_user_model

    wanted = sorted({str(n).strip() for n in names if str(n).strip()})
    found = {u.get_username(): u for u in get_user_model().objects.filter(username__in=wanted)}
    missing = [n for n in wanted if n not in found]
    if missing:
        raise InvalidInput([FieldProblem(field, f"no such user: {', '.join(repr(n) for n in missing[:10])}")])
    return [found[n] for n in wanted]


def _unit_items(rubric: Rubric) -> Any:
    return Item.objects.filter(key="") if rubric.unit == "session" else Item.objects.exclude(key="")


def _queue_picks(
    rubric: Rubric,
    origin: str,
    *,
    count: int | None,
    seed: int,
    configuration: JudgeConfiguration | None,
    items: list[int] | None,
    source: str | None,
    candidate: str | None,
    group: str | None,
) -> tuple[list[int], str]:
    """The item ids a new queue starts with, and what they were chosen by."""
    import numpy as np

    from evaluation.judging import selectors
    from evaluation.models import EvaluationRun, QueueOrigin

    unit = _unit_items(rubric)
    if origin == QueueOrigin.LABEL_NEXT:
        if configuration is None:
            raise InvalidInput([FieldProblem("configuration", f"nothing judged with rubric {rubric.slug!r} yet")])
        table = selectors.estimate_table(rubric.slug, configuration=configuration.pk)
        wanted = count or 20
        budgets = selectors.estimate_budget(table, draws=2, seed=seed, count=wanted)
        widest = next((b for b in budgets if b.next_items), None)
        if widest is None:
            raise InvalidInput(
                [FieldProblem("origin", "label next has nothing to pick: every judged item is labelled")]
            )
        return list(widest.next_items), (
            f"label next for {widest.dimension} ({widest.estimand}) under {configuration.key}: {widest.rule}"
        )
    if origin == QueueOrigin.JOB:
        if configuration is None:
            raise InvalidInput([FieldProblem("configuration", "name the judge configuration whose items to label")])
        ids = sorted(set(JudgeScore.objects.filter(configuration=configuration).values_list("item_id", flat=True)))
        return ids[:count] if count else ids, f"items judged by {configuration.key}"
    if origin == QueueOrigin.RANDOM:
        ids = sorted(unit.values_list("pk", flat=True))
        wanted = min(count or 20, len(ids))
        picked: list[int] = (
            np.random.default_rng(seed).choice(len(ids), size=wanted, replace=False).tolist() if ids else []
        )
        return [ids[int(k)] for k in picked], f"a random sample of {wanted} of {len(ids)} items (seed {seed})"
    if origin == QueueOrigin.FILTER:
        rows = unit
        said = []
        if group:
            for run in EvaluationRun.objects.filter(group=group, status="completed").select_related("persona", "topic"):
                try:
                    run_item(run, rubric)
                except InvalidInput:
                    continue  # a run with no conversation has nothing to label
            runs = EvaluationRun.objects.filter(group=group).values_list("run_id", flat=True)
            rows = rows.filter(transcript__source=RUN_SOURCE, transcript__external_id__in=list(runs))
            said.append(f"run group {group!r}")
        if source:
            rows = rows.filter(transcript__source=source)
            said.append(f"source {source!r}")
        if candidate:
            rows = rows.filter(key=candidate)
            said.append(f"candidate {candidate!r}")
        if not said:
            raise InvalidInput([FieldProblem("origin", "a filter needs a source, a candidate or a run group")])
        ids = list(rows.order_by("pk").values_list("pk", flat=True))
        return ids[:count] if count else ids, ", ".join(said)
    return list(items or []), "items named one by one"


def queue_create(
    *,
    name: str,
    rubric: str,
    owner: Any,
    origin: str = "items",
    items: list[int] | None = None,
    count: int | None = None,
    seed: int = 0,
    configuration: int | None = None,
    source: str | None = None,
    candidate: str | None = None,
    group: str | None = None,
    annotators: list[str] | tuple[str, ...] = (),
    adjudicators: list[str] | tuple[str, ...] = (),
    labels_per_item: int = 2,
    blind: bool = True,
    claim_seconds: int = 600,
) -> Any:
    """A queue of the rubric's items (from label next's picks, a filter, a random sample, a judge configuration's
    items or ids), with the people assigned. Its corrected intervals' widths now are kept to compare with later."""
    from evaluation.judging import selectors
    from evaluation.models import LabelQueue, QueueOrigin

    problems = []
    if not str(name).strip():
        problems.append(FieldProblem("name", "is required"))
    if origin not in QueueOrigin.values:
        problems.append(FieldProblem("origin", f"{origin!r} is not one of {', '.join(QueueOrigin.values)}"))
    if not 1 <= labels_per_item <= 10:
        problems.append(FieldProblem("labels_per_item", "must be from 1 to 10"))
    if not 30 <= claim_seconds <= 86_400:
        problems.append(FieldProblem("claim_seconds", "must be from 30 to 86400"))
    if count is not None and not 1 <= count <= QUEUE_MAX_ITEMS:
        problems.append(FieldProblem("count", f"must be from 1 to {QUEUE_MAX_ITEMS}"))
    if problems:
        raise InvalidInput(problems)
    try:
        found = rubric_get(rubric)
    except NotFound as exc:
        raise InvalidInput([FieldProblem("rubric", str(exc))]) from None
    people = _users(annotators, "annotators")
    settlers = _users(adjudicators, "adjudicators")
    try:
        config = selectors.estimate_configuration(found.slug, configuration)
    except NotFound as exc:
        if configuration is not None or origin in (QueueOrigin.LABEL_NEXT, QueueOrigin.JOB):
            raise InvalidInput([FieldProblem("configuration", str(exc))]) from None
        config = None
    ids, detail = _queue_picks(
        found,
        origin,
        count=count,
        seed=seed,
        configuration=config,
        items=items,
        source=source,
        candidate=candidate,
        group=group,
    )
    version = rubric_version_record(rubric=found)
    with transaction.atomic():
        queue = LabelQueue.objects.create(
            name=str(name).strip()[:200],
            rubric=found,
            rubric_version_id=version.version_id,
            configuration=config,
            owner=owner,
            labels_per_item=labels_per_item,
            blind=blind,
            claim_seconds=claim_seconds,
            origin=origin,
            origin_detail=detail[:300],
            start_widths=selectors.queue_widths(config) if config is not None else {},
        )
        queue.annotators.set(people)
        queue.adjudicators.set(settlers)
        queue_items_add(queue=queue, items=ids)
    return queue


def queue_items_add(*, queue: Any, items: list[int]) -> int:
    """Add items to a queue (those already in it are left as they are); InvalidInput names ids that do not
    exist or are not of the rubric's unit. Returns how many were added."""
    from evaluation.models import QueueItem

    wanted = list(dict.fromkeys(int(i) for i in items))
    known = set(_unit_items(queue.rubric).filter(pk__in=wanted).values_list("pk", flat=True))
    wrong = [i for i in wanted if i not in known]
    if wrong:
        kind = "conversation" if queue.rubric.unit == "session" else "candidate response"
        raise InvalidInput([FieldProblem("items", f"not a {kind} item (rubric {queue.rubric.slug!r}): {wrong[:10]}")])
    have = set(queue.entries.values_list("item_id", flat=True))
    new = [i for i in wanted if i not in have]
    if len(have) + len(new) > QUEUE_MAX_ITEMS:
        raise InvalidInput([FieldProblem("items", f"a queue holds at most {QUEUE_MAX_ITEMS} items")])
    start = (queue.entries.order_by("-position").values_list("position", flat=True).first() or 0) + 1
    QueueItem.objects.bulk_create(QueueItem(queue=queue, item_id=i, position=start + k) for k, i in enumerate(new))
    return len(new)


def queue_people_set(*, queue: Any, annotators: list[str] | None = None, adjudicators: list[str] | None = None) -> None:
    """Assign the people who label (and who settle disagreements); None leaves a list as it is."""
    if annotators is not None:
        queue.annotators.set(_users(annotators, "annotators"))
    if adjudicators is not None:
        queue.adjudicators.set(_users(adjudicators, "adjudicators"))


def _may_label(queue: Any, user: Any) -> bool:
    from evaluation.judging import selectors

    return selectors.queue_role(queue, user) in ("owner", "annotator")


def queue_claim(*, queue: Any, user: Any) -> Any:
    """The queue item the user labels now: the one they hold, else the first free one (fewest labels missing
    first, so items get their second label early; never one they labelled or skipped). The claim is a conditional
    UPDATE, so of two people racing for an item one wins and the other takes the next. None: nothing is free."""
    from django.db.models import Q

    from evaluation.models import QueueItem, QueueLabel

    if not _may_label(queue, user):
        raise NotFound(f"no queue {queue.pk} of yours to label")
    now = timezone.now()
    held = queue.entries.filter(claimed_by=user, claim_expires__gt=now).order_by("position").first()
    if held is None:
        free = Q(claimed_by=None) | Q(claim_expires__lte=now)
        mine = QueueLabel.objects.filter(entry__queue=queue, user=user).filter(
            Q(submitted_at__isnull=False) | Q(skipped=True)
        )
        for _attempt in range(3):
            candidates = list(
                queue.entries.filter(free, done__lt=queue.labels_per_item)
                .exclude(pk__in=mine.values("entry_id"))
                .order_by("-done", "position", "pk")
                .values_list("pk", flat=True)[:20]
            )
            for pk in candidates:
                won = QueueItem.objects.filter(free, pk=pk, done__lt=queue.labels_per_item).update(
                    claimed_by=user, claim_expires=now + timedelta(seconds=queue.claim_seconds)
                )
                if won:
                    held = QueueItem.objects.get(pk=pk)
                    break
            if held is not None or not candidates:
                break
        if held is None:
            return None
        QueueLabel.objects.update_or_create(entry=held, user=user, defaults={"shown_at": now})
    return held


def _queue_entry(queue: Any, item_id: int) -> Any:
    entry = queue.entries.filter(item_id=item_id).select_related("item").first()
    if entry is None:
        raise NotFound(f"item {item_id} is not in queue {queue.pk}")
    return entry


def _queue_values(queue: Any, values: dict[str, Any], *, every: bool) -> list[tuple[Any, str]]:
    """(dimension spec, level) per given value, under the rubric's current scales; InvalidInput names unknown or
    missing dimensions and values off the scale."""
    spec = rubric_spec(queue.rubric)
    known = {d.name: d for d in spec.dimensions}
    problems = [
        FieldProblem(n, f"rubric {spec.slug!r} has no such dimension") for n in sorted(set(values) - set(known))
    ]
    given = {n: v for n, v in values.items() if n in known and str(v).strip()}
    if every:
        problems += [FieldProblem(n, "is required") for n in known if n not in given]
    out = []
    for n, v in given.items():
        try:
            out.append((known[n], _level(known[n], v)))
        except InvalidInput as exc:
            problems += exc.problems
    if problems:
        raise InvalidInput(problems)
    return out


def _labels_write(item_id: int, user: Any, version_id: int, chosen: list[tuple[Any, str]], now: Any) -> None:
    """The person's labels of one item under one version, in three statements whatever the dimensions: the
    ones they had are changed, the others made (a labelling page submits every dimension at once)."""
    name = user.get_username()
    have = {
        a.dimension_id: a
        for a in Annotation.objects.filter(item_id=item_id, annotator=name, rubric_version_id=version_id)
    }
    new, changed = [], []
    for dim, level in chosen:
        score = float(dim.scale.score_of(level))
        found = have.get(dim.id)
        if found is None:
            new.append(
                Annotation(
                    item_id=item_id,
                    dimension_id=dim.id,
                    annotator=name,
                    rubric_version_id=version_id,
                    value=level,
                    score=score,
                    user=user,
                )
            )
        else:
            found.value, found.score, found.user, found.updated_at = level, score, user, now
            changed.append(found)
    Annotation.objects.bulk_create(new)
    Annotation.objects.bulk_update(changed, ["value", "score", "user", "updated_at"])


def queue_submit(
    *, queue: Any, user: Any, item_id: int, values: dict[str, Any], comment: str = "", skip: bool = False
) -> Any:
    """A person's labels of one queue item (every dimension), or a skip. The labels are Annotations under the
    rubric's current version, as every figure reads them; the turn keeps the seconds from shown to submitted.
    Allowed while the person holds the item, or for an item they labelled before (going back to change it);
    Conflict where the claim lapsed and the item went to someone else, or it has all the labels it needs."""
    from django.db.models import F

    from evaluation.models import QueueItem, QueueLabel

    if not _may_label(queue, user):
        raise NotFound(f"no queue {queue.pk} of yours to label")
    entry = _queue_entry(queue, item_id)
    chosen = [] if skip else _queue_values(queue, values, every=True)
    now = timezone.now()
    with transaction.atomic():
        locked = QueueItem.objects.select_for_update().get(pk=entry.pk)
        turn = QueueLabel.objects.filter(entry=locked, user=user).first()
        again = turn is not None and turn.submitted_at is not None
        holds = locked.claimed_by_id == user.pk
        lapsed_free = locked.claimed_by_id is None or (locked.claim_expires is not None and locked.claim_expires <= now)
        if not again and not holds:
            if not lapsed_free:
                raise Conflict(f"item {item_id} is being labelled by someone else: take the next item")
            if locked.done >= queue.labels_per_item:
                raise Conflict(f"item {item_id} has the {queue.labels_per_item} labels it needs")
        if turn is None:
            turn = QueueLabel(entry=locked, user=user, shown_at=now)
        if skip:
            if again:
                raise Conflict(f"item {item_id} is labelled already: change the labels instead of skipping")
            turn.skipped = True
        else:
            version = rubric_version_record(rubric=queue.rubric)
            _labels_write(locked.item_id, user, version.version_id, chosen, now)
            if not again:
                turn.submitted_at = now
                turn.seconds = max(0.0, (now - turn.shown_at).total_seconds())
                turn.skipped = False
            turn.comment = str(comment)[:5000]
        turn.save()
        updates: dict[str, Any] = {}
        if holds:
            updates |= {"claimed_by": None, "claim_expires": None}
        if not skip and not again:
            updates["done"] = F("done") + 1
        if updates:
            QueueItem.objects.filter(pk=locked.pk).update(**updates)
    return turn


def queue_adjudicate(*, queue: Any, user: Any, item_id: int, values: dict[str, Any]) -> int:
    """Settle an item's labels: the final value per dimension, stored as an Adjudication (the raw labels stay).
    The queue's owner may; so may its adjudicators, on items they did not label themselves."""
    from evaluation.judging import selectors
    from evaluation.models import Adjudication

    role = selectors.queue_role(queue, user)
    entry = _queue_entry(queue, item_id) if role in ("owner", "adjudicator") else None
    if entry is None:
        raise NotFound(f"no queue {queue.pk} of yours to adjudicate")
    if role != "owner" and Annotation.objects.filter(item_id=item_id, user=user).exists():
        raise Conflict("you labelled this item: a third person (or the queue's owner) settles it")
    chosen = _queue_values(queue, values, every=False)
    if not chosen:
        raise InvalidInput([FieldProblem("labels", "give the final label of at least one dimension")])
    version = rubric_version_record(rubric=queue.rubric)
    with transaction.atomic():
        for dim, level in chosen:
            Adjudication.objects.update_or_create(
                item_id=item_id,
                dimension_id=dim.id,
                rubric_version_id=version.version_id,
                defaults={
                    "value": level,
                    "score": float(dim.scale.score_of(level)),
                    "adjudicator": user.get_username(),
                    "user": user,
                    "queue": queue,
                },
            )
    return len(chosen)
