"""What a suite tests, resolved as spec 003 says, and the sources its cache fingerprint covers.

Order: frontmatter `skills` (folders with a SKILL.md, or Python skill/tool providers), else a
SKILL.md beside the EVAL.md. `tools` are Python callables. `agent` (or an AGENT.md beside the
EVAL.md) boots a whole agent: its identity and every skill under its folder. A sidecar
`name.eval.md` beside `name.py`, a `module:` key, or a module's own `EVAL` string anchors the
suite to that module, whose source joins the fingerprint.

Python providers are named by dotted path (`pkg.module`, `pkg.module:function`) or by file path
(`skills/calc/tools.py`, `skills/calc/tools.py:add`). A module provides a skill through a `SKILL`
string and tools through a `TOOLS` list; a callable is a tool.
"""

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from evaluation.suites.parser import EvalSuite, SuiteError


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


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


_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array", dict: "object"}


def tool_from_callable(fn: Callable[..., Any]) -> Tool:
    """A function-calling schema from the signature (annotations) and the docstring."""
    signature = inspect.signature(fn)
    properties: dict[str, Any] = {}
    required = []
    doc = inspect.getdoc(fn) or ""
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = param.annotation if param.annotation is not inspect.Parameter.empty else str
        properties[name] = {"type": _TYPES.get(annotation, "string")}
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return Tool(
        name=fn.__name__,
        description=doc.split("\n\n")[0],
        parameters={"type": "object", "properties": properties, "required": required},
        fn=fn,
    )


def _add_provider(subject: Subject, ref: str, base: Path, *, as_tool: bool, suite: EvalSuite) -> None:
    folder = base / ref
    if not as_tool and folder.is_dir() and (folder / "SKILL.md").is_file():
        text = (folder / "SKILL.md").read_text(encoding="utf-8")
        subject.skills.append((folder.name, text))
        subject.sources[f"skill:{ref}"] = _digest(text.encode())
        return
    try:
        module, obj = resolve_reference(ref, base)
    except (ImportError, AttributeError, FileNotFoundError, SyntaxError) as exc:
        raise SuiteError(suite.path, None, f"{'tools' if as_tool else 'skills'}: cannot load {ref!r} ({exc})") from None
    subject.sources[f"module:{ref}"] = _digest(_module_source(module))
    if callable(obj) and not isinstance(obj, ModuleType):
        subject.tools.append(tool_from_callable(obj))
        return
    if isinstance(getattr(obj, "SKILL", None), str):
        subject.skills.append((ref, obj.SKILL))
    for fn in getattr(obj, "TOOLS", []) or []:
        subject.tools.append(tool_from_callable(fn))


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
    if (suite.folder / "AGENT.md").is_file() and Path(suite.path).name == "EVAL.md":
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
    elif agent is None and (base / "SKILL.md").is_file() and Path(suite.path).name == "EVAL.md":
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
        for fn in getattr(module, "TOOLS", []) or []:
            subject.tools.append(tool_from_callable(fn))
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
