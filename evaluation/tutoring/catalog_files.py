"""The catalogue files as a record would load from them, and whether a loaded record's file has changed.

A persona or topic is read from its file by `load_catalog` only; a file edited afterwards is not what
the runs use. `file_changes` says so for the records a run uses, so the door that starts the run can
warn: it reads only those files, and only when the record came from a file.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluation import limits
from evaluation.errors import InvalidInput
from evaluation.models import Persona, Topic
from evaluation.tutoring.personas import persona_as_dict, split_known, validate_persona
from evaluation.tutoring.topics import KNOWN_KEYS as TOPIC_KEYS
from evaluation.tutoring.topics import topic_as_dict, validate_topic


def fingerprint(doc: Any) -> str:
    """A stable hash of a record as its file would hold it (key order and number formatting ignored)."""
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def persona_fields(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(persona id, the columns a valid persona file writes, `extra` holding the unknown keys)."""
    known, extra = split_known(data)
    fields = {**known, "extra": extra}
    fields.setdefault("age", None)
    for key in ("personality_traits", "common_mistakes", "behavioral_notes"):
        fields.setdefault(key, [])
    fields.setdefault("persona_specific_behaviors", {})
    fields.setdefault("grounding", {})
    return fields.pop("persona_id"), fields


def topic_fields(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(topic id, the columns a valid topic file writes, `extra` holding the unknown keys)."""
    known = {k: data[k] for k in TOPIC_KEYS if k in data}
    extra = {k: v for k, v in data.items() if k not in TOPIC_KEYS}
    return known.pop("topic_id"), {**known, "extra": extra}


def _path(label: str) -> Path:
    """A record's `source_file` (relative to the project for the shipped folders, else absolute)."""
    path = Path(label)
    return path if path.is_absolute() else Path(settings.BASE_DIR) / path


def _file_doc(record: Persona | Topic) -> tuple[dict[str, Any] | None, str]:
    """(the record as its file would load it now, "") or (None, why the file would not load)."""
    try:
        data = limits.json_loads(
            limits.decode_utf8(limits.read_bounded(_path(record.source_file), "CATALOG_MAX_FILE_BYTES")), field=""
        )
    except InvalidInput as exc:
        return None, str(exc.problems[0]) if exc.problems else "cannot be read"
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    if isinstance(record, Persona):
        problems = validate_persona(data)
        if problems:
            return None, str(problems[0])
        persona_id, fields = persona_fields(data)
        return persona_as_dict(Persona(persona_id=persona_id, **fields)), ""
    problems = validate_topic(data)
    if problems:
        return None, str(problems[0])
    topic_id, fields = topic_fields(data)
    return topic_as_dict(Topic(topic_id=topic_id, **fields)), ""


def file_changes(records: list[Persona | Topic]) -> list[str]:
    """A warning for each record whose file no longer holds what was loaded from it: the run uses the
    stored record, so the warning says how to take the file's version (or that the admin's edit wins)."""
    warnings = []
    for record in records:
        if not record.source_file or not record.loaded_fingerprint or not _path(record.source_file).is_file():
            continue  # made in the admin, loaded before fingerprints were kept, or from a folder now gone
        kind = "persona" if isinstance(record, Persona) else "topic"
        name = f"{kind} {record.persona_id if isinstance(record, Persona) else record.topic_id}"
        doc, problem = _file_doc(record)
        as_doc = persona_as_dict if isinstance(record, Persona) else topic_as_dict
        edited = fingerprint(as_doc(record)) != record.loaded_fingerprint
        if doc is None:
            warnings.append(
                f"{record.source_file} changed since {name} was loaded and would not load now ({problem}); "
                f"this run uses the loaded {kind}"
            )
        elif fingerprint(doc) != record.loaded_fingerprint:
            if edited:
                warnings.append(
                    f"{record.source_file} changed since {name} was loaded, and {name} was edited in the admin "
                    f"since: the admin's edit wins (manage.py load_catalog --force takes the file's instead)"
                )
            else:
                warnings.append(
                    f"{record.source_file} changed since {name} was loaded; this run uses the loaded {kind}: "
                    f"run manage.py load_catalog to use the file"
                )
    return warnings
