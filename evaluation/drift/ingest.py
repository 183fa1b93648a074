"""Ingest character agents' messages: one JSON object, a JSON list, or JSON lines (JSONL).

Each record: {"agent": id, "channel": name, "text": ..., "recipient": optional, "time": ISO 8601
(optional, default now)}. All records are checked first, through one DRF serializer (many=True);
any problem (named by line or index and field) stores nothing.
"""

from datetime import UTC
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework import serializers
from rest_framework.settings import api_settings

from evaluation import limits
from evaluation.errors import FieldProblem, InvalidInput
from evaluation.models import Agent, AgentMessage

CHANNEL_MAX_CHARS = 100
"""AgentMessage.channel's and .recipient's column width."""


REPORTED_RECORDS = 20
"""A refused body names the problems of its first 20 bad records, and how many more there are."""


def _bounded(problems: list[FieldProblem]) -> list[FieldProblem]:
    """The problems of the first REPORTED_RECORDS records that have any, then one line counting the rest."""
    records: list[str | int | None] = []
    for p in problems:
        key = p.line if p.line is not None else p.field.split(".")[0]
        if key not in records:
            records.append(key)
    if len(records) <= REPORTED_RECORDS:
        return problems
    kept = set(records[:REPORTED_RECORDS])
    shown = [p for p in problems if (p.line if p.line is not None else p.field.split(".")[0]) in kept]
    more = len(records) - REPORTED_RECORDS
    return [
        *shown,
        FieldProblem(
            "body", f"{more} more record(s) have problems ({len(records)} in all; the first {REPORTED_RECORDS} shown)"
        ),
    ]


def parse_records(body: str | bytes) -> list[tuple[str, Any]]:
    """[(where, record)] from a JSON object, a JSON list, or JSON lines; raises InvalidInput, or
    TooLarge past INGEST_MAX_RECORDS records."""
    text = limits.decode_utf8(body) if isinstance(body, bytes) else body
    stripped = text.strip()
    if not stripped:
        raise InvalidInput([FieldProblem("body", "is empty")])
    most = limits.limit("INGEST_MAX_RECORDS")
    if stripped[0] in "[{":
        limits.json_depth_check(stripped)
        try:
            data = limits.json_value(stripped)
        except InvalidInput:
            pass  # JSON lines, read below
        else:
            if isinstance(data, list):
                if len(data) > most:
                    raise limits.too_large("body", f"{len(data)} records", "INGEST_MAX_RECORDS")
                whole = [(f"[{i}]", r) for i, r in enumerate(data)]
            else:
                whole = [("body", data)]
            unstorable = [p for where, record in whole for p in limits.text_problems(record, where=where)]
            if unstorable:
                raise InvalidInput(_bounded(unstorable))
            return whole
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
            problems.extend(FieldProblem(p.field, p.reason, line=number) for p in exc.problems)
    if problems:
        raise InvalidInput(_bounded(problems))
    return records


class DriftMessageInput(serializers.Serializer):
    """One message a character agent wrote (the records an ingest body holds)."""

    agent = limits.StringField(max_length=64, help_text="The agent's id.")
    channel = limits.StringField(help_text="The channel, with or without '#'.")
    text = limits.StringField()
    recipient = limits.StringField(required=False, allow_blank=True, default="", max_length=CHANNEL_MAX_CHARS)
    time = serializers.DateTimeField(required=False, default_timezone=UTC, help_text="ISO 8601 (default: now).")

    def validate_channel(self, value: str) -> str:
        name = value.lstrip("#")
        if not name:
            raise serializers.ValidationError("names no channel: only '#'")
        if len(name) > CHANNEL_MAX_CHARS:
            raise serializers.ValidationError(f"is {len(name)} characters: at most {CHANNEL_MAX_CHARS} (without '#')")
        return name

    def validate_agent(self, value: str) -> str:
        if value not in self.context["agents"]:
            raise serializers.ValidationError(f"no agent {value!r}")
        return value


def _problems(where: str, errors: Any) -> list[FieldProblem]:
    """DRF's errors for one record as FieldProblems named `<where>.<field>`."""
    if isinstance(errors, dict):
        return [
            p
            for key, value in errors.items()
            for p in _problems(where if key == api_settings.NON_FIELD_ERRORS_KEY else f"{where}.{key}", value)
        ]
    if isinstance(errors, list):
        return [p for value in errors for p in _problems(where, value)]
    return [FieldProblem(where, str(errors))]


def messages_ingest(records: list[tuple[str, Any]], *, source: str = "ingested") -> list[AgentMessage]:
    """Validate every record (DriftMessageInput, many=True) and store them all, or none with every problem."""
    wanted = {str(r.get("agent")) for _, r in records if isinstance(r, dict)}
    agents = {a.pk: a for a in Agent.objects.filter(pk__in=wanted)}
    batch = DriftMessageInput(data=[r for _, r in records], many=True, context={"agents": agents})
    if not batch.is_valid():
        errors = batch.errors
        by_index = errors if isinstance(errors, dict) else dict(enumerate(errors))  # newer DRF: {index: errors}
        problems = [p for index, found in sorted(by_index.items()) for p in _problems(records[index][0], found)]
        raise InvalidInput(_bounded(problems) or [FieldProblem("body", "must be a list of messages")])
    rows = [
        AgentMessage(
            agent=agents[record["agent"]],
            channel=record["channel"],
            recipient=record["recipient"],
            text=record["text"],
            created_at=record.get("time") or timezone.now(),
            source=source,
        )
        for record in batch.validated_data
    ]
    with transaction.atomic():
        return AgentMessage.objects.bulk_create(rows)
