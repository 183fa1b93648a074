"""Bounds on untrusted input: the size settings (docs/limits.md) and safe JSON and YAML loading.

Every loader here refuses with an InvalidInput that names the field and the limit, fast and
before the costly step: a size before reading, nesting depth before parsing, YAML aliases before
they expand. TooLarge (an InvalidInput) is the one that doors answer with 413.
"""

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from evaluation.errors import FieldProblem, InvalidInput

DEFAULTS: dict[str, int] = {
    "JSON_MAX_DEPTH": 64,
    "CATALOG_MAX_FILE_BYTES": 1_000_000,
    "CATALOG_MAX_TEXT_CHARS": 20_000,
    "CATALOG_MAX_LIST_ITEMS": 1_000,
    "SUITE_MAX_FILE_BYTES": 1_000_000,
    "SUITE_MAX_CASES": 500,
    "INGEST_MAX_RECORDS": 5_000,
    "IMPORT_MAX_FILE_BYTES": 20_000_000,
    "IMPORT_MAX_RECORDS": 10_000,
}


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
    found: list[str] = []

    def walk(item: Any, where: str) -> None:
        if isinstance(item, str) and "\x00" in item:
            found.append(where)
        elif isinstance(item, dict):
            for key, inner in item.items():
                walk(key, where)
                walk(inner, f"{where}.{key}" if where else str(key))
        elif isinstance(item, list):
            for index, inner in enumerate(item):
                walk(inner, f"{where}.{index}" if where else str(index))

    walk(value, field)
    if found:
        raise InvalidInput(
            [FieldProblem(where or "body", "contains a NUL character (\\u0000)", file) for where in found]
        )


def json_loads(
    data: str | bytes, *, field: str = "body", file: str = "", parse_int: Callable[[str], Any] | None = None
) -> Any:
    """json.loads for untrusted input: strict UTF-8, bounded depth, no NUL in a string, no integer longer than
    Python converts (sys.get_int_max_str_digits); every refusal an InvalidInput. `parse_int` as json.loads's
    (a caller that names the field of an over-long number itself)."""
    text = decode_utf8(data, field=field, file=file) if isinstance(data, bytes) else data
    json_depth_check(text, field=field, file=file)
    try:
        value = json.loads(text, parse_int=parse_int)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} (column {exc.colno})"
        raise InvalidInput([FieldProblem(field, reason, file, line=exc.lineno)]) from None
    except RecursionError:  # the depth check's regexes and the parser disagree on some odd input
        raise InvalidInput([FieldProblem(field, "JSON is nested too deeply", file)]) from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise InvalidInput([FieldProblem(field, f"invalid JSON: {exc}", file)]) from None
    nul_check(text, value, field=field, file=file)
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
    """yaml.safe_load without aliases and with bounded nesting; raises yaml.YAMLError."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None


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
