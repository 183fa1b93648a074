"""The layers point down: no import cycle inside evaluation/, and the doors use rooms' services and selectors only.

Layers, bottom up (docs/architecture.md):
  base     models, conf, errors, roles, jsonschema_errors, limits, redact, limits
  shared   runs (the kernel), providers, text
  rooms    tutoring, drift, suites, judging    (never each other, never a door)
  facade   catalog                             (spans rooms, through their services and selectors)
  doors    admin, api, web, protocol, management, tasks, consumers, routing, urls, templatetags, apps
Imports inside functions count as much as imports at the top.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evaluation"

BASE = {"models", "conf", "errors", "roles", "jsonschema_errors", "limits", "redact"}
SHARED = {"runs", "providers", "text"}
ROOMS = {"tutoring", "drift", "suites", "judging"}
FACADE = {"catalog"}
DOORS = {
    "admin",
    "adminsite",
    "api",
    "web",
    "protocol",
    "management",
    "tasks",
    "consumers",
    "routing",
    "urls",
    "templatetags",
    "apps",
    "checks",  # system checks, run by Django's check framework
}
PUBLIC = {"services", "selectors"}
"""What a room shows the doors."""


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    mods = modules()

    def resolve(name: str) -> str | None:
        while name:
            if name in mods:
                return name
            name = name.rpartition(".")[0]
        return None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                head = node.module or ""
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    head = ".".join(base + ([node.module] if node.module else []))
                # `from pkg import module` imports the module; `from module import name` imports the module.
                targets = [f"{head}.{a.name}" if f"{head}.{a.name}" in mods else head for a in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] != "evaluation":
                    continue
                found = resolve(target)
                if found and found != module and not module.startswith(found + "."):
                    graph[module].add(found)
    return graph


def layer(module: str) -> tuple[str, str]:
    """(layer, area): the area is the top-level name under evaluation."""
    parts = module.split(".")
    area = parts[1] if len(parts) > 1 else ""
    for name, members in (("base", BASE), ("shared", SHARED), ("room", ROOMS), ("facade", FACADE), ("door", DOORS)):
        if area in members:
            return name, area
    return "package", area


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        kind, area = layer(module)
        for target in sorted(targets):
            t_kind, t_area = layer(target)
            leaf = target.split(".")[2] if len(target.split(".")) > 2 else ""
            if t_kind == "package":
                continue
            if kind == "base" and t_kind != "base":
                out.append(f"{module} (base) imports {target} ({t_kind})")
            elif kind == "shared" and t_kind in ("room", "facade", "door"):
                out.append(f"{module} (shared) imports {target} ({t_kind})")
            elif kind == "room" and t_kind == "room" and t_area != area:
                out.append(f"{module} (room {area}) imports another room: {target}")
            elif kind == "room" and t_kind in ("facade", "door"):
                out.append(f"{module} (room {area}) imports {target} ({t_kind})")
            elif kind == "facade" and t_kind == "room" and leaf not in PUBLIC:
                out.append(f"{module} (facade) imports a room's internals: {target}")
            elif kind == "facade" and t_kind == "door":
                out.append(f"{module} (facade) imports a door: {target}")
            elif kind == "door" and t_kind == "room" and leaf not in PUBLIC:
                out.append(f"{module} (door) imports a room's internals: {target}")
    return out


def test_no_import_cycle_inside_evaluation():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)
    assert len(graph) > 80, f"only {len(graph)} modules found: is the walk looking at the package?"


def test_layers_point_down_and_doors_use_services_and_selectors():
    graph = import_graph()
    unplaced = sorted({layer(m)[1] for m in graph if layer(m)[0] == "package" and m != "evaluation"})
    assert not unplaced, f"modules in no layer (add them to the table above): {unplaced}"
    problems = violations(graph)
    assert not problems, "\n".join(problems)


def test_the_check_catches_what_it_forbids():
    """A door importing a room's internals, a room importing another and a cycle are each reported."""
    graph = {
        "evaluation.api.views": {"evaluation.tutoring.pipeline"},
        "evaluation.tutoring.pipeline": {"evaluation.drift.scorers"},
        "evaluation.drift.scorers": {"evaluation.tutoring.pipeline"},
        "evaluation.runs.services": {"evaluation.suites.services"},
    }
    problems = violations(graph)
    assert any("(door) imports a room's internals: evaluation.tutoring.pipeline" in p for p in problems)
    assert any("imports another room: evaluation.drift.scorers" in p for p in problems)
    assert any("(shared) imports evaluation.suites.services" in p for p in problems)
    assert cycles(graph) == [["evaluation.drift.scorers", "evaluation.tutoring.pipeline"]]
