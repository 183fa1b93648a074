"""What the benchmarks share: the fake LLM in a process of its own, CPU of a process tree, and
figures as the median and spread of several repeats."""

import os
import statistics
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


class FakeLLM:
    """The loopback LLM server (evaluation/providers/loopback.py) in its own process, so its CPU is
    neither counted as the harness's nor competes with it for the interpreter."""

    def __init__(self, process: subprocess.Popen, url: str):
        self.process, self.url, self.pid = process, url, process.pid

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_url(self) -> str:
        return self.url

    def count(self) -> int:
        """Calls served so far."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("count\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())


@contextmanager
def fake_llm(latency: float) -> Iterator[FakeLLM]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "fake_llm.py"), "--latency", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("http://"):
            raise RuntimeError(f"the fake LLM did not start: {line!r}")
        yield FakeLLM(process, line)
    finally:
        if process.stdin is not None:
            process.stdin.close()  # it stops when its stdin closes
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def tree_cpu(root: int | None = None, *, exclude: Iterable[int] = ()) -> float:
    """CPU seconds (user + system) of a process and every descendant still alive, minus `exclude`
    (and their descendants). Measure around work whose processes outlive it (servers, workers)."""
    skip = set(exclude)
    top = psutil.Process(root or os.getpid())
    total = 0.0
    for process in [top, *top.children(recursive=True)]:
        if process.pid in skip or any(p.pid in skip for p in _parents(process)):
            continue
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _parents(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.parents()
    except psutil.NoSuchProcess:
        return []


def processes_cpu(pids: Iterable[int]) -> float:
    """CPU seconds of these processes and their descendants (e.g. a qcluster and its forked workers)."""
    return sum(tree_cpu(pid) for pid in pids)


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """'median (min-max, n=N)' of several repeats."""
    body = fmt.format(statistics.median(values))
    if len(values) > 1:
        body += f" ({fmt.format(min(values))}-{fmt.format(max(values))}, n={len(values)})"
    return body


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"
