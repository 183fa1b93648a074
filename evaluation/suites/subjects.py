"""What a suite tests, resolved as spec 003 says, and the sources its cache fingerprint covers.

Order: frontmatter `skills` (folders with a SKILL.md, or Python skill/tool providers), else a
SKILL.md beside the suite file (`EVAL.md`, `name.eval.md` or `name.EVAL.md`). `tools` are Python
callables. `agent` (or an AGENT.md beside the suite file) boots a whole agent: its identity (the
AGENT.md body; its frontmatter `model:` is the agent's own model), the skills under its folder,
and its sub-agents (folders under it with their own AGENT.md), each offered to it as a tool that
delegates a task. A sidecar `name.eval.md` beside `name.py`, a `module:` key, or a module's own
`EVAL` string anchors the suite to that module, whose source joins the fingerprint.

A path a suite names (`skills/greeter`, `tools.py`) is looked up beside the suite file, then in
the project root; Python providers are named by file path (`skills/calc/tools.py`,
`skills/calc/tools.py:add`) or dotted path (`pkg.module`, `pkg.module:function`). Files must lie
inside the suite folders and dotted modules in an allowed package (scope.py). A module provides a
skill through a `SKILL` string and tools through a `TOOLS` list; a callable is a tool. A tool's
JSON Schema comes from its signature through pydantic, which also checks the model's arguments
before each call.
"""

import hashlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, ValidationError, create_model
from pydantic.fields import FieldInfo

from evaluation.suites.parser import EvalSuite, SuiteError, is_suite_file, split_frontmatter
from evaluation.suites.scope import SuiteScope


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
    model: str | None = None
    """The agent's own model (its AGENT.md frontmatter `model:`), used when neither the run nor the
    suite names one."""
    subagents: list["SubAgent"] = field(default_factory=list)
    """The agents this one can delegate to, each offered to it as a tool."""


