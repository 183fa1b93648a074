"""Reading conversations from outside: JSON and JSONL transcripts, plain text with speaker prefixes,
and candidate-response sets. Parsing only; every problem names the record, the field and, where
there are lines, the line. Storing is services.transcripts_import's job."""

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from evaluation.errors import FieldProblem, InvalidInput
from evaluation.limits import decode_utf8, json_loads, limit, too_large, value_problems

FORMATS = ("auto", "json", "jsonl", "text", "candidates")
SPEAKERS = {"tutor": "tutor", "teacher": "tutor", "assistant": "tutor", "student": "student", "user": "student"}
"""Speaker names and the role each becomes; other names ("system", "narrator") are kept as written, lower case."""
TRANSCRIPT_KEYS = {"id", "messages", "metadata", "labels", "annotator", "source", "topic"}
CANDIDATE_KEYS = {"conversation_id", "conversation_history", "anno_llm_responses", "source", "Data", "topic", "Topic"}


@dataclass(frozen=True)
class Label:
    """One annotator's raw label of one dimension, as the file gave it."""

    annotator: str
    dimension: str
    value: Any
    where: str
    """The field path, for errors: `[3].labels.pacing`."""


@dataclass(frozen=True)
class ParsedItem:
    key: str
    """The candidate's name; "" for the whole conversation."""
    response: str
    labels: tuple[Label, ...] = ()


