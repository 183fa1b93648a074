"""Bounds on untrusted input: the size settings (docs/limits.md) and safe JSON and YAML loading.

Every loader here refuses with an InvalidInput that names the field and the limit, fast and
before the costly step: a size before reading, nesting depth before parsing, YAML aliases before
they expand. TooLarge (an InvalidInput) is the one that doors answer with 413.
"""

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from rest_framework import serializers

from evaluation.errors import FieldProblem, InvalidInput

DEFAULTS: dict[str, int] = {
    "JSON_MAX_DEPTH": 64,
    "MESSAGE_MAX_CHARS": 20_000,
    "CATALOG_MAX_FILE_BYTES": 1_000_000,
    "CATALOG_MAX_TEXT_CHARS": 20_000,
    "CATALOG_MAX_LIST_ITEMS": 1_000,
    "SUITE_MAX_FILE_BYTES": 1_000_000,
    "SUITE_MAX_CASES": 500,
    "INGEST_MAX_RECORDS": 5_000,
    "IMPORT_MAX_FILE_BYTES": 20_000_000,
    "IMPORT_MAX_RECORDS": 10_000,
}


def message_frame_max() -> int:
    """The longest session-protocol frame, in characters or UTF-8 bytes: a message of MESSAGE_MAX_CHARS
    characters, each escaped at worst (\\uXXXX, six), and the frame's other keys."""
    return 6 * limit("MESSAGE_MAX_CHARS") + 1024


class TooLarge(InvalidInput):
    """Input over a size limit (HTTP 413); the message names the limit and its setting."""


def limit(name: str) -> int:
    """EVALUATION[name], or its default where the settings do not name it (the EVAL.md parser also
    runs in other projects' pytest sessions)."""
    configured = getattr(settings, "EVALUATION", {}) if settings.configured else {}
    return int(configured.get(name, DEFAULTS[name]))


def too_large(field: str, what: str, name: str, *, file: str = "") -> TooLarge:
    return TooLarge([FieldProblem(field, f"{what}: the limit is {limit(name)} (EVALUATION[{name!r}])", file)])


