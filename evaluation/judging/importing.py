"""Reading conversations from outside: JSON and JSONL transcripts, plain text with speaker prefixes,
and candidate-response sets; reading their labels against a rubric (with its aliases and a label map);
folding a conversation id repeated with the same dialogue into one conversation. No storing: every
problem names the record, the field and, where there are lines, the line, and belongs to its record,
so a caller may refuse the whole file or set the bad records aside. Storing is services.transcripts_import's job."""

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from evaluation.errors import FieldProblem, InvalidInput
from evaluation.judging.values import DimensionSpec, RubricSpec
from evaluation.limits import (
    decode_utf8,
    encodes,
    json_loads,  # noqa: F401 - services reads rubric files with it
    json_value,
    limit,
    nul_check,
    text_problems,
    too_large,
    value_problems,
    yaml_load,
)

FORMATS = ("auto", "json", "jsonl", "text", "candidates", "bridge")
SPEAKERS = {"tutor": "tutor", "teacher": "tutor", "assistant": "tutor", "student": "student", "user": "student"}
"""Speaker names and the role each becomes; other names ("system", "narrator") are kept as written, lower case."""
TRANSCRIPT_KEYS = {"id", "messages", "metadata", "labels", "annotator", "source", "topic"}
CANDIDATE_KEYS = {"conversation_id", "conversation_history", "anno_llm_responses", "source", "Data", "topic", "Topic"}
MAX_LENGTHS = {"source": 100, "external_id": 200, "key": 100, "annotator": 150, "value": 100}
"""The columns' lengths (Transcript.source, .external_id, Item.key, Annotation.annotator, .value): longer is refused
by name here, not by the database."""


