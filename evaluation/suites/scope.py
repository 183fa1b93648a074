"""Where a suite may read from and what it may import: the suite folders and the tool packages.

A suite file, and every file it brings in (skills, agents, sidecars, tool files), must resolve,
symlinks followed, inside one of EVALUATION['SUITE_DIRS']; a Python module named by dotted path
(`tools:`, `skills:`, `module:`) must belong to one of EVALUATION['SUITE_TOOL_PACKAGES']. A suite
is data that staff can point the app at; importing is running code, so both are allow-lists.
"""

import os
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluation.suites.errors import SuiteError


@dataclass(frozen=True)
class SuiteScope:
    folders: tuple[Path, ...]
    """The suite folders, resolved."""
    packages: tuple[str, ...]
    """Top-level or dotted package names whose modules may be imported."""
    root: Path
    """The project root: a path a suite names is looked up beside the suite, then here."""

    @classmethod
    def from_settings(cls) -> "SuiteScope":
        """From EVALUATION (SUITE_DIRS, SUITE_TOOL_PACKAGES) and BASE_DIR; outside a Django project
        (the pytest plugin in another project), from EVAL_SUITE_DIRS and EVAL_SUITE_TOOL_PACKAGES
        relative to the working folder."""
        configured: dict[str, Any] = getattr(settings, "EVALUATION", {}) if settings.configured else {}
        if "SUITE_DIRS" in configured:
            root = Path(settings.BASE_DIR)
            folders = [Path(p) for p in configured["SUITE_DIRS"]]
            packages = [str(p) for p in configured.get("SUITE_TOOL_PACKAGES", [])]
        else:
            root = Path.cwd()
            folders = [root / p.strip() for p in os.environ.get("EVAL_SUITE_DIRS", ".").split(",") if p.strip()]
            packages = [p.strip() for p in os.environ.get("EVAL_SUITE_TOOL_PACKAGES", "").split(",") if p.strip()]
        return cls(
            folders=tuple((root / f).resolve() for f in folders),
            packages=tuple(packages),
            root=root.resolve(),
        )

    def shown_paths(self, text: str) -> str:
        """The text with every absolute path inside a suite folder or the project shown relative to it.

        A path in a suite folder inside the project reads as it does in the admin (`skills/greeter/EVAL.md`);
        in a suite folder elsewhere, from that folder's own name (`evals/greeter/EVAL.md`); anywhere else in
        the project, from the project root (`evaluation/suites/tools.py`). Nothing of the server's own
        layout above them shows.
        """
        prefixes: dict[str, str] = {}
        for folder in self.folders:
            prefixes[str(folder)] = _shown(folder, self.root) if folder.is_relative_to(self.root) else folder.name
        prefixes.setdefault(str(self.root), ".")
        for prefix in sorted(prefixes, key=len, reverse=True):
            shown = prefixes[prefix]
            pattern = re.compile(re.escape(prefix) + r"(?P<rest>/[^\s:'\")]*)?(?![\w.-])")
            text = pattern.sub(partial(_replaced, shown), text)
        return text

    def describe_folders(self) -> str:
        return ", ".join(_shown(f, self.root) for f in self.folders) or "none"

    def contains(self, path: Path) -> bool:
        resolved = path.resolve()
        return any(resolved.is_relative_to(folder) for folder in self.folders)

    def check_file(self, path: Path, *, file: str, key: str = "") -> Path:
        """The path resolved (symlinks followed) when it lies inside a suite folder, else a SuiteError
        naming the suite file, the key that named it and the setting to change."""
        resolved = path.resolve()
        if any(resolved.is_relative_to(folder) for folder in self.folders):
            return resolved
        what = f"{key}: {path}" if key else str(path)
        via = f" (it resolves to {resolved})" if resolved != path.absolute() else ""
        raise SuiteError(
            file,
            None,
            f"{what}{via} is outside the suite folders ({self.describe_folders()}); "
            "add its folder to EVALUATION['SUITE_DIRS'] (EVAL_SUITE_DIRS) to allow it",
        )

    def check_module(self, name: str, *, file: str, key: str) -> None:
        """A SuiteError unless the dotted module name belongs to an allowed package."""
        if any(name == p or name.startswith(p + ".") for p in self.packages):
            return
        allowed = ", ".join(self.packages) or "none"
        raise SuiteError(
            file,
            None,
            f"{key}: the module {name!r} is not in an allowed package (allowed: {allowed}); "
            "add its package to EVALUATION['SUITE_TOOL_PACKAGES'] (EVAL_SUITE_TOOL_PACKAGES), "
            "or name a .py file inside a suite folder",
        )


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root)) or "."
    except ValueError:
        return str(path)


def _replaced(shown: str, match: "re.Match[str]") -> str:
    return _joined(shown, match.group("rest") or "")


def _joined(shown: str, rest: str) -> str:
    rest = rest.lstrip("/")
    if not rest:
        return shown
    return rest if shown == "." else f"{shown}/{rest}"