@dataclass
class SubAgent:
    """An agent inside another agent's folder (its own AGENT.md, skills and sub-agents)."""

    name: str
    description: str
    subject: Subject
    folder: Path

    @property
    def tool_name(self) -> str:
        return "delegate_to_" + (re.sub(r"[^A-Za-z0-9_-]+", "_", self.name).strip("_") or "agent")[:48]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _import(ref: str, *, suite: EvalSuite, scope: SuiteScope, key: str) -> ModuleType:
    """The module a suite names: a .py file (beside the suite, then in the project root, inside a
    suite folder) or a dotted name in an allowed package. Importing runs the module's code, so any
    exception it raises becomes a SuiteError naming the file, the key and the reason."""
    if ref.endswith(".py"):
        path = _find(ref, suite, scope, Path.is_file)
        if path is None:
            raise SuiteError(suite.path, None, f"{key}: no file {ref} {_looked_in(ref, suite, scope)}")
        path = scope.check_file(path, file=suite.path, key=key)
        name = "evalsubject_" + _digest(str(path).encode())[:12]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise SuiteError(suite.path, None, f"{key}: cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise SuiteError(suite.path, None, f"{key}: cannot import {ref} ({type(exc).__name__}: {exc})") from None
        return module
    scope.check_module(ref, file=suite.path, key=key)
    try:
        return importlib.import_module(ref)
    except Exception as exc:
        raise SuiteError(suite.path, None, f"{key}: cannot import {ref} ({type(exc).__name__}: {exc})") from None


def _find(ref: str, suite: EvalSuite, scope: SuiteScope, test: Callable[[Path], bool]) -> Path | None:
    """The first of: ref itself when absolute, else beside the suite file, then in the project root."""
    candidates = [Path(ref)] if Path(ref).is_absolute() else [suite.folder / ref, scope.root / ref]
    return next((c for c in candidates if test(c)), None)


def _looked_in(ref: str, suite: EvalSuite, scope: SuiteScope) -> str:
    if Path(ref).is_absolute():
        return "(absolute path)"
    return f"beside the suite ({suite.folder}) or in the project root ({scope.root})"


def _module_source(module: ModuleType) -> bytes:
    try:
        return inspect.getsource(module).encode()
    except (OSError, TypeError):
        return repr(sorted(vars(module))).encode()


def resolve_reference(ref: str, *, suite: EvalSuite, scope: SuiteScope, key: str) -> tuple[ModuleType, Any]:
    """(module, the object named) for 'pkg.mod', 'pkg.mod:attr', 'file.py' or 'file.py:attr'."""
    module_ref, _, attr = ref.partition(":")
    module = _import(module_ref, suite=suite, scope=scope, key=key)
    obj: Any = module
    for part in filter(None, attr.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SuiteError(suite.path, None, f"{key}: {module_ref} has no {attr!r}") from None
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


def _label(path: Path, suite: EvalSuite) -> str:
    """A file's name in the fingerprint: relative to the suite's folder, so two checkouts in other
    places (or one named by a relative and an absolute path) share cached passes."""
    folder = suite.folder.absolute()
    absolute = path.absolute()
    if absolute.is_relative_to(folder):
        return absolute.relative_to(folder).as_posix()
    return os.path.relpath(absolute, folder).replace(os.sep, "/")


def _read(path: Path, *, suite: EvalSuite, scope: SuiteScope, key: str) -> str:
    """A file the suite brings in, once it is known to lie inside a suite folder."""
    resolved = scope.check_file(path, file=suite.path, key=key)
    try:
        return resolved.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(suite.path, None, f"{key}: cannot read {path} ({exc})") from None


def _add_provider(subject: Subject, ref: str, *, as_tool: bool, suite: EvalSuite, scope: SuiteScope) -> None:
    key = "tools" if as_tool else "skills"
    folder = None if as_tool else _find(ref, suite, scope, lambda p: (p / "SKILL.md").is_file())
    if folder is not None:
        text = _read(folder / "SKILL.md", suite=suite, scope=scope, key=key)
        subject.skills.append((folder.name, text))
        subject.sources[f"skill:{ref}"] = _digest(text.encode())
        return
    module_ref = ref.partition(":")[0]
    if not as_tool and not module_ref.endswith(".py") and ("/" in module_ref or _find(ref, suite, scope, Path.exists)):
        raise SuiteError(suite.path, None, f"skills: no SKILL.md in {ref} {_looked_in(ref, suite, scope)}")
    module, obj = resolve_reference(ref, suite=suite, scope=scope, key=key)
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


def _agent_folder(suite: EvalSuite, scope: SuiteScope) -> Path | None:
    ref = suite.frontmatter.get("agent")
    if ref:
        folder = _find(ref, suite, scope, lambda p: (p / "AGENT.md").is_file())
        if folder is None:
            raise SuiteError(suite.path, None, f"agent: no AGENT.md in {ref} {_looked_in(ref, suite, scope)}")
        return folder
    if (suite.folder / "AGENT.md").is_file() and is_suite_file(Path(suite.path)):
        return suite.folder
    return None


def _subagent_folders(folder: Path) -> list[Path]:
    """The nearest folders under an agent's folder that hold their own AGENT.md: its sub-agents
    (a sub-agent's own sub-agents are its business)."""
    found = []
    for here, dirs, _ in os.walk(folder):
        dirs.sort()
        for name in list(dirs):
            if (Path(here) / name / "AGENT.md").is_file():
                found.append(Path(here) / name)
                dirs.remove(name)
    return sorted(found)


def _load_agent(folder: Path, subject: Subject, *, suite: EvalSuite, scope: SuiteScope) -> dict[str, Any]:
    """Fill subject with the agent in folder: identity (AGENT.md without its frontmatter), own
    model, the skills under its folder and its sub-agents; every file joins the sources. Returns
    the AGENT.md frontmatter."""
    path = folder / "AGENT.md"
    text = _read(path, suite=suite, scope=scope, key="agent")
    meta, body = split_frontmatter(text, str(path), strings=("model", "name", "description"))
    subject.identity = body.strip() + "\n"
    subject.model = meta.get("model") or None
    subject.sources[f"agent:{_label(path, suite)}"] = _digest(text.encode())
    subs = _subagent_folders(folder)
    for skill in sorted(folder.rglob("SKILL.md")):
        if any(skill.is_relative_to(sub) for sub in subs):
            continue  # a sub-agent's skill is the sub-agent's, not this agent's
        skill_text = _read(skill, suite=suite, scope=scope, key="agent")
        subject.skills.append((skill.parent.name, skill_text))
        subject.sources[f"skill:{_label(skill, suite)}"] = _digest(skill_text.encode())
    for sub in subs:
        child = Subject()
        sub_meta = _load_agent(sub, child, suite=suite, scope=scope)
        first = next((line.strip("# ").strip() for line in child.identity.splitlines() if line.strip()), "")
        description = str(sub_meta.get("description") or first or f"the {sub.name} agent")
        agent = SubAgent(str(sub_meta.get("name") or sub.name), description, child, sub)
        clash = next((a for a in subject.subagents if a.tool_name == agent.tool_name), None)
        if clash is not None:
            raise SuiteError(
                suite.path,
                None,
                f"agent: the sub-agents in {clash.folder} and {sub} are both offered as {agent.tool_name}; "
                "give one another name: in its AGENT.md frontmatter",
            )
        subject.subagents.append(agent)
        subject.sources.update(child.sources)
    return meta


def anchor_module(suite: EvalSuite) -> str | None:
    """The module a suite is colocated with: `module:` key, else a sidecar's sibling .py file."""
    if suite.frontmatter.get("module"):
        return str(suite.frontmatter["module"])
    path = Path(suite.path)
    if path.name.lower().endswith(".eval.md") and path.name != "EVAL.md":
        sibling = path.with_name(path.name[: -len(".eval.md")] + ".py")
        if sibling.is_file():
            return sibling.name
    return None


def resolve_subject(suite: EvalSuite, scope: SuiteScope | None = None) -> Subject:
    """The skills, tools, agent and anchored module a suite tests. Every file it reads lies inside
    the suite folders and every module it imports by name in an allowed package (scope, by default
    from the settings); any problem is a SuiteError naming the suite file, the key and the reason."""
    scope = scope or SuiteScope.from_settings()
    subject = Subject()
    agent = _agent_folder(suite, scope)
    if agent is not None:
        _load_agent(agent, subject, suite=suite, scope=scope)
    skills = suite.frontmatter.get("skills")
    base = suite.folder
    if skills:
        for ref in skills:
            _add_provider(subject, ref, as_tool=False, suite=suite, scope=scope)
    elif agent is None and (base / "SKILL.md").is_file() and is_suite_file(Path(suite.path)):
        text = _read(base / "SKILL.md", suite=suite, scope=scope, key="SKILL.md")
        subject.skills.append((base.name, text))
        subject.sources[f"skill:{_label(base / 'SKILL.md', suite)}"] = _digest(text.encode())
    for ref in suite.frontmatter.get("tools") or []:
        _add_provider(subject, ref, as_tool=True, suite=suite, scope=scope)
    module_ref = anchor_module(suite)
    if module_ref:
        module, _ = resolve_reference(module_ref, suite=suite, scope=scope, key="module")
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

    # Named in the pytest options, relative to the working folder; confined like a suite's own names.
    listed = EvalSuite(path=str(Path.cwd() / "eval_modules"))
    module = _import(ref, suite=listed, scope=SuiteScope.from_settings(), key="eval_modules")
    text = getattr(module, "EVAL", None)
    if not isinstance(text, str):
        return []
    path = inspect.getsourcefile(module) or ref
    suite = parse_suite(text, f"{path}::EVAL")
    suite.frontmatter.setdefault("module", path if ref.endswith(".py") else ref)
    return [suite]
