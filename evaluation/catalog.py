"""Load the catalogue files (personas, topics, propositions) into the database, and export it back.

Loading is an idempotent upsert per file: an invalid file is reported (file, field, reason) and
skipped, every other file still loads, and nothing already stored is lost. Once staff edit a loaded
record in the admin, the admin is its source of truth: loading reports the conflict and leaves the
record alone unless forced. Each record keeps the hash of what its file loaded (`loaded_fingerprint`);
a record whose current state hashes differently was edited since.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from django.conf import settings
from django.db import models, transaction

from evaluation import limits
from evaluation.drift.services import (
    PropositionSpec,
    parse_cast,
    parse_proposition_yaml,
    proposition_file_as_dict,
    proposition_set_replacement,
)
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.models import Agent, Persona, Proposition, PropositionSet, Topic
from evaluation.tutoring.selectors import persona_as_dict, topic_as_dict
from evaluation.tutoring.services import fingerprint, persona_fields, topic_fields, validate_persona, validate_topic

Outcome = Literal["created", "updated", "unchanged", "replaced", "skipped", "rejected"]
"""What loading did with one file: `replaced` overwrote a record another file (or the admin) had made;
`skipped` left a record staff edited in the admin; `rejected` refused an invalid file."""


@dataclass(frozen=True)
class FileOutcome:
    """One file's line in the load report."""

    file: str
    """The file, relative to its folder's parent (`personas/ace.json`)."""
    outcome: Outcome
    record: str = ""
    """The record it names (`persona ace`), where the file was read that far."""
    detail: str = ""
    """Why: the conflict, what was replaced, or the first problem of a rejected file."""

    def __str__(self) -> str:
        text = f"{self.file}: {self.outcome}"
        if self.record:
            text += f" {self.record}"
        return text + (f" ({self.detail})" if self.detail else "")


