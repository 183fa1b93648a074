"""Load the catalogue files (personas, topics, propositions) into the database, and export it back.

Loading is an idempotent upsert per file: an invalid file is reported (file, field, reason) and
skipped, every other file still loads, and nothing already stored is lost.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.db import transaction

from evaluation import limits
from evaluation.drift.services import PropositionSpec, parse_proposition_yaml, proposition_file_as_dict
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.models import Agent, Persona, Proposition, PropositionSet, Topic
from evaluation.tutoring.selectors import persona_as_dict, topic_as_dict
from evaluation.tutoring.services import TOPIC_KEYS, split_known, validate_persona, validate_topic


@dataclass
class LoadReport:
    """What a load did: counts per kind, warnings (kept unknown keys) and errors (skipped files)."""

    loaded: dict[str, int] = field(default_factory=lambda: {"personas": 0, "topics": 0, "propositions": 0, "cast": 0})
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


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


def load_persona_file(path: Path, report: LoadReport, label: str) -> None:
    data, problems = _read_json(path, label)
    if not problems:
        problems = validate_persona(data, file=label)
    if problems:
        report.errors.extend(str(p) for p in problems)
        return
    known, extra = split_known(data)
    for key in extra:
        report.warnings.append(f"{label}: unknown key {key!r} kept")
    defaults = {**known, "extra": extra, "source_file": label}
    defaults.setdefault("age", None)
    for key in ("personality_traits", "common_mistakes", "behavioral_notes"):
        defaults.setdefault(key, [])
    defaults.setdefault("persona_specific_behaviors", {})
    Persona.objects.update_or_create(persona_id=defaults.pop("persona_id"), defaults=defaults)
    report.loaded["personas"] += 1


def load_topic_file(path: Path, report: LoadReport, label: str) -> None:
    data, problems = _read_json(path, label)
    if not problems:
        problems = validate_topic(data, file=label)
    if problems:
        report.errors.extend(str(p) for p in problems)
        return
    known = {k: data[k] for k in TOPIC_KEYS if k in data}
    extra = {k: v for k, v in data.items() if k not in TOPIC_KEYS}
    for key in extra:
        report.warnings.append(f"{label}: unknown key {key!r} kept")
    Topic.objects.update_or_create(
        topic_id=known.pop("topic_id"), defaults={**known, "extra": extra, "source_file": label}
    )
    report.loaded["topics"] += 1


def load_proposition_file(path: Path, report: LoadReport, label: str) -> None:
    text, problems = _read_text(path, label)
    if text is None:
        report.errors.extend(str(p) for p in problems)
        return
    parsed, problems = parse_proposition_yaml(text, file=label)
    if parsed is None:
        report.errors.extend(str(p) for p in problems)
        return
    report.warnings.extend(parsed.warnings)
    with transaction.atomic():
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
    report.loaded["propositions"] += len(parsed.propositions)


CAST_KEYS = ("id", "display_name", "persona_spec")


def load_cast_file(path: Path, report: LoadReport, label: str) -> None:
    """A character agent: id, display_name, persona_spec; other keys (nudge, ...) kept in extra."""
    data, problems = _read_yaml(path, label)
    if problems:
        report.errors.extend(str(p) for p in problems)
        return
    if not isinstance(data, dict):
        report.errors.append(
            str(FieldProblem("(document)", "must be a mapping with id, display_name, persona_spec", label))
        )
        return
    problems = [
        FieldProblem(key, "is required (a non-empty string)", label)
        for key in CAST_KEYS
        if not isinstance(data.get(key), str) or not data[key].strip()
    ]
    if problems:
        report.errors.extend(str(p) for p in problems)
        return
    extra = {k: v for k, v in data.items() if k not in CAST_KEYS}
    Agent.objects.update_or_create(
        id=data["id"],
        defaults={
            "display_name": data["display_name"],
            "persona_spec": data["persona_spec"],
            "kind": "character",
            "extra": extra,
        },
    )
    report.loaded["cast"] += 1


def catalog_load(
    *, personas_dir: Path | None, topics_dir: Path | None, propositions_dir: Path | None, cast_dir: Path | None = None
) -> LoadReport:
    """Load every file under the given folders; each file is its own transaction."""
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
        base = path.parent.parent if loader is load_proposition_file else path.parent
        label = str(path.relative_to(base.parent)) if base.parent in path.parents else str(path)
        with transaction.atomic():
            loader(path, report, label)
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
            doc = {
                "id": agent.pk,
                "display_name": agent.display_name,
                "persona_spec": agent.persona_spec,
                **(agent.extra or {}),
            }
            write(cast_dir / f"{agent.pk}.yaml", yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000))
    if propositions_dir:
        for pset in PropositionSet.objects.prefetch_related("propositions"):
            specs = [
                PropositionSpec(p.proposition_id, p.claim, p.weight, p.inverted, p.extra)
                for p in pset.propositions.all()
            ]
            doc = proposition_file_as_dict(pset.dimension, pset.agent_key, pset.extra, specs)
            write(
                propositions_dir / pset.dimension / f"{pset.agent_key}.yaml",
                yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000),
            )
    return written
