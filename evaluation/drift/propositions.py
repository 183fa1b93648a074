"""Proposition files (spec 002): validate YAML against propositions/schema.json, render {{templates}}.

A file holds one dimension's claims for one agent (or `_default`). The folder names the dimension
and the file name the agent when the file leaves them out (`adherence/_default.yaml`). Keys beyond
the spec's (`description`, `first_n`, `last_n`, `hard`, `notes`, ...) are kept; `first_n` /
`last_n` bound the trajectory the judge is shown as context (the first n and the last n messages).
"""

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePath
from typing import Any

import yaml

from evaluation import limits
from evaluation.conf import setting
from evaluation.errors import FieldProblem
from evaluation.jsonschema_errors import schema_problems

SET_KEYS = ("dimension", "agent_id", "propositions")
PROPOSITION_KEYS = ("id", "claim", "weight", "inverted")
TEMPLATE_VARIABLES = ("agent_name", "channel_name", "recipient_name")
_TEMPLATE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@cache
def proposition_schema() -> dict[str, Any]:
    return json.loads((Path(setting("PROPOSITIONS_DIR")) / "schema.json").read_text())


@dataclass
class PropositionSpec:
    id: str
    claim: str
    weight: float = 1.0
    inverted: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class PropositionFile:
    dimension: str
    agent_id: str
    propositions: list[PropositionSpec]
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _known_keys(schema: dict[str, Any]) -> tuple[set[str], set[str]]:
    item = schema["properties"]["propositions"]["items"]
    return set(schema["properties"]), set(item["properties"])


def parse_proposition_yaml(text: str, *, file: str = "") -> tuple[PropositionFile | None, list[FieldProblem]]:
    """Parse one file; returns (the file, []) or (None, every problem found).

    `file` is the file's path from the propositions folder's parent (`propositions/adherence/rex.yaml`):
    its folder is the dimension and its name the agent when the document does not say."""
    try:
        data = limits.yaml_load(text)  # aliases refused: `*a` repeated is how a small file expands without bound
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        return None, [FieldProblem(field="", reason=f"invalid YAML: {reason}", file=file, line=line)]
    problems = limits.value_problems(data, file=file)
    if problems:
        return None, problems
    schema = proposition_schema()
    problems = schema_problems(schema, data, file=file)
    if problems:
        return None, problems

    where = PurePath(file)
    dimension = data.get("dimension") or (where.parent.name if where.parent.name else "")
    agent_id = data.get("agent_id") or where.stem
    if not dimension:
        problems.append(FieldProblem("dimension", "is required (or put the file in a folder named after it)", file))
    if not agent_id:
        problems.append(FieldProblem("agent_id", "is required (an agent id or '_default')", file))
    file_keys, item_keys = _known_keys(schema)
    warnings: list[str] = []
    specs: list[PropositionSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(data["propositions"]):
        pid = item["id"]
        label = f"propositions.{index}"
        if pid in seen:
            problems.append(FieldProblem(f"{label}.id", f"{pid!r} is used twice in this file", file))
        seen.add(pid)
        extra = {k: v for k, v in item.items() if k not in PROPOSITION_KEYS}
        warnings += [f"{file}: {label}: unknown key {key!r} kept" for key in extra if key not in item_keys]
        unknown_vars = sorted({m.group(1) for m in _TEMPLATE.finditer(item["claim"])} - set(TEMPLATE_VARIABLES))
        if unknown_vars:
            warnings.append(
                f"{file}: {label}.claim: unknown template variable(s) {', '.join(unknown_vars)} "
                f"(known: {', '.join(TEMPLATE_VARIABLES)}); the judge would see them as written"
            )
        specs.append(
            PropositionSpec(
                id=pid,
                claim=item["claim"],
                weight=float(item.get("weight", 1.0)),
                inverted=bool(item.get("inverted", False)),
                extra=extra,
            )
        )
    if problems:
        return None, problems
    extra = {k: v for k, v in data.items() if k not in SET_KEYS}
    warnings += [f"{file}: unknown key {key!r} kept" for key in extra if key not in file_keys]
    return PropositionFile(
        dimension=str(dimension), agent_id=str(agent_id), propositions=specs, extra=extra, warnings=warnings
    ), []


def proposition_file_as_dict(
    dimension: str, agent_id: str, extra: dict[str, Any], propositions: list[PropositionSpec]
) -> dict[str, Any]:
    """The YAML document for a set, keys in the spec's order, unknown keys kept."""
    items = []
    for p in propositions:
        item: dict[str, Any] = {"id": p.id, "claim": p.claim, "weight": p.weight}
        if p.inverted:
            item["inverted"] = True
        item.update(p.extra)
        items.append(item)
    doc: dict[str, Any] = {"dimension": dimension, "agent_id": agent_id}
    doc.update(extra)
    doc["propositions"] = items
    return doc


@dataclass(frozen=True)
class SetReplacement:
    """What loading a proposition file would replace in the database (for the loading report)."""

    dimension: str
    agent_id: str
    previous_file: str
    """The file the stored set came from ("" when it was made in the admin)."""
    dropped: tuple[str, ...]
    """Stored proposition ids the new file no longer has (they are deleted when it loads)."""

    def __str__(self) -> str:
        where = f" from {self.previous_file}" if self.previous_file else ""
        gone = f"; drops {', '.join(self.dropped)}" if self.dropped else ""
        return f"replaces {self.dimension}/{self.agent_id}{where}{gone}"