@dataclass
class LoadReport:
    """What a load did: per file an outcome, counts per kind, warnings (kept unknown keys, conflicts) and
    errors (rejected files)."""

    loaded: dict[str, int] = field(default_factory=lambda: {"personas": 0, "topics": 0, "propositions": 0, "cast": 0})
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    files: list[FileOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def count(self, outcome: Outcome) -> int:
        return sum(1 for f in self.files if f.outcome == outcome)

    def reject(self, label: str, problems: list[Any]) -> None:
        self.errors.extend(str(p) for p in problems)
        first = str(problems[0]) if problems else "invalid"
        self.files.append(FileOutcome(label, "rejected", detail=first.removeprefix(f"{label}: ")))


def _store(
    report: LoadReport,
    *,
    label: str,
    kind: str,
    record: str,
    existing: models.Model | None,
    source: Callable[[Any], str],
    as_doc: Callable[[Any], Any],
    write: Callable[[], models.Model],
    force: bool,
    count: int = 1,
) -> bool:
    """Write one record from one file, unless staff edited it since it was loaded (or made it in the
    admin) and loading is not forced; record the file's outcome. Returns whether it was written."""
    before = fingerprint(as_doc(existing)) if existing is not None else ""
    previous = source(existing) if existing is not None else ""
    if existing is not None:
        stored = getattr(existing, "loaded_fingerprint", "")
        # No stored hash: loaded before hashes were kept (trust it) or never loaded at all (the admin made it).
        edited = (before != stored) if stored else not previous
        if edited and not force:
            where = f"loaded from {previous}" if previous else "made in the admin"
            detail = f"edited in the admin since it was {where}; the admin's version is kept, --force overwrites it"
            report.files.append(FileOutcome(label, "skipped", record, detail))
            report.warnings.append(f"{label}: {record} {detail}")
            return False
    obj = write()
    after = fingerprint(as_doc(obj))
    type(obj)._default_manager.filter(pk=obj.pk).update(loaded_fingerprint=after)
    outcome: Outcome
    detail = ""
    if existing is None:
        outcome = "created"
    elif previous != label:
        outcome, detail = "replaced", (f"was loaded from {previous}" if previous else "was made in the admin")
    elif before == after and getattr(existing, "loaded_fingerprint", "") == after:
        outcome = "unchanged"
    else:
        outcome = "updated"
    if force and existing is not None and before != getattr(existing, "loaded_fingerprint", before):
        detail = "; ".join(filter(None, [detail, "overwrote edits made in the admin (--force)"]))
    report.files.append(FileOutcome(label, outcome, record, detail))
    report.loaded[kind] += count
    return True


def _read_text(path: Path, label: str) -> tuple[str | None, list[FieldProblem]]:
    """The file's text, refused past CATALOG_MAX_FILE_BYTES (from its size, before reading it) or
    when not UTF-8 (naming the byte offset)."""
    try:
        return limits.decode_utf8(
            limits.read_bounded(path, "CATALOG_MAX_FILE_BYTES", file=label), field="", file=label
        ), []
    except InvalidInput as exc:
        return None, exc.problems


def _read_json(path: Path, label: str) -> tuple[Any, list[FieldProblem]]:
    text, problems = _read_text(path, label)
    if text is None:
        return None, problems
    try:
        data = limits.json_loads(text, field="", file=label)
    except InvalidInput as exc:
        return None, exc.problems
    return data, limits.value_problems(data, file=label)


def _read_yaml(path: Path, label: str) -> tuple[Any, list[FieldProblem]]:
    text, problems = _read_text(path, label)
    if text is None:
        return None, problems
    try:
        data = limits.yaml_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = f"invalid YAML: {getattr(exc, 'problem', None) or exc}"
        return None, [FieldProblem("", reason, label, line=mark.line + 1 if mark else None)]
    return data, limits.value_problems(data, file=label)


def load_persona_file(path: Path, report: LoadReport, label: str, force: bool = False) -> None:
    data, problems = _read_json(path, label)
    if not problems:
        problems = validate_persona(data, file=label)
    if problems:
        report.reject(label, problems)
        return
    persona_id, defaults = persona_fields(data)
    for key in defaults["extra"]:
        report.warnings.append(f"{label}: unknown key {key!r} kept")
    defaults["source_file"] = label
    _store(
        report,
        label=label,
        kind="personas",
        record=f"persona {persona_id}",
        existing=Persona.objects.filter(persona_id=persona_id).first(),
        source=lambda p: p.source_file,
        as_doc=persona_as_dict,
        write=lambda: Persona.objects.update_or_create(persona_id=persona_id, defaults=defaults)[0],
        force=force,
    )


def load_topic_file(path: Path, report: LoadReport, label: str, force: bool = False) -> None:
    data, problems = _read_json(path, label)
    if not problems:
        problems = validate_topic(data, file=label)
    if problems:
        report.reject(label, problems)
        return
    topic_id, known = topic_fields(data)
    for key in known["extra"]:
        report.warnings.append(f"{label}: unknown key {key!r} kept")
    _store(
        report,
        label=label,
        kind="topics",
        record=f"topic {topic_id}",
        existing=Topic.objects.filter(topic_id=topic_id).first(),
        source=lambda t: t.source_file,
        as_doc=topic_as_dict,
        write=lambda: Topic.objects.update_or_create(topic_id=topic_id, defaults={**known, "source_file": label})[0],
        force=force,
    )


def _proposition_set_doc(pset: PropositionSet) -> dict[str, Any]:
    specs = [
        PropositionSpec(p.proposition_id, p.claim, p.weight, p.inverted, p.extra)
        for p in pset.propositions.order_by("position", "pk")
    ]
    return proposition_file_as_dict(pset.dimension, pset.agent_key, pset.extra, specs)


def load_proposition_file(path: Path, report: LoadReport, label: str, force: bool = False) -> None:
    text, problems = _read_text(path, label)
    if text is None:
        report.reject(label, problems)
        return
    parsed, problems = parse_proposition_yaml(text, file=label)
    if parsed is None:
        report.reject(label, problems)
        return
    report.warnings.extend(parsed.warnings)
    replacement = proposition_set_replacement(parsed, file=label)
    if replacement is not None and replacement.dropped:
        report.warnings.append(f"{label}: {replacement}")

    def write() -> PropositionSet:
        pset, _ = PropositionSet.objects.update_or_create(
            dimension=parsed.dimension,
            agent_key=parsed.agent_id,
            defaults={"extra": parsed.extra, "source_file": label},
        )
        # The file is the source of truth for its set: claims dropped from the file go.
        pset.propositions.exclude(proposition_id__in=[p.id for p in parsed.propositions]).delete()
        for position, spec in enumerate(parsed.propositions):
            Proposition.objects.update_or_create(
                proposition_set=pset,
                proposition_id=spec.id,
                defaults={
                    "claim": spec.claim,
                    "weight": spec.weight,
                    "inverted": spec.inverted,
                    "extra": spec.extra,
                    "position": position,
                },
            )
        return pset

    _store(
        report,
        label=label,
        kind="propositions",
        record=f"proposition set {parsed.dimension}/{parsed.agent_id}",
        existing=PropositionSet.objects.filter(dimension=parsed.dimension, agent_key=parsed.agent_id).first(),
        source=lambda pset: pset.source_file,
        as_doc=_proposition_set_doc,
        write=write,
        force=force,
        count=len(parsed.propositions),  # counted in claims, not files
    )


def _cast_doc(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.pk,
        "display_name": agent.display_name,
        "persona_spec": agent.persona_spec,
        **(agent.extra or {}),
    }


def load_cast_file(path: Path, report: LoadReport, label: str, force: bool = False) -> None:
    """A character agent: id, display_name, persona_spec; other keys (nudge, ...) kept in extra."""
    data, problems = _read_yaml(path, label)
    if problems:
        report.reject(label, problems)
        return
    member, problems = parse_cast(data, file=label)
    if member is None:
        report.reject(label, problems)
        return
    report.warnings.extend(member.warnings)
    _store(
        report,
        label=label,
        kind="cast",
        record=f"agent {member.id}",
        existing=Agent.objects.filter(id=member.id).first(),
        # Agents keep no file name: a character agent came from a cast file, any other kind from the admin.
        source=lambda agent: label if agent.kind == "character" else "",
        as_doc=_cast_doc,
        write=lambda: Agent.objects.update_or_create(
            id=member.id,
            defaults={
                "display_name": member.display_name,
                "persona_spec": member.persona_spec,
                "kind": "character",
                "extra": member.extra,
            },
        )[0],
        force=force,
    )


def _label(path: Path) -> str:
    """The file as records and messages name it: relative to the project for the shipped folders
    (`personas/ace.json`), absolute elsewhere, so a file from another folder that names the same record
    is told apart from the one it replaces."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path(settings.BASE_DIR).resolve()))
    except ValueError:
        return str(resolved)


def catalog_load(
    *,
    personas_dir: Path | None,
    topics_dir: Path | None,
    propositions_dir: Path | None,
    cast_dir: Path | None = None,
    force: bool = False,
) -> LoadReport:
    """Load every file under the given folders; each file is its own transaction. `force` overwrites
    records staff edited in the admin."""
    report = LoadReport()
    jobs = []
    if cast_dir:
        jobs += [(p, load_cast_file) for p in sorted(cast_dir.glob("*.yaml"))]
    if personas_dir:
        jobs += [(p, load_persona_file) for p in sorted(personas_dir.glob("*.json")) if p.name != "schema.json"]
    if topics_dir:
        jobs += [(p, load_topic_file) for p in sorted(topics_dir.glob("*.json"))]
    if propositions_dir:
        jobs += [(p, load_proposition_file) for p in sorted(propositions_dir.glob("*/*.y*ml"))]
    for path, loader in jobs:
        label = _label(path)
        with transaction.atomic():
            loader(path, report, label, force)
    return report


def catalog_export(
    *, personas_dir: Path | None, topics_dir: Path | None, propositions_dir: Path | None, cast_dir: Path | None = None
) -> list[Path]:
    """Write the database back to files; returns the files written."""
    written: list[Path] = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)

    if personas_dir:
        for persona in Persona.objects.all():
            write(
                personas_dir / f"{persona.persona_id}.json",
                json.dumps(persona_as_dict(persona), indent=2, ensure_ascii=False) + "\n",
            )
    if topics_dir:
        for topic in Topic.objects.all():
            write(
                topics_dir / f"{topic.topic_id}.json",
                json.dumps(topic_as_dict(topic), indent=2, ensure_ascii=False) + "\n",
            )
    if cast_dir:
        for agent in Agent.objects.filter(kind="character"):
            write(
                cast_dir / f"{agent.pk}.yaml",
                yaml.safe_dump(_cast_doc(agent), sort_keys=False, allow_unicode=True, width=1000),
            )
    if propositions_dir:
        for pset in PropositionSet.objects.all():
            doc = _proposition_set_doc(pset)
            write(
                propositions_dir / pset.dimension / f"{pset.agent_key}.yaml",
                yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000),
            )
    return written
