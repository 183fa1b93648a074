"""The EVAL.md format: optional YAML frontmatter, then `## ` cases with Prompt and Expect sections.

The body is read as CommonMark (markdown-it): headings and code fences come from its block tokens,
and a section's text is the source lines between one heading and the next.

Rules (each has its own test):
- Frontmatter only when the file's first line is `---`; it ends at the next `---` line (an
  unclosed block is an error). Keys: skills, tools, model, system, agent, module, metadata; a
  scalar where a list is expected (skills, tools) is a one-item list. Any other key (SkillKit's
  `name` and `description` among them) is kept in the frontmatter with a SuiteWarning naming
  its line; values are kept JSON-compatible (a YAML date becomes its ISO string).
- A top-level level-2 heading opens a case named by its text: `## name` (a closing run of `#`
  counts only after a space, so `## answers in C#` is the case `answers in C#`) or a setext
  heading (a text line underlined with `---`; put a blank line before a `---` meant as a rule).
- A heading of any level whose text is `Prompt` or `Expect` (any case) is a section marker, not a
  case; other headings inside a section stay in its content.
- Text before the first case, and in a case before its first section, is ignored.
- Sections are trimmed; a repeated section appends its trimmed text to the first, joined by one
  newline (as SkillKit does), however many blank lines stood between them.
- A case with an empty or missing Prompt or Expect is an error naming the case and the section
  (Prompt is checked first). No cases at all is an empty suite, not an error.
- Lines inside fenced code blocks are content, never headings; a fence closes only on a line of
  the same character, at least as long, with no info string. A fence never closed is an error at
  its opening line. Headings inside block quotes, list items and HTML blocks are content too.
Errors carry the file and line.
"""

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from evaluation import limits
from evaluation.errors import InvalidInput
from evaluation.suites.errors import SuiteError, SuiteWarning
from evaluation.suites.scope import SuiteScope

