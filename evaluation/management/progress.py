"""The CLI's progress display for runs: one bar per run on a terminal, one line per finished run elsewhere."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import IO, Any

from django.core.management.base import OutputWrapper
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from evaluation.models.runs import ACTIVE_STATUSES


class RunProgress:
    """A listener for `runs_execute_here`: rich bars (turns and stage) on a terminal, quiet otherwise.

    Not on a terminal (a log, a pipe, CI) it prints one line as each run ends instead of a line per turn.
    """

    def __init__(self, stream: IO[str] | OutputWrapper, labels: dict[str, str]):
        # Django's OutputWrapper ends every write with a newline, which would break the bars' cursor moves.
        out: Any = stream
        while isinstance(out, OutputWrapper):
            out = out._out
        self.console = Console(file=out, highlight=False)
        self.live = self.console.is_terminal
        self.labels = labels
        self.lock = threading.Lock()
        self.tasks: dict[str, TaskID] = {}
        self.ended: set[str] = set()
        self.progress = Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("turns"),
            TextColumn("[cyan]{task.fields[stage]:<19}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.live,
            transient=False,
        )

    def __enter__(self) -> RunProgress:
        if self.live:
            for run_id, label in self.labels.items():
                self.tasks[run_id] = self.progress.add_task(label, total=None, stage="queued")
            self.progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.stop()

    def __call__(self, status: dict[str, Any]) -> None:
        run_id = status["run_id"]
        ended = status["run_status"] not in ACTIVE_STATUSES  # its bar stops moving
        if not self.live:
            with self.lock:
                if ended and run_id not in self.ended:
                    self.ended.add(run_id)
                    reason = f": {status['error']}" if status.get("error") else ""
                    label = self.labels.get(run_id, run_id)
                    self.console.print(f"  {label:<24} {status['run_status']} after {status['turn']} turns{reason}")
            return
        task = self.tasks.get(run_id)
        if task is None:
            return
        stage = status["run_status"] if ended else status["status"]
        total = status["turn"] if ended and status["turn"] else status["max_turns"] or None
        self.progress.update(task, completed=status["turn"], total=total, stage=stage)
