"""The scope-fingerprint cache: a case whose fingerprint matches a recorded pass is skipped.

The fingerprint covers the case text (name, prompt, rubric, system), the agent and judge models,
whether the judge runs, the source of every skill, tool and agent file under test, the anchored
module's source, and HARNESS_VERSION (bumped when scoring changes). Failures are never recorded.
"""

import hashlib
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from evaluation.suites.parser import EvalCase, EvalSuite
from evaluation.suites.subjects import Subject

HARNESS_VERSION = "evalmd-1"
DEFAULT_PATH = Path("build") / "eval_cache.json"


def fingerprint(suite: EvalSuite, case: EvalCase, subject: Subject, *, agent_model: str, judge_model: str, judge: bool) -> str:
    payload = {
        "harness": HARNESS_VERSION,
        "case": {"name": case.name, "prompt": case.prompt, "expect": case.expect, "system": suite.frontmatter.get("system")},
        "agent_model": agent_model,
        "judge_model": judge_model if judge else None,
        "sources": dict(sorted(subject.sources.items())),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class PassCache(Protocol):
    def is_pass(self, key: str) -> bool: ...

    def record_pass(self, key: str, *, case: str, suite: str) -> None: ...


class FileCache:
    """A JSON file of passes; ephemeral under build/ by default, or a path you commit to share with CI."""

    def __init__(self, path: str | Path = DEFAULT_PATH):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.entries: dict[str, dict[str, str]] = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            self.entries = {}

    def is_pass(self, key: str) -> bool:
        return key in self.entries

    def record_pass(self, key: str, *, case: str, suite: str) -> None:
        with self._lock:
            self.entries[key] = {"case": case, "suite": suite, "passed_at": datetime.now(UTC).isoformat()}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True))
            tmp.replace(self.path)