def decode_utf8(data: bytes, *, field: str = "body", file: str = "") -> str:
    """The text, or an InvalidInput naming the byte offset of the first invalid byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput([FieldProblem(field, f"not UTF-8: invalid byte at offset {exc.start}", file)]) from None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def json_depth_check(text: str, *, field: str = "body", file: str = "") -> None:
    """Refuse JSON nested deeper than JSON_MAX_DEPTH, before the parser recurses into it."""
    most = limit("JSON_MAX_DEPTH")
    if text.count("[") + text.count("{") <= most:
        return  # cannot be deeper than the limit
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > most:
            raise InvalidInput(
                [
                    FieldProblem(
                        field,
                        f"JSON is nested deeper than {most} levels (EVALUATION['JSON_MAX_DEPTH'])",
                        file,
                    )
                ]
            )


def nul_check(text: str, value: Any, *, field: str = "body", file: str = "") -> None:
    """Refuse a NUL character in any string of a parsed JSON value, naming where: PostgreSQL cannot
    store or compare text that holds one. `text` is the JSON it came from (a NUL can only come from
    the escape `\\u0000`, since json.loads refuses a raw control character)."""
    if "\\u0000" not in text:
        return
    problems = [p for p in text_problems(value, file=file, where=field) if p.reason == NUL_REASON]
    if problems:
        raise InvalidInput([FieldProblem(p.field or "body", p.reason, file) for p in problems])


NUL_REASON = "contains a NUL character (\\u0000)"
SURROGATE_REASON = "holds a lone surrogate (such as \\udfff), which is not text"


class LongNumber(str):
    """An integer literal of more digits than Python converts (sys.get_int_max_str_digits), kept as its
    digits so that text_problems can name its field; never a value to store."""


class NotFinite(str):
    """NaN, Infinity, -Infinity or a literal such as 1e999, kept as written so that text_problems can
    name its field; never a value to store."""


def _int(digits: str) -> int | LongNumber:
    try:
        return int(digits)
    except ValueError:  # more digits than int() converts
        return LongNumber(digits)


def _float(literal: str) -> float | NotFinite:
    value = float(literal)
    return value if math.isfinite(value) else NotFinite(literal)


def encodes(text: str) -> bool:
    """Whether the string is text that UTF-8 (and so PostgreSQL and SQLite) can store: not one holding a
    lone surrogate, which a JSON escape such as `\\udfff` or a file name from the command line can make."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_problems(value: Any, *, file: str = "", where: str = "", brackets: bool = False) -> list[FieldProblem]:
    """What no column can hold in a parsed JSON (or YAML) value, each named by its dotted path (list items
    as `.0`, or `[0]` with `brackets`): a NUL character, a lone surrogate, an integer too long to read
    (LongNumber), a number that is not finite."""
    problems: list[FieldProblem] = []
    stack = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, LongNumber):
            digits = len(item.lstrip("-"))
            problems.append(FieldProblem(path, f"is a number of {digits} digits: too long to read", file))
        elif isinstance(item, NotFinite):
            problems.append(FieldProblem(path, f"is {item[:20]}: numbers must be finite", file))
        elif isinstance(item, str):
            if "\x00" in item:
                problems.append(FieldProblem(path, NUL_REASON, file))
            elif not encodes(item):
                problems.append(FieldProblem(path, SURROGATE_REASON, file))
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append(FieldProblem(path, f"is {item!r}: numbers must be finite", file))
        elif isinstance(item, dict):
            for key, child in item.items():
                at = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and ("\x00" in key or not encodes(key)):
                    where_key = path or "(document)"
                    reason = "a key " + ("contains a NUL character" if "\x00" in key else "holds a lone surrogate")
                    problems.append(FieldProblem(where_key, reason, file))
                    continue
                stack.append((at, child))
        elif isinstance(item, list):
            if brackets:
                stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
            else:
                stack.extend((f"{path}.{i}" if path else str(i), child) for i, child in enumerate(item))
    return sorted(problems, key=lambda p: p.field)


def json_value(data: str | bytes, *, field: str = "body", file: str = "") -> Any:
    """The parsed JSON, strict UTF-8 and bounded depth, with over-long integers and non-finite numbers
    left as LongNumber and NotFinite markers and strings as they came: for a caller that runs
    text_problems itself, per record (the transcript import). Anyone else: json_loads."""
    text = decode_utf8(data, field=field, file=file) if isinstance(data, bytes) else data
    json_depth_check(text, field=field, file=file)
    try:
        return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=NotFinite)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} (column {exc.colno})"
        raise InvalidInput([FieldProblem(field, reason, file, line=exc.lineno)]) from None
    except RecursionError:  # the depth check's regexes and the parser disagree on some odd input
        raise InvalidInput([FieldProblem(field, "JSON is nested too deeply", file)]) from None


