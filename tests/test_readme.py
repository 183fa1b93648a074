"""The README runs: its shell blocks, command by command in the order written, on a fresh data folder (the
embedded default: SQLite, the offline provider, no key), each ending with the exit status the README gives it.

What the README says beside a command decides how it is run (a trailing comment, or a comment line that
applies to the whole block):
- "needs OPENAI_API_KEY" / "needs ANTHROPIC_API_KEY": skipped, with that reason (no key here);
- "second terminal": skipped (a server or worker that runs until stopped);
- "not run by tests/test_readme.py: <why>": skipped, for that reason;
- "exits N": must exit N (an example that fails by design says so, and why, beside it);
- anything else must exit 0.

It runs once, on the SQLite pass of CI (its data folder is its own), and reports what it ran and skipped.
"""

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="the README's commands run on a data folder of their own: once, on the SQLite pass",
)


@dataclass(frozen=True)
class Command:
    line: int
    text: str
    skip: str = ""
    """Why it is not run ("" when it is)."""
    status: int = 0
    """The exit status the README gives it."""


def trailing_comment(command: str) -> str:
    """The comment after the last line's command (a # after a space, outside quotes), "" when none."""
    last = command.splitlines()[-1]
    quote = ""
    for i, ch in enumerate(last):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or last[i - 1] == " "):
            return last[i + 1 :].strip()
    return ""


def marks(comment: str) -> tuple[str, int]:
    """(why it is skipped, its exit status) from what the README says beside it."""
    key = re.search(r"needs ((?:OPENAI|ANTHROPIC)_API_KEY)", comment)
    if key:
        return f"needs {key.group(1)}", 0
    if "second terminal" in comment:
        return "runs until stopped, in a second terminal", 0
    told = re.search(r"not run by tests/test_readme\.py: (.*?)\)?$", comment)
    if told:
        return told.group(1).strip(), 0
    exits = re.search(r"\bexits (\d+)", comment)
    return "", int(exits.group(1)) if exits else 0


def readme_commands(text: str) -> list[Command]:
    """Each command of each ```bash block, continuation lines joined, in order."""
    commands: list[Command] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```bash":
            i += 1
            continue
        i += 1
        block_note = ""
        while i < len(lines) and lines[i].strip() != "```":
            start, command = i + 1, lines[i]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
            i += 1
            if not command.strip():
                continue
            if command.lstrip().startswith("#"):
                block_note = command.lstrip("# ").strip() if marks(command)[0] else block_note
                continue
            skip, status = marks(trailing_comment(command))
            if not skip and block_note:
                skip = marks(block_note)[0]
            commands.append(Command(start, command, skip, status))
        i += 1
    return commands


def test_the_readme_marks_are_read_as_written():
    found = readme_commands(
        "```bash\na --x   # needs OPENAI_API_KEY\nb \\\n  --y  # exits 1: two cases fail\nc '#' d\n```\n"
        "```bash\n# in a second terminal\ne\n```\n"
    )
    assert found == [
        Command(2, "a --x   # needs OPENAI_API_KEY", "needs OPENAI_API_KEY"),
        Command(3, "b \\\n  --y  # exits 1: two cases fail", "", 1),
        Command(5, "c '#' d"),
        Command(9, "e", "runs until stopped, in a second terminal"),
    ]


def test_every_command_of_the_readme_exits_as_the_readme_says(tmp_path):
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert len(commands) > 20, commands
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "EVAL_", "DJANGO_"))}
    env.update({"EVAL_DATA_DIR": str(tmp_path / "data"), "PYTHONDONTWRITEBYTECODE": "1"})
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    ran, skipped, wrong = [], [], []
    began = time.monotonic()
    for command in commands:
        if command.skip:
            skipped.append(f"README.md:{command.line} {command.text.splitlines()[0][:70]}  [{command.skip}]")
            continue
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-ec", command.text],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        ran.append(f"README.md:{command.line} exit {done.returncode} in {time.monotonic() - started:.0f} s")
        if done.returncode != command.status:
            wrong.append(
                f"README.md:{command.line} `{command.text}` exited {done.returncode}, the README says "
                f"{command.status}:\n{(done.stdout + done.stderr)[-1500:]}"
            )
    print(f"\nREADME: {len(ran)} commands run, {len(skipped)} skipped, in {time.monotonic() - began:.0f} s")
    print("\n".join(ran + ["skipped:"] + skipped))
    assert wrong == [], "\n\n".join(wrong)
