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
DEFAULT_PATH = Path("build") / "eval_cache.jsonl"


def fingerprint(
    suite: EvalSuite, case: EvalCase, subject: Subject, *, agent_model: str, judge_model: str, judge: bool
) -> str:
    payload = {
        "harness": HARNESS_VERSION,
        "case": {
            "name": case.name,
            "prompt": case.prompt,
            "expect": case.expect,
            "system": suite.frontmatter.get("system"),
        },
        "agent_model": agent_model,
        "judge_model": judge_model if judge else None,
        "sources": dict(sorted(subject.sources.items())),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class PassCache(Protocol):
    def is_pass(self, key: str) -> bool: ...

    def record_pass(self, key: str, *, case: str, suite: str) -> None: ...


class FileCache:
    """Passes in a JSON-lines file (one pass a line, appended), ephemeral under build/ by default,
    or at a path you commit or restore in CI to share skips. Delete it to force a full re-run."""

    def __init__(self, path: str | Path = DEFAULT_PATH):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.entries: dict[str, dict[str, str]] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                entry = json.loads(line)
                self.entries[entry["fingerprint"]] = entry
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a torn last line from an interrupted run costs one re-run, nothing more

    def is_pass(self, key: str) -> bool:
        return key in self.entries

    def record_pass(self, key: str, *, case: str, suite: str) -> None:
        entry = {"fingerprint": key, "case": case, "suite": suite, "passed_at": datetime.now(UTC).isoformat()}
        with self._lock:
            self.entries[key] = entry
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
