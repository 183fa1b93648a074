"""Ingest character agents' messages: one JSON object, a JSON list, or JSON lines (JSONL).

Each record: {"agent": id, "channel": name, "text": ..., "recipient": optional, "time": ISO 8601
(optional, default now)}. All records are checked first; any problem (named by line or index and
field) stores nothing.
"""

import json
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from evaluation import limits
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.models import Agent, AgentMessage


def parse_records(body: str | bytes) -> list[tuple[str, Any]]:
    """[(where, record)] from a JSON object, a JSON list, or JSON lines; raises InvalidInput, or
    TooLarge past INGEST_MAX_RECORDS records."""
    text = limits.decode_utf8(body) if isinstance(body, bytes) else body
    stripped = text.strip()
    if not stripped:
        raise InvalidInput([FieldProblem("body", "is empty")])
    most = limits.limit("INGEST_MAX_RECORDS")
    if stripped[0] in "[{":
        try:
            limits.json_depth_check(stripped)
            data = json.loads(stripped)
        except json.JSONDecodeError:
            pass  # JSON lines, read below
        else:
            if isinstance(data, list):
                if len(data) > most:
                    raise limits.too_large("body", f"{len(data)} records", "INGEST_MAX_RECORDS")
                return [(f"[{i}]", r) for i, r in enumerate(data)]
            return [("body", data)]
    records: list[tuple[str, Any]] = []
    problems: list[FieldProblem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(records) + len(problems) >= most:
            raise limits.too_large("body", f"more than {most} records", "INGEST_MAX_RECORDS")
        try:
            records.append((f"line {number}", limits.json_loads(line, field="")))
        except InvalidInput as exc:
            problems.extend(FieldProblem("", p.reason, line=number) for p in exc.problems)
    if problems:
        raise InvalidInput(problems)
    return records


def messages_ingest(records: list[tuple[str, Any]], *, source: str = "ingested") -> list[AgentMessage]:
    agents = {a.pk: a for a in Agent.objects.filter(pk__in=[r.get("agent") for _, r in records if isinstance(r, dict)])}
    problems: list[FieldProblem] = []
    rows = []
    for where, record in records:
        if not isinstance(record, dict):
            problems.append(FieldProblem(where, "must be an object with agent, channel, text"))
            continue
        agent = agents.get(str(record.get("agent")))
        if agent is None:
            problems.append(FieldProblem(f"{where}.agent", f"no agent {record.get('agent')!r}"))
        for key in ("channel", "text"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                problems.append(FieldProblem(f"{where}.{key}", "is required (a non-empty string)"))
        when = timezone.now()
        if record.get("time") is not None:
            parsed = parse_datetime(str(record["time"]).replace("Z", "+00:00"))
            if parsed is None:
                problems.append(FieldProblem(f"{where}.time", f"{record['time']!r} is not an ISO 8601 time"))
            else:
                when = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
        recipient = record.get("recipient") or ""
        if not isinstance(recipient, str):
            problems.append(FieldProblem(f"{where}.recipient", "must be a string"))
        if agent is not None and not problems:
            rows.append(
                AgentMessage(
                    agent=agent,
                    channel=record["channel"].strip().lstrip("#"),
                    recipient=recipient,
                    text=record["text"].strip(),
                    created_at=when,
                    source=source,
                )
            )
    if problems:
        raise InvalidInput(problems)
    with transaction.atomic():
        return AgentMessage.objects.bulk_create(rows)


def _iso(value: datetime) -> str:
    return value.isoformat()
