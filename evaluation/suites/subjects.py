"""What a suite tests, resolved as spec 003 says, and the sources its cache fingerprint covers.

Order: frontmatter `skills` (folders with a SKILL.md, or Python skill/tool providers), else a
SKILL.md beside the suite file (`EVAL.md`, `name.eval.md` or `name.EVAL.md`). `tools` are Python
callables. `agent` (or an AGENT.md beside the suite file) boots a whole agent: its identity and
every skill under its folder. A sidecar `name.eval.md` beside `name.py`, a `module:` key, or a
module's own `EVAL` string anchors the suite to that module, whose source joins the fingerprint.

Python providers are named by dotted path (`pkg.module`, `pkg.module:function`) or by file path
(`skills/calc/tools.py`, `skills/calc/tools.py:add`). A module provides a skill through a `SKILL`
string and tools through a `TOOLS` list; a callable is a tool. A tool's JSON Schema comes from its
signature through pydantic, which also checks the model's arguments before each call.
"""

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, ValidationError, create_model
from pydantic.fields import FieldInfo

from evaluation.suites.parser import EvalSuite, SuiteError, is_suite_file


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments object, as function calling sends it."""
    fn: Callable[..., Any]
    arguments: type[BaseModel] | None = field(default=None, repr=False)
    """Validates the model's arguments before fn is called (None: call fn as they come)."""

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def call(self, arguments: dict[str, Any]) -> Any:
        """fn's result for the model's arguments; when they do not fit fn's parameters, a message
        naming each wrong argument and why, returned (not raised) so the model can correct itself."""
        if self.arguments is None:
            return self.fn(**arguments)
        try:
            checked = self.arguments.model_validate(arguments)
        except ValidationError as exc:
            return _invalid_arguments(self.name, exc)
        # Only the arguments the model gave: a parameter left out keeps fn's own default object.
        fields = self.arguments.model_fields
        given = {fields[f].alias or f: getattr(checked, f) for f in checked.model_fields_set if f in fields}
        given.update(checked.model_extra or {})
        positional = [
            given.pop(param.name, param.default)
            for param in inspect.signature(self.fn).parameters.values()
            if param.kind is param.POSITIONAL_ONLY
        ]
        return self.fn(*positional, **given)


@dataclass
class Subject:
    """Everything the agent under test is made of, and the sources that identify it."""

    skills: list[tuple[str, str]] = field(default_factory=list)
    """(name, instructions)"""
    tools: list[Tool] = field(default_factory=list)
    identity: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    """label -> sha256 of its contents, for the fingerprint"""
    module: str | None = None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_module(ref: str, base: Path) -> ModuleType:
    path = (base / ref) if not Path(ref).is_absolute() else Path(ref)
    if ref.endswith(".py"):
        if not path.is_file():
            path = Path(ref)
        if not path.is_file():
            raise FileNotFoundError(f"no file {ref}")
        name = "evalsubject_" + _digest(str(path.resolve()).encode())[:12]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(ref)


def _module_source(module: ModuleType) -> bytes:
    try:
        return inspect.getsource(module).encode()
    except (OSError, TypeError):
        return repr(sorted(vars(module))).encode()


def resolve_reference(ref: str, base: Path) -> tuple[ModuleType, Any]:
    """(module, the object named) for 'pkg.mod', 'pkg.mod:attr', 'file.py' or 'file.py:attr'."""
    module_ref, _, attr = ref.partition(":")
    module = _load_module(module_ref, base)
    obj: Any = module
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return module, obj


class ToolSchemaError(TypeError):
    """A callable whose parameters cannot be described to a model (an unresolvable or unsupported type)."""


