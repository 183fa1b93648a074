"""Proposition files (spec 002): parse and validate YAML, render {{templates}}.

A file holds one dimension's claims for one agent (or `_default`). Keys beyond the spec's
(`description`, `first_n`, `last_n`, `hard`, `notes`, ...) are kept. Honoured here: `first_n` /
`last_n` on a file or on one proposition limit which messages the judge sees.
"""

from dataclasses import dataclass, field
from typing import Any

import yaml

from evaluation import limits
from evaluation.drift.scorers import DIMENSIONS
from evaluation.errors import FieldProblem

SET_KEYS = ("dimension", "agent_id", "propositions")
PROPOSITION_KEYS = ("id", "claim", "weight", "inverted")
TEMPLATE_VARIABLES = ("agent_name", "channel_name", "recipient_name")


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


def parse_proposition_yaml(text: str, *, file: str = "") -> tuple[PropositionFile | None, list[FieldProblem]]:
    """Parse one file; returns (the file, []) or (None, every problem found)."""
    try:
        data = limits.yaml_load(text)  # aliases refused: `*a` repeated is how a small file expands without bound
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        return None, [FieldProblem(field="", reason=f"invalid YAML: {reason}", file=file, line=line)]
    if not isinstance(data, dict):
        return None, [
            FieldProblem(
                field="(document)", reason="must be a mapping with dimension, agent_id, propositions", file=file
            )
        ]

    problems = limits.value_problems(data, file=file)
    if problems:
        return None, problems
    dimension = data.get("dimension")
    if dimension not in DIMENSIONS:
        problems.append(FieldProblem("dimension", f"{dimension!r} is not one of {', '.join(DIMENSIONS)}", file))
    agent_id = data.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id.strip():
        problems.append(FieldProblem("agent_id", "is required (an agent id or '_default')", file))
    raw = data.get("propositions")
    if not isinstance(raw, list) or not raw:
        problems.append(FieldProblem("propositions", "must be a non-empty list", file))
        raw = []

    specs: list[PropositionSpec] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        label = f"propositions[{index}]"
        if not isinstance(item, dict):
            problems.append(FieldProblem(label, "must be a mapping with id and claim", file))
            continue
        pid = item.get("id")
        if isinstance(pid, str) and pid.strip():
            label = f"proposition {pid!r}"
        else:
            problems.append(FieldProblem(f"{label}.id", "is required", file))
            continue
        if pid in seen:
            problems.append(FieldProblem(label, "id is used twice in this file", file))
        seen.add(pid)
        claim = item.get("claim")
        if not isinstance(claim, str) or not claim.strip():
            problems.append(FieldProblem(f"{label}.claim", "is required", file))
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
            problems.append(FieldProblem(f"{label}.weight", f"{weight!r} must be a number from 0 to 1", file))
        inverted = item.get("inverted", False)
        if not isinstance(inverted, bool):
            problems.append(FieldProblem(f"{label}.inverted", f"{inverted!r} must be true or false", file))
        extra = {k: v for k, v in item.items() if k not in PROPOSITION_KEYS}
        for key in extra:
            if key not in ("first_n", "last_n"):
                warnings.append(f"{file}: {label}: unknown key {key!r} kept")
        specs.append(
            PropositionSpec(
                id=pid,
                claim=str(claim),
                weight=float(weight) if isinstance(weight, int | float) else 1.0,
                inverted=bool(inverted),
                extra=extra,
            )
        )
    if problems:
        return None, problems
    extra = {k: v for k, v in data.items() if k not in SET_KEYS}
    for key in extra:
        if key not in ("first_n", "last_n", "description"):
            warnings.append(f"{file}: unknown key {key!r} kept")
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
