"""What the benchmarks share: the fake LLM in a process of its own, CPU of a process tree, and
figures as the median and spread of several repeats."""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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


def postgres_restart(url: str, mode: str = "fast") -> float:
    """`pg_ctl restart -m <mode>` of the cluster behind `url` (its options are kept: pg_ctl reads them
    back from postmaster.opts), waiting until it accepts connections again; the seconds it took."""
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        data_dir = conn.execute("SHOW data_directory").fetchone()[0]
    pgbin = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    started = time.monotonic()
    log = str(Path(data_dir).parent / "log")  # the log it started with; else the server would write to our pipe
    subprocess.run(
        [*as_postgres, str(pgbin / "pg_ctl"), "-D", data_dir, "-l", log, "-m", mode, "-w", "restart"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.monotonic() - started


class RedisServer:
    """A redis-server without persistence on a port of its own, which can be restarted on that port
    (what it held is gone, as after a crash of a cache-only Redis)."""

    def __init__(self, folder: Path):
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")],
        )
        import redis

        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"redis-server did not start; its log: {self.folder / 'redis.log'}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def restart(self, down: float = 0.0) -> None:
        self.stop()
        time.sleep(down)
        self.start()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


@contextmanager
def redis_process(folder: Path) -> Iterator[RedisServer]:
    server = RedisServer(folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class WebServer:
    """One uvicorn process of the app on a port of its own, which can be SIGKILLed and started again
    on that port (the workers' EVAL_SERVER_URL stays right)."""

    def __init__(self, env: dict[str, str], log: Path):
        self.env, self.log, self.port = env, log, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> None:
        from evaluation.tutoring.client import health_ok

        (command,), _ = _web_commands("uvicorn", 1, self.port)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env={**os.environ, **self.env}, stdout=out, stderr=out, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while not health_ok(self.url, timeout=1.0):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"uvicorn did not start; its log: {self.log}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: no shutdown, no goodbye to open connections."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)


@contextmanager
def web_server(env: dict[str, str], log: Path) -> Iterator[WebServer]:
    server = WebServer(env, log)
    server.start()
    try:
        yield server
    finally:
        server.stop()


FINAL_STATUSES = ("completed", "failed", "interrupted", "cancelled")


class Api:
    """The API as a client sees it, with a staff token: (status code or None when nothing answered, body)."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url, token

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 5.0) -> tuple[int | None, dict]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, _json(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (OSError, urllib.error.URLError):
            return None, {}

    def until_ok(self, method: str, path: str, body: dict | None = None, timeout: float = 60) -> dict:
        """The answer of the first 2xx within `timeout` (a 503 or no answer is tried again)."""
        deadline = time.monotonic() + timeout
        while True:
            code, answer = self.call(method, path, body)
            if code is not None and 200 <= code < 300:
                return answer
            if (code is not None and code != 503) or time.monotonic() > deadline:
                sys.exit(f"{method} {path} answered {code}: {answer}")
            time.sleep(0.5)


def _json(raw: bytes) -> dict:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"body": raw[:300].decode(errors="replace")}
    return value if isinstance(value, dict) else {"body": value}


@dataclass
class Poller:
    """Polls the run list and each run's status from its own thread; counts the answers and notes when
    each run was first seen in a final state."""

    api: Api
    run_ids: list[str]
    since: float
    answers: Counter = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    final_at: dict[str, float] = field(default_factory=dict)
    seen: dict[str, dict] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def count(self, path: str, code: int | None, body: dict) -> None:
        if code is None:
            self.answers["no answer"] += 1
        elif code == 503:
            self.answers["503"] += 1
        elif code >= 500:
            self.answers["5xx"] += 1
            self.unexpected.append(f"{path} -> {code} {json.dumps(body)[:200]}")
        else:
            self.answers[f"{code // 100}xx"] += 1

    def loop(self) -> None:
        while not self.stop.is_set():
            code, body = self.api.call("GET", "/api/evaluation/runs")
            self.count("/api/evaluation/runs", code, body)
            for run_id in self.run_ids:
                path = f"/api/evaluation/runs/{run_id}/status"
                code, body = self.api.call("GET", path)
                self.count(path, code, body)
                if code == 200:
                    self.seen[run_id] = body
                    if body["run_status"] in FINAL_STATUSES and run_id not in self.final_at:
                        self.final_at[run_id] = time.monotonic() - self.since
            self.stop.wait(0.25)

    def all_final(self) -> bool:
        return all(r in self.final_at for r in self.run_ids)

    def __enter__(self) -> "Poller":
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def conversation_problems(
    rows: list[tuple[int, int, str, int | None]], *, attempts: int, reported_turn: int
) -> list[str]:
    """What is wrong with a tutoring run's stored conversation against what the run reports, attempt
    by attempt; no problem: an empty list. `rows` are its messages as (attempt, place, role, student
    turn): a message's place in the conversation (1: the tutor's opening, then a student message and
    the tutor's reply to it, and so on), and a student message's own turn number (the simulator's turn
    decision; None for the tutor). The run's `turn` is its last attempt's last student turn stored.
    Wrong: a place stored twice or missing, a message out of turn, student turns that are not 1..N,
    or a last attempt whose N is not the turn the run reports."""
    problems = []
    for attempt in range(1, attempts + 1):
        mine = [row for row in rows if row[0] == attempt]
        places = [place for _, place, _, _ in mine]
        doubled = sorted(k for k, n in Counter(places).items() if n > 1)
        if doubled:
            problems.append(f"attempt {attempt}: places stored twice {doubled}")
        elif places != list(range(1, len(mine) + 1)):
            missing = sorted(set(range(1, max(places) + 1)) - set(places))
            problems.append(f"attempt {attempt}: places missing {missing}")
        out_of_turn = [place for _, place, role, _ in mine if role != ("tutor" if place % 2 else "student")]
        if out_of_turn:
            problems.append(f"attempt {attempt}: a message out of turn at {out_of_turn}")
        student = [turn for _, _, role, turn in mine if role == "student"]
        last = reported_turn if attempt == attempts else len(student)
        if student != list(range(1, last + 1)):
            problems.append(f"attempt {attempt}: student turns {student} against turn {last} reported")
    return problems