@dataclass(frozen=True)
class ParsedTranscript:
    """One conversation read from a file, not yet checked against a rubric or stored."""

    kind: str
    """"session" (a transcript, judged whole) or "response" (candidate responses in context)."""
    source: str
    external_id: str
    messages: tuple[tuple[str, str], ...]
    metadata: dict[str, Any]
    topic_id: str
    items: tuple[ParsedItem, ...]
    where: str
    """How errors name this record: `record 3 (id 'abc')`, `line 7`."""
    line: int | None = None
    labelled: bool = field(default=False)

    def content_hash(self) -> str:
        body = [
            self.messages,
            self.metadata,
            self.topic_id,
            [
                (i.key, i.response, [(lab.annotator, lab.dimension, str(lab.value)) for lab in i.labels])
                for i in self.items
            ],
        ]
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class _Reader:
    file: str
    source: str
    annotator: str
    speaker_separator: str = ":"
    problems: list[FieldProblem] = field(default_factory=list)

    def problem(self, where: str, reason: str, line: int | None = None) -> None:
        self.problems.append(FieldProblem(where, reason, self.file, line=line))

    # --- records -------------------------------------------------------------------------------

    def record(self, data: Any, where: str, line: int | None, kind: str | None) -> ParsedTranscript | None:
        if not isinstance(data, dict):
            self.problem(where, f"must be a JSON object, not {type(data).__name__}", line)
            return None
        too_big = value_problems(data, file=self.file, where=where)
        if too_big:
            self.problems.extend(FieldProblem(p.field, p.reason, p.file, line=line) for p in too_big)
            return None
        if kind == "response" or (kind is None and "anno_llm_responses" in data):
            return self.candidates(data, where, line)
        return self.transcript(data, where, line)

    def _id(self, data: dict[str, Any], key: str, where: str, line: int | None) -> str | None:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
            self.problem(f"{where}.{key}", "is required: a non-empty string or integer", line)
            return None
        text = str(value).strip()
        if len(text) > 200:
            self.problem(f"{where}.{key}", f"is {len(text)} characters: at most 200", line)
            return None
        return text

    def _source(self, data: dict[str, Any], where: str, line: int | None, *keys: str) -> str:
        for key in keys:
            value = data.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or not value.strip() or len(value) > 100:
                self.problem(f"{where}.{key}", "must be a non-empty string of at most 100 characters", line)
            else:
                return value.strip()
        return self.source

    def _topic(self, data: dict[str, Any], where: str, line: int | None, *keys: str) -> str:
        for key in keys:
            value = data.get(key)
            if value in (None, ""):
                continue
            if not isinstance(value, str):
                self.problem(f"{where}.{key}", "must be a topic id (a string)", line)
                return ""
            return value.strip()
        return ""

    def transcript(self, data: dict[str, Any], where: str, line: int | None) -> ParsedTranscript | None:
        external_id = self._id(data, "id", where, line)
        name = f"{where} (id {external_id!r})" if external_id else where
        messages = self.messages(data.get("messages"), f"{name}.messages", line)
        metadata = data.get("metadata", {})
        if not isinstance(metadata, dict):
            self.problem(f"{name}.metadata", "must be an object", line)
            metadata = {}
        source = self._source(data, name, line, "source")
        labels = self.labels(
            data.get("labels"), f"{name}.labels", line, data.get("annotator", self.annotator or source)
        )
        if external_id is None or messages is None or labels is None:
            return None
        return ParsedTranscript(
            kind="session",
            source=source,
            external_id=external_id,
            messages=messages,
            metadata=metadata,
            topic_id=self._topic(data, name, line, "topic"),
            items=(ParsedItem("", "", labels),),
            where=name,
            line=line,
            labelled=bool(labels),
        )

    def candidates(self, data: dict[str, Any], where: str, line: int | None) -> ParsedTranscript | None:
        external_id = self._id(data, "conversation_id", where, line)
        name = f"{where} (conversation_id {external_id!r})" if external_id else where
        history = data.get("conversation_history")
        if isinstance(history, str):
            messages = self.text_messages(history.splitlines(), f"{name}.conversation_history", None)
        else:
            messages = self.messages(history, f"{name}.conversation_history", line)
        responses = data.get("anno_llm_responses")
        source = self._source(data, name, line, "source", "Data")
        items: list[ParsedItem] = []
        if not isinstance(responses, dict) or not responses:
            self.problem(
                f"{name}.anno_llm_responses", 'is required: {"<tutor>": {"response": ..., "annotation": {...}}}', line
            )
        else:
            for key, entry in responses.items():
                at = f"{name}.anno_llm_responses.{key}"
                if not isinstance(entry, dict):
                    self.problem(at, "must be an object with a response", line)
                    continue
                if len(str(key)) > 100:
                    self.problem(at, "the candidate's name is over 100 characters", line)
                    continue
                response = entry.get("response")
                if not isinstance(response, str) or not response.strip():
                    self.problem(f"{at}.response", "is required: the candidate's text", line)
                    continue
                labels = self.labels(
                    entry.get("annotation"), f"{at}.annotation", line, entry.get("annotator", self.annotator or source)
                )
                if labels is not None:
                    items.append(ParsedItem(str(key), response, labels))
        if external_id is None or messages is None or len(items) != len(responses or {}):
            return None
        metadata = {k: v for k, v in data.items() if k not in CANDIDATE_KEYS}
        return ParsedTranscript(
            kind="response",
            source=source,
            external_id=external_id,
            messages=messages,
            metadata=metadata,
            topic_id=self._topic(data, name, line, "topic"),
            items=tuple(items),
            where=name,
            line=line,
            labelled=any(i.labels for i in items),
        )

    # --- parts -----------------------------------------------------------------------------------

    def messages(self, value: Any, where: str, line: int | None) -> tuple[tuple[str, str], ...] | None:
        if not isinstance(value, list) or not value:
            self.problem(where, 'is required: a non-empty list of {"role", "content"}', line)
            return None
        out = []
        ok = True
        for i, message in enumerate(value):
            at = f"{where}[{i}]"
            if not isinstance(message, dict):
                self.problem(at, 'must be an object {"role", "content"}', line)
                ok = False
                continue
            role, content = message.get("role"), message.get("content")
            if not isinstance(role, str) or not role.strip():
                self.problem(f"{at}.role", "is required (tutor, student, ...)", line)
                ok = False
            if not isinstance(content, str):
                self.problem(f"{at}.content", "is required: a string", line)
                ok = False
            if isinstance(role, str) and isinstance(content, str):
                name = role.strip().lower()
                out.append((SPEAKERS.get(name, name), content))
        return tuple(out) if ok else None

    def text_messages(self, lines: list[str], where: str, first_line: int | None) -> tuple[tuple[str, str], ...] | None:
        """`Tutor: ...` / `Student: ...` lines; a line without a known speaker continues the message before it."""
        out: list[list[str]] = []
        for offset, raw in enumerate(lines):
            text = raw.strip()
            if not text:
                continue
            speaker, sep, rest = text.partition(self.speaker_separator)
            role = SPEAKERS.get(speaker.strip().lower()) if sep else None
            if role is None and sep and speaker.strip().lower() in ("system", "narrator"):
                role = speaker.strip().lower()
            if role is not None:
                out.append([role, rest.strip()])
            elif out:
                out[-1][1] = f"{out[-1][1]}\n{text}"
            else:
                line = first_line + offset if first_line is not None else None
                speakers = "/".join(f"{s.title()}{self.speaker_separator}" for s in ("tutor", "student"))
                self.problem(where, f"the first message has no speaker prefix ({speakers}): {text[:60]!r}", line)
                return None
        if not out:
            self.problem(where, "holds no messages", first_line)
            return None
        return tuple((role, content) for role, content in out)

    def labels(self, value: Any, where: str, line: int | None, annotator: Any) -> tuple[Label, ...] | None:
        """{dimension: value} from one annotator, or [{"annotator", "labels": {...}}]; missing means none."""
        if value in (None, {}, []):
            return ()
        groups: list[tuple[Any, Any, str]] = []
        if isinstance(value, dict):
            groups.append((annotator, value, where))
        elif isinstance(value, list):
            for i, entry in enumerate(value):
                if not isinstance(entry, dict):
                    self.problem(f"{where}[{i}]", 'must be {"annotator", "labels": {...}}', line)
                    return None
                groups.append((entry.get("annotator"), entry.get("labels"), f"{where}[{i}]"))
        else:
            self.problem(where, 'must be {"<dimension>": value} or a list of {"annotator", "labels"}', line)
            return None
        out = []
        for who, values, at in groups:
            if not isinstance(who, str) or not who.strip() or len(who) > 150:
                self.problem(f"{at}.annotator", "is required: a name of at most 150 characters", line)
                return None
            if not isinstance(values, dict):
                self.problem(f"{at}.labels", 'must be {"<dimension>": value}', line)
                return None
            out += [Label(who.strip(), str(dim), v, f"{at}.{dim}") for dim, v in values.items() if v not in (None, "")]
        return tuple(out)