def tool_from_callable(fn: Callable[..., Any]) -> Tool:
    """A function-calling schema from the signature and the docstring, and a validator for the
    arguments the model sends.

    pydantic builds both from the annotations (resolved, so `from __future__ import annotations`
    works). A parameter's description is its `Annotated[..., Field(description=...)]`, else its
    entry in the docstring's Args section (Google style); the tool's description is the
    docstring's first paragraph.
    """
    name = getattr(fn, "__name__", type(fn).__name__)
    summary, documented = _docstring(inspect.getdoc(fn) or "")
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, SyntaxError, TypeError) as exc:
        raise ToolSchemaError(f"tool {name}: cannot read the parameters' annotations ({exc})") from None
    fields: dict[str, Any] = {}
    extra: Literal["allow", "forbid"] = "forbid"
    for index, param in enumerate(signature.parameters.values()):
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = Any if param.annotation is param.empty else param.annotation
        default = ... if param.default is param.empty else param.default
        # Fields are named by position and aliased to the parameter, so a parameter may be called
        # `json`, `schema` or `_id` without clashing with BaseModel.
        info = Field(default, alias=param.name)
        annotated = any(isinstance(m, FieldInfo) and m.description for m in getattr(annotation, "__metadata__", ()))
        if not annotated and param.name in documented:
            # Passed only when there is one: an explicit description=None would hide Annotated's.
            info = Field(default, alias=param.name, description=documented[param.name])
        fields[f"arg{index}"] = (annotation, info)
    try:
        model = create_model(
            f"{name}_arguments",
            __config__=ConfigDict(extra=extra),
            __module__=getattr(fn, "__module__", None) or __name__,
            **fields,
        )
        parameters = _tidy_schema(model.model_json_schema())
    except PydanticUserError as exc:
        raise ToolSchemaError(f"tool {name}: cannot describe its parameters to a model ({exc})") from None
    return Tool(name=name, description=summary, parameters=parameters, fn=fn, arguments=model)


_ARGS_HEADERS = ("args:", "arguments:", "parameters:", "params:", "keyword args:", "keyword arguments:")
_OTHER_HEADERS = tuple(
    f"{word}:" for word in "returns return yields raises example examples note notes attributes".split()
)
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(first paragraph, {parameter: description}) from a cleaned docstring with a Google-style
    Args section; an entry's indented continuation lines join its description."""
    summary: list[str] = []
    described: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in doc.splitlines():
        header = line.strip().lower()
        if not line.startswith((" ", "\t")) and header in _ARGS_HEADERS + _OTHER_HEADERS:
            section, current, indent = header, None, 0
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in _ARGS_HEADERS or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        indent = indent or depth
        entry = _ARG_LINE.match(line.strip()) if depth <= indent else None
        if entry:
            current = entry.group(1)
            described[current] = entry.group(2).strip()
        elif current is not None:
            described[current] = f"{described[current]} {line.strip()}".strip()
    first = "\n".join(summary).strip().split("\n\n")[0]
    return first, {k: v for k, v in described.items() if v}


_DATA_KEYWORDS = ("default", "enum", "const", "examples")
_NAMED_SCHEMAS = ("properties", "patternProperties", "$defs")


def _tidy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema made compact for function calling: no titles, and $defs inlined where
    they are used (a recursive model keeps its $defs entry and $ref)."""
    defs: dict[str, Any] = schema.pop("$defs", {})
    kept: set[str] = set()

    def tidy(node: Any, expanding: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [tidy(item, expanding) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in expanding:
                kept.add(name)
            else:
                node = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                expanding = expanding | {name}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _DATA_KEYWORDS:
                out[key] = value
            elif key in _NAMED_SCHEMAS and isinstance(value, dict):
                out[key] = {name: tidy(sub, expanding) for name, sub in value.items()}
            else:
                out[key] = tidy(value, expanding)
        return out

    tidied = tidy(schema, frozenset())
    done: dict[str, Any] = {}
    while kept - done.keys():
        name = min(kept - done.keys())
        done[name] = tidy(defs[name], frozenset({name}))
    if done:
        tidied["$defs"] = dict(sorted(done.items()))
    return tidied


def _invalid_arguments(tool: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"]).lstrip(".")
        if item["type"] == "missing":
            problems.append(f"{where}: missing (this argument is required)")
        elif item["type"] == "extra_forbidden":
            problems.append(f"{where}: not a parameter of {tool}")
        else:
            got = repr(item["input"])
            got = got if len(got) <= 80 else got[:77] + "..."
            problems.append(f"{where or 'arguments'}: {item['msg']} (got {got})")
    return f"Invalid arguments for {tool}: " + "; ".join(problems) + ". Call the tool again with corrected arguments."


def _add_provider(subject: Subject, ref: str, base: Path, *, as_tool: bool, suite: EvalSuite) -> None:
    folder = base / ref
    if not as_tool and folder.is_dir() and (folder / "SKILL.md").is_file():
        text = (folder / "SKILL.md").read_text(encoding="utf-8")
        subject.skills.append((folder.name, text))
        subject.sources[f"skill:{ref}"] = _digest(text.encode())
        return
    key = "tools" if as_tool else "skills"
    try:
        module, obj = resolve_reference(ref, base)
    except (ImportError, AttributeError, FileNotFoundError, SyntaxError) as exc:
        raise SuiteError(suite.path, None, f"{key}: cannot load {ref!r} ({exc})") from None
    subject.sources[f"module:{ref}"] = _digest(_module_source(module))
    if callable(obj) and not isinstance(obj, ModuleType):
        subject.tools.extend(_tools([obj], suite, key))
        return
    if isinstance(getattr(obj, "SKILL", None), str):
        subject.skills.append((ref, obj.SKILL))
    subject.tools.extend(_tools(getattr(obj, "TOOLS", []) or [], suite, key))


def _tools(fns: list[Callable[..., Any]], suite: EvalSuite, key: str) -> list[Tool]:
    try:
        return [tool_from_callable(fn) for fn in fns]
    except ToolSchemaError as exc:
        raise SuiteError(suite.path, None, f"{key}: {exc}") from None


def _agent_folder(suite: EvalSuite) -> Path | None:
    ref = suite.frontmatter.get("agent")
    if ref:
        folder = (
            Path(ref)
            if Path(ref).is_absolute()
            else (suite.folder / ref if (suite.folder / ref).exists() else Path(ref))
        )
        if not (folder / "AGENT.md").is_file():
            raise SuiteError(suite.path, None, f"agent: no AGENT.md in {ref}")
        return folder
    if (suite.folder / "AGENT.md").is_file() and is_suite_file(Path(suite.path)):
        return suite.folder
    return None


def anchor_module(suite: EvalSuite) -> str | None:
    """The module a suite is colocated with: `module:` key, else a sidecar's sibling .py file."""
    if suite.frontmatter.get("module"):
        return str(suite.frontmatter["module"])
    path = Path(suite.path)
    if path.name.lower().endswith(".eval.md") and path.name != "EVAL.md":
        sibling = path.with_name(path.name[: -len(".eval.md")] + ".py")
        if sibling.is_file():
            return str(sibling)
    return None


