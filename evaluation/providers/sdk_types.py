"""Requests checked against the installed SDKs' own request types (their TypedDicts), as the vendors check
them: a key the type does not declare, a value of the wrong type, a required key missing.

The loopback server refuses such a request with the vendor's 400; tests read the same types to show that
what the product sends is what the SDK declares. The types are read with typing.get_type_hints, so a newer
SDK (a newer API version) is checked by its own declarations, not by a copy of them.
"""

import collections.abc
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

import typing_extensions

_WRAPPERS = {typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.ReadOnly}
_LISTS = {list, collections.abc.Iterable, collections.abc.Sequence, tuple, set}
_MAPS = {dict, collections.abc.Mapping}


@dataclass(frozen=True)
class TypeProblem:
    """Why a request does not fit its type: where (a path of keys and indexes) and what."""

    path: tuple[str | int, ...]
    kind: Literal["extra", "missing", "type", "value"]
    expected: str = ""

    @property
    def dotted(self) -> str:
        """Anthropic's way of naming the place: messages.0.content."""
        return ".".join(str(p) for p in self.path)

    @property
    def param(self) -> str:
        """OpenAI's: messages[0].content."""
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out


@functools.cache
def fields_of(tp: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's (or a pydantic model's) declared keys with their types, and the required ones."""
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except NameError:  # a response model whose annotations name what its module does not import
        fields = getattr(tp, "model_fields", {})
        hints = {name: getattr(info, "annotation", Any) for name, info in fields.items()}
    if typing_extensions.is_typeddict(tp):
        required = set()
        total = getattr(tp, "__total__", True)
        for name, hint in hints.items():
            origin = typing_extensions.get_origin(hint)
            if origin is typing_extensions.Required or (total and origin is not typing_extensions.NotRequired):
                required.add(name)
        return hints, frozenset(required)
    model_fields = getattr(tp, "model_fields", {})
    return {name: hints.get(name, Any) for name in model_fields}, frozenset()


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing_extensions.get_origin(tp)
        if origin in _WRAPPERS or origin is typing_extensions.Annotated:
            tp = typing_extensions.get_args(tp)[0]
            continue
        if isinstance(tp, typing_extensions.TypeAliasType):
            tp = tp.__value__
            continue
        return tp


def _is_record(tp: Any) -> bool:
    return isinstance(tp, type) and (typing_extensions.is_typeddict(tp) or hasattr(tp, "model_fields"))


def _name(tp: Any) -> str:
    tp = _unwrap(tp)
    if tp in (int,):
        return "an integer"
    if tp in (float,):
        return "a number"
    if tp is str:
        return "a string"
    if tp is bool:
        return "a boolean"
    if _is_record(tp) or typing_extensions.get_origin(tp) in _MAPS:
        return "an object"
    if typing_extensions.get_origin(tp) in _LISTS:
        return "an array"
    return "a valid value"


def check(value: Any, tp: Any, path: tuple[str | int, ...] = ()) -> TypeProblem | None:
    """The first way value does not fit the type tp (None when it fits)."""
    tp = _unwrap(tp)
    if tp is Any or tp is object:
        return None
    origin = typing_extensions.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return _check_union(value, typing_extensions.get_args(tp), path)
    if origin is Literal:
        allowed = typing_extensions.get_args(tp)
        if value in allowed and type(value) in {type(a) for a in allowed}:
            return None
        return TypeProblem(path, "value", " or ".join(repr(a) for a in allowed))
    if tp is type(None):
        return None if value is None else TypeProblem(path, "type", "null")
    if _is_record(tp):
        if not isinstance(value, dict):
            return TypeProblem(path, "type", "an object")
        declared, required = fields_of(tp)
        for key in value:
            if key not in declared:
                return TypeProblem((*path, key), "extra")
        for key in sorted(required):
            if key not in value:
                return TypeProblem((*path, key), "missing")
        for key, item in value.items():
            problem = check(item, declared[key], (*path, key))
            if problem is not None:
                return problem
        return None
    if origin in _LISTS or _is_sequence_not_str(tp):
        if not isinstance(value, list):
            return TypeProblem(path, "type", "an array")
        args = typing_extensions.get_args(tp)
        for index, item in enumerate(value):
            problem = check(item, args[0] if args else Any, (*path, index))
            if problem is not None:
                return problem
        return None
    if origin in _MAPS:
        if not isinstance(value, dict):
            return TypeProblem(path, "type", "an object")
        args = typing_extensions.get_args(tp)
        for key, item in value.items():
            problem = check(item, args[1] if len(args) == 2 else Any, (*path, key))
            if problem is not None:
                return problem
        return None
    if tp is bool:
        return None if isinstance(value, bool) else TypeProblem(path, "type", "a boolean")
    if tp is int:
        return (
            None if isinstance(value, int) and not isinstance(value, bool) else TypeProblem(path, "type", "an integer")
        )
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else TypeProblem(path, "type", "a number")
    if tp is str:
        return None if isinstance(value, str) else TypeProblem(path, "type", "a string")
    return None  # a construct this check does not read (a file, a date): accepted


def _is_sequence_not_str(tp: Any) -> bool:
    origin = typing_extensions.get_origin(tp)
    return getattr(origin, "__name__", "") == "SequenceNotStr"


def _check_union(value: Any, options: tuple[Any, ...], path: tuple[str | int, ...]) -> TypeProblem | None:
    """A value fits a union when it fits one member. Objects with a "type" are checked against the members
    whose "type" allows it (the vendors' tagged unions); the problem shown is the one that got deepest."""
    members = [_unwrap(option) for option in options]
    if isinstance(value, dict) and "type" in value:
        tagged = [m for m in members if _is_record(m) and _takes_type(m, value["type"])]
        if tagged:
            members = tagged + [m for m in members if not _is_record(m)]
    problems = []
    for member in members:
        problem = check(value, member, path)
        if problem is None:
            return None
        problems.append(problem)
    if not problems:
        return None
    deepest = max(problems, key=lambda p: (len(p.path), p.kind == "extra"))
    if len(deepest.path) == len(path) and deepest.kind == "type":
        return TypeProblem(path, "type", " or ".join(dict.fromkeys(_name(m) for m in members)))
    return deepest


def _takes_type(record: Any, tag: Any) -> bool:
    declared, _ = fields_of(record)
    hint = declared.get("type")
    if hint is None:
        return False
    return check(tag, hint) is None


def anthropic_error(problem: TypeProblem) -> str:
    """The message Anthropic's API gives for such a request (its invalid_request_error)."""
    where = problem.dotted
    if problem.kind == "extra":
        return f"{where}: Extra inputs are not permitted"
    if problem.kind == "missing":
        return f"{where}: Field required"
    if problem.kind == "value":
        return f"{where}: Input should be {problem.expected}"
    return f"{where}: Input should be {problem.expected}"


def openai_error(problem: TypeProblem) -> tuple[str, str, str]:
    """(message, param, code) as OpenAI's API gives them for such a request."""
    param = problem.param
    if problem.kind == "extra":
        return f"Unknown parameter: '{param}'.", param, "unknown_parameter"
    if problem.kind == "missing":
        return f"Missing required parameter: '{param}'.", param, "missing_required_parameter"
    if problem.kind == "value":
        return f"Invalid value for '{param}': expected {problem.expected}.", param, "invalid_value"
    return f"Invalid type for '{param}': expected {problem.expected}.", param, "invalid_type"


@functools.cache
def request_type(endpoint: str) -> Any:
    """The installed SDK's type for the body of a request to an endpoint ("messages", "responses", "chat",
    "messages_batch", "openai_batch")."""
    if endpoint == "messages":
        from anthropic.types.message_create_params import MessageCreateParamsBase

        class Streamable(MessageCreateParamsBase, total=False):
            stream: bool

        return Streamable
    if endpoint == "messages_batch":
        from anthropic.types.messages.batch_create_params import BatchCreateParams

        return BatchCreateParams
    if endpoint == "responses":
        from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

        return ResponseCreateParamsNonStreaming
    if endpoint == "chat":
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

        return CompletionCreateParamsNonStreaming
    if endpoint == "openai_batch":
        from openai.types.batch_create_params import BatchCreateParams as OpenAIBatchCreateParams

        return OpenAIBatchCreateParams
    raise KeyError(endpoint)


def declared_keys(endpoint: str) -> frozenset[str]:
    """The top-level keys the SDK's type for an endpoint declares."""
    return frozenset(fields_of(request_type(endpoint))[0])