def detect_format(name: str, text: str) -> str:
    lower = name.lower()
    if lower.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if lower.endswith(".txt"):
        return "text"
    if lower.endswith(".json"):
        return "json"
    return "json" if text.lstrip()[:1] in ("{", "[") else "text"


def parse(
    data: bytes,
    *,
    format: str = "auto",
    file: str = "",
    source: str = "",
    annotator: str = "",
    speaker_separator: str = ":",
    transcript_separator: str = "---",
) -> tuple[str, list[ParsedTranscript]]:
    """(the format read, every record): all of them, or an InvalidInput naming each problem."""
    if format not in FORMATS:
        raise InvalidInput(
            [FieldProblem("format", f"{format!r} is not a format; choose from {', '.join(FORMATS)}", file)]
        )
    if len(data) > limit("IMPORT_MAX_FILE_BYTES"):
        raise too_large("", f"the file is {len(data)} bytes", "IMPORT_MAX_FILE_BYTES", file=file)
    text = decode_utf8(data, field="", file=file).lstrip("\ufeff")
    if format == "auto":
        format = detect_format(file, text)
    default_source = source or (file.rsplit("/", 1)[-1].rsplit(".", 1)[0] if file else "import")
    reader = _Reader(file=file, source=default_source, annotator=annotator, speaker_separator=speaker_separator)
    kind = "response" if format == "candidates" else None
    parsed: list[ParsedTranscript | None] = []
    if format in ("json", "candidates"):
        document = json_loads(text, field="", file=file)
        records = document if isinstance(document, list) else [document]
        _check_count(len(records), file)
        for i, record in enumerate(records):
            parsed.append(reader.record(record, f"record {i}" if isinstance(document, list) else "record", None, kind))
    elif format == "jsonl":
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        _check_count(len(lines), file)
        for n, line in lines:
            try:
                record = json_loads(line, field=f"line {n}", file=file)
            except InvalidInput as exc:
                reader.problems.extend(FieldProblem(p.field, p.reason, p.file, line=n) for p in exc.problems)
                continue
            parsed.append(reader.record(record, f"record {len(parsed)}", n, None))
    else:
        parsed = _text_records(reader, text, transcript_separator, default_source)
    if not reader.problems and not parsed:
        reader.problem("", "holds no records")
    if reader.problems:
        raise InvalidInput(reader.problems)
    records_ok = [p for p in parsed if p is not None]
    seen: dict[tuple[str, str], str] = {}
    for record in records_ok:
        key = (record.source, record.external_id)
        if key in seen:
            reader.problem(
                record.where,
                f"id {record.external_id!r} of source {record.source!r} also names {seen[key]}",
                record.line,
            )
        seen[key] = record.where
    if reader.problems:
        raise InvalidInput(reader.problems)
    return format, records_ok