def json_loads(data: str | bytes, *, field: str = "body", file: str = "", where: str | None = None) -> Any:
    """json.loads for untrusted input: strict UTF-8, bounded depth, and nothing a column cannot hold (a NUL,
    a lone surrogate, an integer longer than Python converts, NaN or Infinity); every refusal an InvalidInput
    naming the field by its dotted path from `where` (default: `field`)."""
    text = decode_utf8(data, field=field, file=file) if isinstance(data, bytes) else data
    marked: list[str] = []

    def number(digits: str) -> int | LongNumber:
        found = _int(digits)
        if isinstance(found, LongNumber):
            marked.append(found)
        return found

    def decimal(literal: str) -> float | NotFinite:
        found = _float(literal)
        if isinstance(found, NotFinite):
            marked.append(found)
        return found

    def constant(name: str) -> NotFinite:
        marked.append(name)
        return NotFinite(name)

    json_depth_check(text, field=field, file=file)
    try:
        value = json.loads(text, parse_int=number, parse_float=decimal, parse_constant=constant)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} (column {exc.colno})"
        raise InvalidInput([FieldProblem(field, reason, file, line=exc.lineno)]) from None
    except RecursionError:  # the depth check's regexes and the parser disagree on some odd input
        raise InvalidInput([FieldProblem(field, "JSON is nested too deeply", file)]) from None
    # A NUL or a lone surrogate comes only from a `\u` escape (or a str that already held one).
    if marked or "\\u" in text or (not isinstance(data, bytes) and not encodes(text)):
        root = field if where is None else where
        problems = text_problems(value, file=file, where=root)
        if problems:
            raise InvalidInput([FieldProblem(p.field or field, p.reason, file) for p in problems])
    return value


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases: `*name` is how a small file expands without bound."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"aliases (*{event.anchor}) are not allowed in this file", event.start_mark
            )
        return super().compose_node(parent, index)


def yaml_load(text: str) -> Any:
    """yaml.safe_load without aliases, with bounded nesting, and without a string no column holds (a NUL, a
    lone surrogate) or a number that is not finite; raises yaml.YAMLError."""
    try:
        value = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None
    problems = text_problems(value)  # a double-quoted "\udfff" or "\0" is a lone surrogate or a NUL
    if problems:
        raise yaml.YAMLError("; ".join(str(p) for p in problems[:5]))
    return value


def read_bounded(path: Path, name: str, *, file: str = "") -> bytes:
    """The file's bytes, refused (TooLarge) from its size alone when over EVALUATION[name]."""
    most = limit(name)
    size = path.stat().st_size
    if size > most:
        raise too_large("", f"the file is {size} bytes", name, file=file)
    with path.open("rb") as f:
        data = f.read(most + 1)  # the file may have grown since stat
    if len(data) > most:
        raise too_large("", f"the file is over {most} bytes", name, file=file)
    return data


def value_problems(value: Any, *, file: str = "", where: str = "") -> list[FieldProblem]:
    """Strings over CATALOG_MAX_TEXT_CHARS and lists (or mappings) over CATALOG_MAX_LIST_ITEMS,
    each named by its dotted path."""
    max_text, max_items = limit("CATALOG_MAX_TEXT_CHARS"), limit("CATALOG_MAX_LIST_ITEMS")
    problems: list[FieldProblem] = []
    stack = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and len(item) > max_text:
            reason = f"is {len(item)} characters: the limit is {max_text} (EVALUATION['CATALOG_MAX_TEXT_CHARS'])"
            problems.append(FieldProblem(path or "(document)", reason, file))
        elif isinstance(item, list | dict):
            if len(item) > max_items:
                reason = f"has {len(item)} items: the limit is {max_items} (EVALUATION['CATALOG_MAX_LIST_ITEMS'])"
                problems.append(FieldProblem(path or "(document)", reason, file))
                continue
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((f"{path}.{key}" if path else str(key), child) for key, child in pairs)
    return sorted(problems, key=lambda p: p.field)


class StringField(serializers.CharField):
    """DRF's CharField taking only a string: DRF's own turns a number into its digits (`0` -> "0"), which
    accepts what the OpenAPI schema (type: string) says is invalid."""

    default_error_messages = {"not_a_string": "must be a string, not {kind}"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string", kind=_json_kind(data))
        return super().to_internal_value(data)


class BooleanField(serializers.BooleanField):
    """DRF's BooleanField taking only JSON's true and false: DRF's own also takes 1, 0, "yes", "on", "True"
    and more, which the OpenAPI schema (type: boolean) says are invalid. For JSON bodies; a query parameter
    is text, and keeps DRF's field."""

    default_error_messages = {"not_a_boolean": "must be true or false, not {kind}"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("not_a_boolean", kind=_json_kind(data))
        return data


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__