FRONTMATTER_KEYS = ("skills", "tools", "model", "system", "agent", "module", "metadata")
LIST_KEYS = ("skills", "tools")
SECTIONS = ("prompt", "expect")
# Block structure only: a heading's inline token keeps its raw text, and inline parsing of every
# paragraph would cost a third of the time for nothing.
_MARKDOWN = MarkdownIt("commonmark").disable(["inline", "text_join"])


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
    data, start = _yaml_block(lines, file)
    for key in data:
        if key not in FRONTMATTER_KEYS:
            warnings.warn(
                SuiteWarning(
                    f"{file}:{_key_line(lines, key)}: unknown frontmatter key {key!r} is kept but not used"
                    f" (known: {', '.join(FRONTMATTER_KEYS)})"
                ),
                stacklevel=3,
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
    return data, start


def split_frontmatter(text: str, file: str, *, strings: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a markdown file such as an AGENT.md; the keys in `strings` must hold
    a string when present. Errors are SuiteErrors naming the file and line."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    data, start = _yaml_block(lines, file)
    for key in strings:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise SuiteError(file, _key_line(lines, key), f"{key}: must be a string")
    return data, "\n".join(lines[start:])


def _yaml_block(lines: list[str], file: str) -> tuple[dict[str, Any], int]:
    """The YAML mapping between a first-line `---` and the next `---` line, and the body's first index."""
    if not lines or lines[0].rstrip() != "---":
        return {}, 0
    for index in range(1, len(lines)):
        if lines[index].rstrip() == "---":
            break
    else:
        raise SuiteError(file, 1, "frontmatter opened with '---' is never closed by a '---' line")
    try:
        data = limits.yaml_load("\n".join(lines[1:index])) or {}  # aliases refused: they expand without bound
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SuiteError(
            file, (mark.line + 2) if mark else 1, f"frontmatter is not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(data, dict):
        raise SuiteError(file, 2, "frontmatter must be a mapping of keys to values")
    # Suites are stored in JSON fields: a YAML date or a non-string key must not stop that.
    return json.loads(json.dumps(data, default=str)), index + 1


def _key_line(lines: list[str], key: str) -> int:
    for number, line in enumerate(lines, start=1):
        if line.startswith(f"{key}:"):
            return number
    return 1


class _Heading(NamedTuple):
    first: int
    """Index of its first line in the file's lines."""
    end: int
    """Index of the line after it (after a setext heading's underline)."""
    level: int
    text: str


def _headings(lines: list[str], start: int, file: str) -> list[_Heading]:
    """The top-level headings of the body that starts at lines[start]; raises on an unclosed fence."""
    tokens = _MARKDOWN.parse("\n".join(lines[start:]))
    headings = []
    for index, token in enumerate(tokens):
        if token.level != 0 or token.map is None:
            continue  # a heading or fence inside a quote or a list item stays content
        first, end = start + token.map[0], start + token.map[1]
        if token.type == "heading_open":
            text = " ".join(part.strip() for part in tokens[index + 1].content.splitlines())
            headings.append(_Heading(first, end, int(token.tag[1:]), text))
        elif token.type == "fence" and not _closed(token, lines[first:end]):
            raise SuiteError(
                file,
                first + 1,
                f"the code fence opened here with {token.markup!r} is never closed (add a {token.markup} line)",
            )
    return headings


def _closed(fence: Token, lines: list[str]) -> bool:
    """Whether the fence's last line closes it: markdown-it closes an unclosed fence at the end of
    the document, so a fence whose last line is not a closing fence swallowed the rest of the file."""
    if len(lines) < 2:
        return False
    last = lines[-1].expandtabs(4)
    mark = last.strip()
    return len(last) - len(last.lstrip(" ")) <= 3 and len(mark) >= len(fence.markup) and set(mark) == {fence.markup[0]}


def parse_suite(text: str, path: str = "EVAL.md") -> EvalSuite:
    """Parse EVAL.md text; raises SuiteError (with file and line) on the first problem found."""
    size, most = len(text.encode("utf-8", errors="replace")), limits.limit("SUITE_MAX_FILE_BYTES")
    if size > most:
        raise SuiteError(
            path, None, f"the file is {size} bytes: the limit is {most} (EVALUATION['SUITE_MAX_FILE_BYTES'])"
        )
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # markdown-it's line breaks
    frontmatter, start = _frontmatter(lines, path)
    suite = EvalSuite(path=path, frontmatter=frontmatter)
    # Cases and section markers split the body; every other heading is content.
    marks = [h for h in _headings(lines, start, path) if h.text.lower() in SECTIONS or h.level == 2]
    cases: list[tuple[str, int, dict[str, list[str]]]] = []
    for index, heading in enumerate(marks):
        stop = marks[index + 1].first if index + 1 < len(marks) else len(lines)
        key = heading.text.lower()
        if key in SECTIONS:
            if cases:
                # A repeated section appends its own text, trimmed, on the next line (as SkillKit does).
                cases[-1][2].setdefault(key, []).append("\n".join(lines[heading.end : stop]).strip())
        else:
            if len(cases) == limits.limit("SUITE_MAX_CASES"):
                raise SuiteError(
                    path,
                    heading.first + 1,
                    f"more than {len(cases)} cases: the limit is {len(cases)} (EVALUATION['SUITE_MAX_CASES'])",
                )
            cases.append((heading.text, heading.first + 1, {}))
    seen: dict[str, int] = {}
    for name, line_no, sections in cases:
        if not name:
            raise SuiteError(path, line_no, "a case heading needs a name after '## '")
        if name in seen:
            raise SuiteError(path, line_no, f"case {name!r} is already defined at line {seen[name]}")
        seen[name] = line_no
        texts = {key: "\n".join(filter(None, sections.get(key, []))) for key in SECTIONS}
        for key in SECTIONS:
            if not texts[key]:
                state = "is empty" if key in sections else "is missing"
                raise SuiteError(path, line_no, f"case {name!r}: the {key.capitalize()} section {state}")
        suite.cases.append(EvalCase(name=name, prompt=texts["prompt"], expect=texts["expect"], line=line_no))
    return suite


def load_file(path: str | Path, scope: "SuiteScope | None" = None) -> EvalSuite:
    """Read and parse a suite file that lies inside the suite folders (scope, by default from the
    settings); raises SuiteError naming the file (and line) on any problem."""
    p = Path(path)
    (scope or SuiteScope.from_settings()).check_file(p, file=str(p))
    try:
        text = limits.decode_utf8(limits.read_bounded(p, "SUITE_MAX_FILE_BYTES"), field="")
    except InvalidInput as exc:  # too large (from its size, before reading it), or not UTF-8
        raise SuiteError(str(p), None, "; ".join(str(problem) for problem in exc.problems)) from None
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