def _check_count(count: int, file: str) -> None:
    if count > limit("IMPORT_MAX_RECORDS"):
        raise too_large("", f"the file holds {count} records", "IMPORT_MAX_RECORDS", file=file)


def _text_records(reader: _Reader, text: str, separator: str, stem: str) -> list[ParsedTranscript | None]:
    """Blocks split by a line holding only the separator; `# id: ...`, `# topic: ...`, `# annotator: ...`,
    `# label <dimension>: <value>` and other `# key: value` lines head a block."""
    blocks: list[tuple[int, list[str]]] = [(1, [])]
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip() == separator:
            blocks.append((n + 1, []))
        else:
            blocks[-1][1].append(line)
    blocks = [(start, lines) for start, lines in blocks if any(line.strip() for line in lines)]
    _check_count(len(blocks), reader.file)
    out: list[ParsedTranscript | None] = []
    for index, (start, lines) in enumerate(blocks):
        headers: dict[str, str] = {}
        raw_labels: dict[str, str] = {}
        body_start = 0
        for offset, line in enumerate(lines):
            stripped = line.strip()
            if not stripped:
                continue
            if not stripped.startswith("#"):
                body_start = offset
                break
            key, _, value = stripped.lstrip("#").partition(":")
            key = key.strip()
            if key.lower().startswith("label "):
                raw_labels[key[6:].strip()] = value.strip()
            else:
                headers[key.lower()] = value.strip()
        else:
            body_start = len(lines)
        external_id = headers.pop("id", "") or f"{stem}-{index + 1}"
        where = f"transcript {index + 1} (id {external_id!r}, line {start})"
        messages = reader.text_messages(lines[body_start:], where, start + body_start)
        topic_id = headers.pop("topic", "")
        source = headers.pop("source", "") or reader.source
        annotator = headers.pop("annotator", "") or reader.annotator or source
        labels = tuple(Label(annotator, dim, v, f"{where}.label {dim}") for dim, v in raw_labels.items())
        if messages is None:
            out.append(None)
            continue
        out.append(
            ParsedTranscript(
                kind="session",
                source=source,
                external_id=external_id[:200],
                messages=messages,
                metadata=headers,
                topic_id=topic_id,
                items=(ParsedItem("", "", labels),),
                where=where,
                line=start,
                labelled=bool(labels),
            )
        )
    return out