def resolve_subject(suite: EvalSuite) -> Subject:
    subject = Subject()
    base = suite.folder
    agent = _agent_folder(suite)
    if agent is not None:
        identity = (agent / "AGENT.md").read_text(encoding="utf-8")
        subject.identity = identity
        subject.sources[f"agent:{agent}/AGENT.md"] = _digest(identity.encode())
        for skill in sorted(agent.rglob("SKILL.md")):
            text = skill.read_text(encoding="utf-8")
            subject.skills.append((skill.parent.name, text))
            subject.sources[f"skill:{skill}"] = _digest(text.encode())
    skills = suite.frontmatter.get("skills")
    if skills:
        for ref in skills:
            _add_provider(subject, ref, base, as_tool=False, suite=suite)
    elif agent is None and (base / "SKILL.md").is_file() and is_suite_file(Path(suite.path)):
        text = (base / "SKILL.md").read_text(encoding="utf-8")
        subject.skills.append((base.name, text))
        subject.sources[f"skill:{base / 'SKILL.md'}"] = _digest(text.encode())
    for ref in suite.frontmatter.get("tools") or []:
        _add_provider(subject, ref, base, as_tool=True, suite=suite)
    module_ref = anchor_module(suite)
    if module_ref:
        try:
            module, _ = resolve_reference(module_ref, Path("."))
        except (ImportError, AttributeError, FileNotFoundError, SyntaxError) as exc:
            raise SuiteError(suite.path, None, f"module: cannot load {module_ref!r} ({exc})") from None
        subject.module = module_ref
        subject.sources[f"anchor:{module_ref}"] = _digest(_module_source(module))
        # A module that is itself a tool or skill provider is offered to the agent as such.
        if isinstance(getattr(module, "SKILL", None), str):
            subject.skills.append((module_ref, module.SKILL))
        subject.tools.extend(_tools(getattr(module, "TOOLS", []) or [], suite, "module"))
    return subject


def module_suites(ref: str) -> list[EvalSuite]:
    """Doctest-style: a module's `EVAL` string is a suite anchored to that module.

    ref is a dotted module name or a .py file path; the suite is empty when the module has none.
    """
    from evaluation.suites.parser import parse_suite

    try:
        module = _load_module(ref, Path("."))
    except (ImportError, FileNotFoundError, SyntaxError) as exc:
        raise SuiteError(ref, None, f"cannot load the module ({exc})") from None
    text = getattr(module, "EVAL", None)
    if not isinstance(text, str):
        return []
    path = inspect.getsourcefile(module) or ref
    suite = parse_suite(text, f"{path}::EVAL")
    suite.frontmatter.setdefault("module", ref)
    return [suite]
