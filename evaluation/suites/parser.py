"""The EVAL.md format: optional YAML frontmatter, then `## ` cases with Prompt and Expect sections.

Rules (each has its own test):
- Frontmatter only when the file's first line is `---`; it ends at the next `---` line (an
  unclosed block is an error). Keys: skills, tools, model, system, agent, module, metadata; a
  scalar where a list is expected (skills, tools) is a one-item list.
- A line starting with `## ` opens a case named by the rest of the line, trimmed.
- A heading of any level whose text is `Prompt` or `Expect` (any case) is a section marker, not a
  case; other headings inside a section stay in its content.
- Text before the first case, and in a case before its first section, is ignored.
- A repeated section appends to the first; sections are trimmed.
- A case with an empty or missing Prompt or Expect is an error naming the case and the section
  (Prompt is checked first). No cases at all is an empty suite, not an error.
- Lines inside fenced code blocks (``` or ~~~) are content, never headings.
Errors carry the file and line.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FRONTMATTER_KEYS = ("skills", "tools", "model", "system", "agent", "module", "metadata")
LIST_KEYS = ("skills", "tools")
SECTIONS = ("prompt", "expect")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")


class SuiteError(ValueError):
    """A problem in an EVAL.md file; str() is 'file:line: reason'."""

    def __init__(self, file: str, line: int | None, reason: str):
        self.file, self.line, self.reason = file, line, reason
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class EvalCase:
    name: str
    prompt: str
    expect: str
    line: int
    """Line of the case's `## ` heading (1-based)."""


@dataclass
class EvalSuite:
    path: str
    frontmatter: dict[str, Any] = field(default_factory=dict)
    cases: list[EvalCase] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return Path(self.path).parent

    @property
    def label(self) -> str:
        """What pytest items are prefixed with: the file's folder name (a sidecar's own stem)."""
        if self.path.endswith("::EVAL"):
            module = str(self.frontmatter.get("module") or self.path.removesuffix("::EVAL"))
            return Path(module).stem if module.endswith(".py") else module
        name = Path(self.path).name
        if name.upper() != "EVAL.MD" and name.lower().endswith(".eval.md"):
            return name[: -len(".eval.md")]
        return self.folder.name or str(self.folder)


def _frontmatter(lines: list[str], file: str) -> tuple[dict[str, Any], int]:
    """(frontmatter, index of the first body line)."""
    if not lines or lines[0].rstrip() != "---":
        return {}, 0
    for index in range(1, len(lines)):
        if lines[index].rstrip() == "---":
            break
    else:
        raise SuiteError(file, 1, "frontmatter opened with '---' is never closed by a '---' line")
    try:
        data = yaml.safe_load("\n".join(lines[1:index])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SuiteError(
            file, (mark.line + 2) if mark else 1, f"frontmatter is not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(data, dict):
        raise SuiteError(file, 2, "frontmatter must be a mapping of keys to values")
    for key in data:
        if key not in FRONTMATTER_KEYS:
            raise SuiteError(
                file, _key_line(lines, key), f"unknown frontmatter key {key!r} (known: {', '.join(FRONTMATTER_KEYS)})"
            )
    for key in LIST_KEYS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            data[key] = [value]
        elif not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise SuiteError(file, _key_line(lines, key), f"{key}: must be a string or a list of strings")
    for key in ("model", "system", "agent", "module"):
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise SuiteError(file, _key_line(lines, key), f"{key}: must be a string")
    return data, index + 1


def _key_line(lines: list[str], key: str) -> int:
    for number, line in enumerate(lines, start=1):
        if line.startswith(f"{key}:"):
            return number
    return 1


def parse_suite(text: str, path: str = "EVAL.md") -> EvalSuite:
    """Parse EVAL.md text; raises SuiteError (with file and line) on the first problem found."""
    lines = text.splitlines()
    frontmatter, start = _frontmatter(lines, path)
    suite = EvalSuite(path=path, frontmatter=frontmatter)
    cases: list[tuple[str, int, dict[str, list[str]]]] = []
    section: str | None = None
    fence: str | None = None
    for number in range(start, len(lines)):
        line = lines[number]
        fence_match = _FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1).startswith(fence):
                fence = None  # the closing fence
        elif fence_match:
            fence = fence_match.group(1)[0] * 3
        else:
            heading = _HEADING.match(line)
            if heading:
                level, title = len(heading.group(1)), heading.group(2).strip()
                if title.lower() in SECTIONS:
                    if cases:
                        section = title.lower()
                        cases[-1][2].setdefault(section, []).append("")  # a repeated section appends
                    continue
                if level == 2 and line.startswith("## "):
                    cases.append((title, number + 1, {}))
                    section = None
                    continue
        if cases and section is not None:
            cases[-1][2][section].append(line)
    seen: dict[str, int] = {}
    for name, line_no, sections in cases:
        if not name:
            raise SuiteError(path, line_no, "a case heading needs a name after '## '")
        if name in seen:
            raise SuiteError(path, line_no, f"case {name!r} is already defined at line {seen[name]}")
        seen[name] = line_no
        texts = {key: "\n".join(sections.get(key, [])).strip() for key in SECTIONS}
        for key in SECTIONS:
            if not texts[key]:
                state = "is empty" if key in sections else "is missing"
                raise SuiteError(path, line_no, f"case {name!r}: the {key.capitalize()} section {state}")
        suite.cases.append(EvalCase(name=name, prompt=texts["prompt"], expect=texts["expect"], line=line_no))
    return suite


def load_file(path: str | Path) -> EvalSuite:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError(str(p), None, f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise SuiteError(str(p), None, f"cannot read: {exc.strerror}") from None
    return parse_suite(text, str(p))


def is_suite_file(path: Path) -> bool:
    name = path.name
    return name == "EVAL.md" or name.lower().endswith(".eval.md")


def discover(root: str | Path) -> list[Path]:
    """Every EVAL.md and *.eval.md under root, sorted."""
    base = Path(root)
    if base.is_file():
        return [base] if is_suite_file(base) else []
    return sorted(p for p in base.rglob("*") if p.is_file() and is_suite_file(p) and ".venv" not in p.parts)