@dataclass(frozen=True)
class Label:
    """One annotator's raw label of one dimension, as the file gave it."""

    annotator: str
    dimension: str
    value: Any
    where: str
    """The field path, for errors: `[3].labels.pacing`."""
    dimension_id: int | None = None
    """Set once read against a rubric (then `value` is the level, as the scale spells it)."""
    version_id: int | None = None
    """The rubric version it is stored under."""
    score: float | None = None
    """The level's place on the scale."""


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
    position: int = 0
    """Its place in the file (0 first)."""

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
        too_big = value_problems(data, file=self.file, where=where) + text_problems(
            data, file=self.file, where=where, brackets=True
        )
        if too_big:
            self.problems.extend(FieldProblem(p.field, p.reason, p.file, line=line) for p in too_big)
            return None
        if kind == "bridge":
            return self.bridge(data, where, line)
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
                if len(str(key)) > MAX_LENGTHS["key"]:
                    self.problem(at, f"the candidate's name is over {MAX_LENGTHS['key']} characters", line)
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

    def bridge(self, data: dict[str, Any], where: str, line: int | None) -> ParsedTranscript | None:
        """A Bridge excerpt (Wang et al. 2024, rosewang2008/bridge): `c_id`, the real history `c_h` and the
        tutor's real reply `c_r` (each [{"user": "tutor"|"student", "text"}]) become one conversation; the
        lesson, the error type and the expert's strategy and intention (`lesson_topic`, `e`, `z_what`, `z_why`)
        its metadata. The expert's revision (`c_r_`, `c_revision`) is not a real conversation and is left out."""
        external_id = self._id(data, "c_id", where, line)
        name = f"{where} (c_id {external_id!r})" if external_id else where
        turns: list[Any] = []
        for key in ("c_h", "c_r"):
            value = data.get(key, [] if key == "c_r" else None)
            if not isinstance(value, list) or (key == "c_h" and not value):
                self.problem(f"{name}.{key}", 'is required: a list of {"user": "tutor"|"student", "text": ...}', line)
                return None
            for i, m in enumerate(value):
                if not isinstance(m, dict):
                    self.problem(f"{name}.{key}[{i}]", 'must be an object {"user", "text"}', line)
                    return None
                turns.append({"role": m.get("user"), "content": m.get("text")})
        messages = self.messages(turns, f"{name}.c_h", line)
        if external_id is None or messages is None:
            return None
        metadata = {"format": "bridge"}
        metadata.update({k: data[k] for k in ("lesson_topic", "e", "z_what", "z_why") if data.get(k) not in (None, "")})
        return ParsedTranscript(
            kind="session",
            source=self._source(data, name, line, "source"),
            external_id=external_id,
            messages=messages,
            metadata=metadata,
            topic_id="",
            items=(ParsedItem("", "", ()),),
            where=name,
            line=line,
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
        most = MAX_LENGTHS["annotator"]
        for who, values, at in groups:
            if not isinstance(who, str) or not who.strip() or len(who.strip()) > most:
                self.problem(f"{at}.annotator", f"is required: a name of at most {most} characters", line)
                return None
            if not isinstance(values, dict):
                self.problem(f"{at}.labels", 'must be {"<dimension>": value}', line)
                return None
            out += [Label(who.strip(), str(dim), v, f"{at}.{dim}") for dim, v in values.items() if v not in (None, "")]
        return self.label_values(out, line)

    def label_values(self, labels: list[Label], line: int | None) -> tuple[Label, ...] | None:
        """The labels, or None (with a problem each) where a value cannot be a label: a list or an object, or
        longer than a label is stored."""
        ok = True
        for label in labels:
            if isinstance(label.value, dict | list):
                self.problem(label.where, "must be one value (a category or a number)", line)
                ok = False
            elif len(str(label.value)) > MAX_LENGTHS["value"]:
                self.problem(
                    label.where, f"is {len(str(label.value))} characters: at most {MAX_LENGTHS['value']}", line
                )
                ok = False
        return tuple(labels) if ok else None


REPORTED_RECORDS = 20
"""A refused file names the problems of its first 20 bad records, and how many more there are."""


def detect_format(name: str, text: str) -> str:
    lower = name.lower()
    if lower.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if lower.endswith(".txt"):
        return "text"
    if lower.endswith(".json"):
        return "json"
    return "json" if text.lstrip()[:1] in ("{", "[") else "text"


@dataclass(frozen=True)
class Rejected:
    """A record set aside (with --skip-invalid) and every reason."""

    record: str
    """How the file names it: `record 3`, `line 7`, `transcript 2`."""
    problems: tuple[FieldProblem, ...]
    position: int = 0
    """Its place in the file (0 first), to list rejections in file order."""

    def __str__(self) -> str:
        return f"{self.record}: " + "; ".join(str(p) for p in self.problems)

    def as_dict(self) -> dict[str, Any]:
        return {"record": self.record, "problems": [str(p) for p in self.problems]}


@dataclass(frozen=True)
class Parsed:
    """What a file held: its format, the records read, and those set aside."""

    format: str
    records: tuple[ParsedTranscript, ...]
    rejected: tuple[Rejected, ...] = ()


def option_problems(**options: str) -> list[FieldProblem]:
    """The import's options (source, annotator, separators), as the command line or a form gave them."""
    problems = []
    for name, value in options.items():
        if not encodes(value):
            problems.append(FieldProblem(name, "holds a lone surrogate (such as \\udfff), which is not text"))
        elif name in MAX_LENGTHS and len(value.strip()) > MAX_LENGTHS[name]:
            problems.append(FieldProblem(name, f"is {len(value.strip())} characters: at most {MAX_LENGTHS[name]}"))
        elif name.endswith("separator") and (not value.strip() or len(value) > 20 or "\n" in value):
            problems.append(FieldProblem(name, "must be 1 to 20 characters on one line, not only spaces"))
    return problems


def parse(
    data: bytes,
    *,
    format: str = "auto",
    file: str = "",
    source: str = "",
    annotator: str = "",
    speaker_separator: str = ":",
    transcript_separator: str = "---",
    skip_invalid: bool = False,
) -> Parsed:
    """Every record of the file. A problem of the file as a whole (its size, its JSON, no records) is always
    an InvalidInput; a problem of a record too, naming each, unless `skip_invalid`: then the record is set aside
    in `rejected` with its reasons."""
    if format not in FORMATS:
        raise InvalidInput(
            [FieldProblem("format", f"{format!r} is not a format; choose from {', '.join(FORMATS)}", file)]
        )
    problems = option_problems(
        source=source,
        annotator=annotator,
        speaker_separator=speaker_separator,
        transcript_separator=transcript_separator,
    )
    if problems:
        raise InvalidInput(problems)
    if len(data) > limit("IMPORT_MAX_FILE_BYTES"):
        raise too_large("", f"the file is {len(data)} bytes", "IMPORT_MAX_FILE_BYTES", file=file)
    text = decode_utf8(data, field="", file=file).lstrip("\ufeff")
    if format == "auto":
        format = detect_format(file, text)
        if format == "json" and _json_lines(text):
            format = "jsonl"  # one object a line, whatever the name: each bad record is its own problem
    stem = file.rsplit("/", 1)[-1].rsplit(".", 1)[0][: MAX_LENGTHS["source"]] if file else ""
    stem = stem.encode("utf-8", "replace").decode()  # a file name from the command line may hold surrogates
    default_source = source.strip() or ("bridge" if format == "bridge" else stem) or "import"
    reader = _Reader(file=file, source=default_source, annotator=annotator.strip(), speaker_separator=speaker_separator)
    kind = "response" if format == "candidates" else None
    parsed: list[tuple[str, ParsedTranscript | None, list[FieldProblem]]] = []

    def read(name: str, build: Callable[[], ParsedTranscript | None]) -> None:
        before = len(reader.problems)
        record = build()
        if record is not None:
            record = replace(record, position=len(parsed))
        parsed.append((name, record, reader.problems[before:]))

    if format in ("json", "candidates", "bridge"):
        document = json_value(text, field="", file=file)
        nul_check(text, document, field="", file=file)
        records = document if isinstance(document, list) else [document]
        _check_count(len(records), file)
        if format == "bridge":
            kind = "bridge"
        for i, record in enumerate(records):
            name = f"record {i}" if isinstance(document, list) else "record"
            read(name, lambda r=record, n=name: reader.record(r, n, None, kind))  # type: ignore[misc]
    elif format == "jsonl":
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        _check_count(len(lines), file)
        readable = 0  # records are numbered among the lines that are JSON
        for n, line in lines:
            try:
                record = json_value(line, field=f"line {n}", file=file)
                nul_check(line, record, field=f"line {n}", file=file)
            except InvalidInput as exc:
                parsed.append(
                    (f"line {n}", None, [FieldProblem(p.field, p.reason, p.file, line=n) for p in exc.problems])
                )
                continue
            read(f"line {n}", lambda r=record, i=readable, n=n: reader.record(r, f"record {i}", n, None))  # type: ignore[misc]
            readable += 1
    else:
        for name, build in _text_records(reader, text, transcript_separator, default_source):
            read(name, build)
    if not parsed:
        raise InvalidInput([FieldProblem("", "holds no records", file)])
    rejected = [
        Rejected(name, tuple(found), i) for i, (name, record, found) in enumerate(parsed) if found or not record
    ]
    if rejected and not skip_invalid:
        problems = [p for r in rejected[:REPORTED_RECORDS] for p in r.problems]
        if len(rejected) > REPORTED_RECORDS:
            more = len(rejected) - REPORTED_RECORDS
            problems.append(
                FieldProblem(
                    "",
                    f"{more} more record(s) have problems ({len(rejected)} in all; the first {REPORTED_RECORDS} shown)",
                    file,
                )
            )
        raise InvalidInput(problems)
    return Parsed(format, tuple(r for _, r, found in parsed if r is not None and not found), tuple(rejected))


def _json_lines(text: str) -> bool:
    """Two or more lines, each one JSON object: JSON lines, even under a `.json` name."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return len(lines) > 1 and all(line.startswith("{") and line.endswith("}") for line in lines)


def _check_count(count: int, file: str) -> None:
    if count > limit("IMPORT_MAX_RECORDS"):
        raise too_large("", f"the file holds {count} records", "IMPORT_MAX_RECORDS", file=file)


def _text_records(
    reader: _Reader, text: str, separator: str, stem: str
) -> list[tuple[str, Callable[[], ParsedTranscript | None]]]:
    """Blocks split by a line holding only the separator; `# id: ...`, `# topic: ...`, `# annotator: ...`,
    `# source: ...`, `# label <dimension>: <value>` and other `# key: value` lines head a block or follow
    its last message (a `#` line between two messages is the message's text)."""
    blocks: list[tuple[int, list[str]]] = [(1, [])]
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip() == separator.strip():
            blocks.append((n + 1, []))
        else:
            blocks[-1][1].append(line)
    blocks = [(start, lines) for start, lines in blocks if any(line.strip() for line in lines)]
    _check_count(len(blocks), reader.file)
    return [
        (f"transcript {index + 1}", lambda i=index, b=start, ls=lines: _text_record(reader, i, b, ls, stem))  # type: ignore[misc]
        for index, (start, lines) in enumerate(blocks)
    ]


def _text_record(reader: _Reader, index: int, start: int, lines: list[str], stem: str) -> ParsedTranscript | None:
    headers: dict[str, str] = {}
    raw_labels: dict[str, str] = {}
    body = [offset for offset, line in enumerate(lines) if line.strip() and not line.strip().startswith("#")]
    body_start, body_end = (body[0], body[-1] + 1) if body else (len(lines), len(lines))
    for line in lines[:body_start] + lines[body_end:]:
        stripped = line.strip()
        if not stripped:
            continue
        key, _, value = stripped.lstrip("#").partition(":")
        key = key.strip()
        if key.lower().startswith("label "):
            raw_labels[key[6:].strip()] = value.strip()
        else:
            headers[key.lower()] = value.strip()
    external_id = headers.pop("id", "") or f"{stem}-{index + 1}"
    where = f"transcript {index + 1} (id {external_id[:60]!r}, line {start})"
    ok = True
    for name, value in (
        ("id", external_id),
        ("source", headers.get("source", "")),
        ("annotator", headers.get("annotator", "")),
    ):
        most = MAX_LENGTHS["external_id" if name == "id" else name]
        if len(value) > most:
            reader.problem(f"{where}.{name}", f"is {len(value)} characters: at most {most}", start)
            ok = False
    messages = reader.text_messages(lines[body_start:body_end], where, start + body_start)
    topic_id = headers.pop("topic", "")
    source = headers.pop("source", "") or reader.source
    annotator = headers.pop("annotator", "") or reader.annotator or source
    labels = reader.label_values(
        [Label(annotator, dim, v, f"{where}.label {dim}") for dim, v in raw_labels.items()], start
    )
    if messages is None or labels is None or not ok:
        return None
    return ParsedTranscript(
        kind="session",
        source=source,
        external_id=external_id,
        messages=messages,
        metadata=headers,
        topic_id=topic_id,
        items=(ParsedItem("", "", labels),),
        where=where,
        line=start,
        labelled=bool(labels),
    )


# --- repeated ids ----------------------------------------------------------------------------------


def merge_repeats(
    records: Iterable[ParsedTranscript], *, file: str = ""
) -> tuple[list[ParsedTranscript], list[Rejected]]:
    """One conversation per (source, id): records that repeat an id with the same dialogue (messages and topic)
    become one, with every candidate of each. A candidate name met again with another response, or with other
    labels, is kept as `<name> #2` (then #3, ...): MRBench names the same tutors in both records of a repeated
    id. Metadata the records agree on is kept; where they differ, the key holds the list of their values, in
    file order. Records that repeat an id with another dialogue (or another kind, or labels of one conversation
    by one annotator that disagree) are all refused, each naming the others."""
    groups: dict[tuple[str, str], list[ParsedTranscript]] = {}
    for record in records:
        groups.setdefault((record.source, record.external_id), []).append(record)
    merged: list[ParsedTranscript] = []
    rejected: list[Rejected] = []
    for (source, external_id), group in groups.items():
        if len(group) == 1:
            merged.append(group[0])
            continue
        first = group[0]
        clash = next(
            (r for r in group[1:] if (r.kind, r.messages, r.topic_id) != (first.kind, first.messages, first.topic_id)),
            None,
        )
        reason = "with another dialogue" if clash is not None else ""
        combined = None if clash is not None else _combine(group)
        if combined is None:
            reason = reason or "with the same dialogue but labels of one annotator that disagree"
            for record in group:
                others = " and ".join(r.where for r in group if r is not record)
                problem = FieldProblem(
                    record.where,
                    f"id {external_id!r} of source {source!r} also names {others}, {reason}",
                    file,
                    record.line,
                )
                rejected.append(Rejected(record.where, (problem,), record.position))
            continue
        merged.append(combined)
    return merged, rejected


def _combine(group: list[ParsedTranscript]) -> ParsedTranscript | None:
    """The records of one conversation as one, or None where one annotator's labels of one item disagree."""
    first = group[0]
    if first.kind == "session":
        labels: dict[tuple[str, str], Label] = {}
        for record in group:
            for label in record.items[0].labels:
                seen = labels.setdefault((label.annotator, label.dimension), label)
                if str(seen.value) != str(label.value):
                    return None
        items: tuple[ParsedItem, ...] = (ParsedItem("", "", tuple(labels.values())),)
    else:
        out: dict[str, ParsedItem] = {}
        for record in group:
            for item in record.items:
                mine = _label_set(item)
                same = next(
                    (
                        k
                        for k, i in out.items()
                        if _base(k) == item.key and (i.response, _label_set(i)) == (item.response, mine)
                    ),
                    None,
                )
                if same is not None:
                    continue
                key, n = item.key, 1
                while key in out:
                    n += 1
                    key = f"{item.key} #{n}"
                out[key] = replace(item, key=key)
        items = tuple(out.values())
    metadata: dict[str, Any] = {}
    for name in dict.fromkeys(k for r in group for k in r.metadata):
        values = [r.metadata.get(name) for r in group]
        metadata[name] = values[0] if all(v == values[0] for v in values) else values
    where = first.where + "".join(f" + {r.where.split(' (')[0]}" for r in group[1:])
    return replace(
        first,
        items=items,
        metadata=metadata,
        where=where,
        labelled=any(i.labels for i in items),
    )


def _base(key: str) -> str:
    name, sep, n = key.rpartition(" #")
    return name if sep and n.isdigit() else key


def _label_set(item: ParsedItem) -> frozenset[tuple[str, str, str]]:
    return frozenset((lab.annotator, lab.dimension, str(lab.value)) for lab in item.labels)


# --- labels against a rubric -----------------------------------------------------------------------


@dataclass(frozen=True)
class LabelMap:
    """Other wordings of labels: {dimension or "*": {wording: label}}; a dimension's own entry wins over "*".
    Wordings match as the scale's own labels do, case and spacing aside."""

    entries: tuple[tuple[str, str, str], ...] = ()
    """(dimension or "*", wording, the label it means)."""
    file: str = "map-labels"

    def __bool__(self) -> bool:
        return bool(self.entries)

    def level_of(self, dimension: DimensionSpec, value: Any) -> str | None:
        """The level a wording maps to on this dimension's scale, else None. A "*" entry applies only where
        its label is on the scale."""
        wanted = _fold(value)
        for scope in (dimension.name, "*"):
            for dim, wording, label in self.entries:
                if dim == scope and _fold(wording) == wanted:
                    level = dimension.scale.level_of(label)
                    if level is not None or scope != "*":
                        return level
        return None

    def problems(self, specs: Iterable[RubricSpec]) -> list[FieldProblem]:
        """Entries no rubric of the import can use: an unknown dimension, a label off its scale."""
        specs = list(specs)
        problems = []
        for dim, wording, label in self.entries:
            where = f"{self.file}.{dim}.{wording}"
            if dim == "*":
                if not any(d.scale.level_of(label) for s in specs for d in s.dimensions):
                    slugs = ", ".join(s.slug for s in specs)
                    problems.append(FieldProblem(where, f"{label!r} is on no scale of {slugs}"))
                continue
            found = [(s, s.dimension(dim)) for s in specs if s.dimension(dim) is not None]
            if not found:
                names = ", ".join(d.name for s in specs for d in s.dimensions)
                problems.append(FieldProblem(where, f"no rubric of this import has a dimension {dim!r} ({names})"))
            for spec, d in found:
                if d is not None and d.scale.level_of(label) is None:
                    problems.append(
                        FieldProblem(
                            where,
                            f"{label!r} is not on the scale of {spec.slug}.{dim}; allowed: {d.scale.allowed()}",
                        )
                    )
        return problems


def _fold(value: Any) -> str:
    return " ".join(str(value).split()).casefold()


def label_map_read(data: bytes | str, *, file: str = "map-labels") -> LabelMap:
    """A label map from JSON or YAML text: {dimension or "*": {wording: label}}; every problem names its entry."""
    if isinstance(data, bytes):
        if len(data) > limit("CATALOG_MAX_FILE_BYTES"):
            raise too_large(file, f"the map is {len(data)} bytes", "CATALOG_MAX_FILE_BYTES")
        data = decode_utf8(data, field=file)
    if not data.strip():
        return LabelMap(file=file)
    try:
        if data.lstrip()[:1] == "{":
            doc = json_value(data, field=file)
            nul_check(data, doc, field=file)
        else:
            doc = yaml_load(data)
    except InvalidInput:
        raise
    except Exception as exc:  # yaml.YAMLError and its kin
        raise InvalidInput(
            [FieldProblem(file, f"is neither JSON nor YAML: {str(exc).splitlines()[0][:200]}")]
        ) from None
    problems = text_problems(doc, where=file, brackets=True)
    if problems:
        raise InvalidInput(problems)
    if not isinstance(doc, dict):
        raise InvalidInput([FieldProblem(file, 'must be {"<dimension>" or "*": {"<wording>": "<label>"}}')])
    entries = []
    for dim, wordings in doc.items():
        if not isinstance(wordings, dict) or not wordings:
            problems.append(FieldProblem(f"{file}.{dim}", 'must be {"<wording>": "<label>"}'))
            continue
        for wording, label in wordings.items():
            if not isinstance(label, str | int) or isinstance(label, bool) or not str(label).strip():
                problems.append(FieldProblem(f"{file}.{dim}.{wording}", "must be a label of the scale (a string)"))
            else:
                entries.append((str(dim), str(wording), str(label).strip()))
    if len(entries) > limit("CATALOG_MAX_LIST_ITEMS"):
        problems.append(
            FieldProblem(file, f"has {len(entries)} entries: the limit is {limit('CATALOG_MAX_LIST_ITEMS')}")
        )
    if problems:
        raise InvalidInput(problems)
    return LabelMap(tuple(entries), file)


def labels_read(
    record: ParsedTranscript, spec: RubricSpec, version_id: int, label_map: LabelMap, *, file: str = ""
) -> tuple[ParsedTranscript, list[FieldProblem]]:
    """The record with each label read against the rubric (its level, dimension, version and score), and the
    labels it could not read: an unknown dimension, or a value that is neither a label of the scale, nor one of
    its aliases, nor mapped; each naming the record, the field, the label and the allowed ones."""
    problems: list[FieldProblem] = []
    items = []
    for item in record.items:
        read = []
        for label in item.labels:
            dim = spec.dimension(label.dimension)
            if dim is None:
                names = ", ".join(d.name for d in spec.dimensions)
                reason = f"rubric {spec.slug!r} has no dimension {label.dimension!r} ({names})"
                problems.append(FieldProblem(label.where, reason, file, record.line))
                continue
            level = dim.scale.level_of(label.value)
            if level is None and label_map:
                level = label_map.level_of(dim, label.value)
            if level is None:
                mapped = f" (nor mapped by {label_map.file})" if label_map else ""
                reason = (
                    f"{label.value!r} is not on the scale of {spec.slug}.{dim.name}{mapped}; "
                    f"allowed: {dim.scale.allowed()}"
                )
                problems.append(FieldProblem(label.where, reason, file, record.line))
                continue
            read.append(
                replace(
                    label,
                    value=level,
                    dimension_id=dim.id,
                    version_id=version_id,
                    score=float(dim.scale.score_of(level)),
                )
            )
        items.append(replace(item, labels=tuple(read)))
    return replace(record, items=tuple(items)), problems
