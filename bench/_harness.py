"""What the benchmarks share: the fake LLM in a process of its own, CPU of a process tree, and
figures as the median and spread of several repeats."""

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
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


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """A throwaway PostgreSQL on 127.0.0.1 (initdb as the postgres user when run as root); its URL."""
    pgbins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    if not pgbins:
        sys.exit("--postgres: no PostgreSQL binaries under /usr/lib/postgresql (apt-get install postgresql)")
    pgbin = pgbins[-1]
    folder = Path(tempfile.mkdtemp(prefix="eval-bench-pg."))
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    port = free_port()
    try:
        subprocess.run(
            [*as_postgres, str(pgbin / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres"],
            check=True,
            capture_output=True,
        )
        options = f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off -c synchronous_commit=off"
        subprocess.run(
            [*as_postgres, str(pgbin / "pg_ctl"), "-D", str(folder / "data"), "-l", str(folder / "log"), "-w"]
            + ["-o", options, "start"],
            check=True,
            capture_output=True,
        )
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE evaluation")
        yield f"postgres://postgres@127.0.0.1:{port}/evaluation"
    finally:
        subprocess.run(
            [*as_postgres, str(pgbin / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postmaster_pid(url: str) -> int:
    """The PostgreSQL server's pid (its backends are its children), from the cluster's postmaster.pid."""
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        data_dir = conn.execute("SHOW data_directory").fetchone()[0]
    return int(Path(data_dir, "postmaster.pid").read_text().split()[0])


WEB_SERVERS = ("uvicorn", "daphne")


def _web_commands(server: str, count: int, port: int) -> tuple[list[list[str]], socket.socket | None]:
    """How to start `count` processes of `server` on one port: uvicorn's own `--workers` (one socket,
    bound by its supervisor), or daphne processes sharing a socket bound here (`daphne --fd`)."""
    app = "evalproject.asgi:application"
    if server == "uvicorn":
        workers = ["--workers", str(count)] if count > 1 else []
        options = ["--no-access-log", "--log-level", "warning", "--timeout-keep-alive", "75"]
        options += ["--host", "127.0.0.1", "--port", str(port)]
        return [[sys.executable, "-m", "uvicorn", *options, *workers, app]], None
    listener = socket.create_server(("127.0.0.1", port), backlog=1024)
    listener.set_inheritable(True)
    return [[sys.executable, "-m", "daphne", "--fd", str(listener.fileno()), app]] * count, listener


@contextmanager
def web_processes(
    env: dict[str, str], count: int, log: Path, server: str = "uvicorn"
) -> Iterator[tuple[str, list[int]]]:
    """`count` web server processes on one socket (docs/scaling.md): uvicorn, the documented server,
    or daphne to compare. Their URL and the pids whose process trees they are."""
    from evaluation.tutoring.client import health_ok

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    commands, listener = _web_commands(server, count, port)
    fds = (listener.fileno(),) if listener else ()
    with log.open("wb") as out:
        processes = [
            subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, pass_fds=fds, stdout=out, stderr=out)
            for command in commands
        ]
        try:
            deadline = time.monotonic() + 60
            while not health_ok(url, timeout=1.0):
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    sys.exit(f"{server} did not start; its log: {log}")
                time.sleep(0.1)
            yield url, [p.pid for p in processes]
        finally:
            for process in processes:
                os.kill(process.pid, signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
            if listener:
                listener.close()
