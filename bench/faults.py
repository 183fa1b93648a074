"""A fault drill: the infrastructure fails under a batch of runs, and the drill checks what an operator
would: every run reaches a final state within the limit, the API never answers 5xx (503 allowed), and
no message of a conversation is lost or stored twice.

It starts everything itself, as bench/scale_out.py does: a throwaway PostgreSQL cluster, a
redis-server (django-q2's broker and the channel layer), the fake LLM with --latency per call, one
uvicorn web process (the API and the reference tutor) and two `manage.py qcluster` processes of
--workers each, with EVAL_RUN_STALE_AFTER set to --stale-after. Then, for each fault in turn, it starts
--runs tutoring runs through the API, waits until each is past its second turn, and:

    postgres-restart  pg_ctl restart -m fast of the cluster
    postgres-stop-15  pg_ctl stop -m fast, started again 15 s later
    postgres-stop-60  the same, 60 s
    redis-restart     redis-server stopped and started again on its port, empty
    redis-stop-60     redis-server stopped, started again (empty) 60 s later
    worker-kill       SIGKILL of the qcluster worker process running one of the runs
    web-kill          SIGKILL of the web process, started again on its port --web-down s later
    qcluster-group-sigterm  SIGTERM to the whole process group of the qcluster running one of the runs
                      (systemd's stop), a new qcluster started in its place once it is gone
    cli-sigint        a `manage.py run_evaluation --persona all` batch (its own runs and tutor server,
                      not the API's) interrupted by SIGINT to its process group (Ctrl-C) past its
                      first turns
    cli-sigterm       the same batch, SIGTERM to the command's process (kill, systemd's KillMode=mixed)

While it happens and until the runs end, a poller reads `GET /api/evaluation/runs` and every run's
`/status` with a staff token and counts the answers: 503 (allowed, the documented answer while a
dependency is down), other 5xx (not allowed), and no answer within 5 s (the web process is down, or a
request waited too long); it notes the slowest answer while the fault lasted. Runs that end
`interrupted` or `failed` are retried through the API and followed to their end. Per fault it prints
the runs affected (active when the fault began), how each ended and how the retried ones ended, the
time from the fault to the last final state, the answers counted, and the messages lost: for every
attempt of every affected run, the stored conversation against what the run reports (its `turn`): a
message stored twice or missing, one out of turn, or student turns that are not 1..`turn`. A fault
is survived when every affected run was final within EVAL_RUN_STALE_AFTER + 30 s of the fault's end
(the dependency back), no run ended `completed` with fewer turns than it planned, with no unexpected
5xx, no message lost, and (the CLI faults) no run of the batch queued or running and no tutor server of
it left 5 s after the signal. It ends with a table of every fault and the line `faults survived K/N`;
the exit status is 1 unless all were.

    python bench/faults.py [--runs 4] [--turns 20] [--latency 0.2] [--stale-after 20] [--workers 2]
                           [--web-down 2] [--faults postgres-restart,...,cli-sigterm]
"""

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
from _django import ROOT
from _harness import (
    FINAL_STATUSES,
    Api,
    Poller,
    RedisServer,
    WebServer,
    conversation_problems,
    fake_llm,
    load_average,
    postgres_cluster,
    postgres_restart,
    redis_process,
    web_server,
)

FAULTS = (
    "postgres-restart",
    "postgres-stop-15",
    "postgres-stop-60",
    "redis-restart",
    "redis-stop-60",
    "worker-kill",
    "web-kill",
    "qcluster-group-sigterm",
    "cli-sigint",
    "cli-sigterm",
)
CLI_FAULTS = ("cli-sigint", "cli-sigterm")

PERSONAS = ("ace", "average_student", "struggler", "quiet_one")


def statuses(api: Api, run_ids: list[str]) -> dict[str, dict]:
    return {run_id: api.until_ok("GET", f"/api/evaluation/runs/{run_id}/status") for run_id in run_ids}


def wait_until(api: Api, run_ids: list[str], done: Callable[[dict], bool], timeout: float) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        now = statuses(api, run_ids)
        if all(done(s) for s in now.values()) or time.monotonic() > deadline:
            return now
        time.sleep(0.25)


def database(url: str) -> "psycopg.Connection":
    """A connection of the drill's own, apart from the app's pools: what it reads does not depend on
    how the app copes with the fault."""
    import psycopg

    return psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True)


def messages_lost(database_url: str, run_id: str, attempts: int, reported_turn: int) -> list[str]:
    """What is wrong with the run's stored conversation, attempt by attempt, against what it reports."""
    with database(database_url) as conn:
        rows = conn.execute(
            "SELECT m.attempt, m.turn, m.role, (m.metadata->'turn_decision'->>'turn')::int "
            "FROM evaluation_runmessage m JOIN evaluation_evaluationrun r ON r.id = m.run_id "
            "WHERE r.run_id = %s ORDER BY m.attempt, m.turn, m.id",
            [run_id],
        ).fetchall()
    return conversation_problems(rows, attempts=attempts, reported_turn=reported_turn)


def start_batch(api: Api, runs: int, turns: int, provider: str, seed: int) -> list[str]:
    ids = []
    for i in range(runs):
        body = {
            "topic_id": "comparing-decimals",
            "persona_file": PERSONAS[i % len(PERSONAS)],
            "max_turns": turns,
            "seed": seed + i,
            "provider": provider,
        }
        ids.append(api.until_ok("POST", "/api/evaluation/start", body)["run_id"])
    return ids


class TimedApi(Api):
    """The API, noting the slowest answer (or wait for none) since `reset`."""

    def __init__(self, url: str, token: str):
        super().__init__(url, token)
        self.slowest = 0.0

    def reset(self) -> None:
        self.slowest = 0.0

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 5.0) -> tuple[int | None, dict]:
        started = time.monotonic()
        try:
            return super().call(method, path, body, timeout)
        finally:
            self.slowest = max(self.slowest, time.monotonic() - started)


def postgres_stop(url: str, down: float) -> str:
    """pg_ctl stop -m fast, `down` seconds, pg_ctl start with the options it ran with (postmaster.opts)."""
    with database(url) as conn:
        data_dir = conn.execute("SHOW data_directory").fetchone()[0]
    pgbin = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    words = shlex.split(Path(data_dir, "postmaster.opts").read_text())[1:]
    options = [w for i, w in enumerate(words) if w != "-D" and (i == 0 or words[i - 1] != "-D")]
    log = str(Path(data_dir).parent / "log")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "check": True}
    pg_ctl = [*as_postgres, str(pgbin / "pg_ctl"), "-D", data_dir, "-l", log]
    subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], **quiet)
    time.sleep(down)
    subprocess.run([*pg_ctl, "-o", shlex.join(options), "-w", "start"], **quiet)
    return f"pg_ctl stop -m fast, started again {down:.0f} s later"


def group_alive(pgid: int) -> list[int]:
    """Processes of the group that have not ended."""
    alive = []
    for process in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return alive


@dataclass
class Outcome:
    """One fault's row of the closing table."""

    fault: str
    affected: int = 0
    ended: str = ""
    final_in: str = ""
    answers: str = ""
    slowest: str = ""
    lost: int = 0
    survived: bool = False

    def row(self) -> str:
        cells = [self.fault, str(self.affected), self.ended, self.final_in, self.answers, self.slowest, str(self.lost)]
        return "| " + " | ".join(cells) + f" | {'yes' if self.survived else 'NO'} |"


@dataclass
class Drill:
    api: Api
    web: WebServer
    redis: RedisServer
    database_url: str
    clusters: list[subprocess.Popen]
    args: argparse.Namespace
    start_cluster: Callable[[], subprocess.Popen]
    env: dict[str, str]
    folder: Path

    @property
    def limit(self) -> float:
        return self.args.stale_after + 30

    def inflict(self, fault: str, active: dict[str, dict]) -> str:
        """Do it; what was done, in words."""
        if fault == "postgres-restart":
            return f"pg_ctl restart -m fast took {postgres_restart(self.database_url):.1f} s"
        if fault.startswith("postgres-stop-"):
            return postgres_stop(self.database_url, float(fault.rpartition("-")[2]))
        if fault == "redis-stop-60":
            self.redis.restart(down=60)
            return "redis-server stopped (SIGTERM), started again (empty) 60 s later"
        if fault == "qcluster-group-sigterm":
            return self.cluster_group_sigterm(active)
        if fault == "redis-restart":
            self.redis.restart()
            return "redis-server stopped (SIGTERM) and started again, empty"
        if fault == "worker-kill":
            ours = {p.pid for c in self.clusters for p in psutil.Process(c.pid).children(recursive=True)}
            running = [s for s in active.values() if s["run_status"] == "running"]
            for status in running:
                with database(self.database_url) as conn:
                    worker = conn.execute(
                        "SELECT worker FROM evaluation_evaluationrun WHERE run_id = %s", [status["run_id"]]
                    ).fetchone()[0]
                pid = int(worker.rsplit(":", 1)[-1]) if worker else 0
                if pid in ours:
                    os.kill(pid, signal.SIGKILL)
                    return f"SIGKILL of worker {pid}, which ran {status['run_id']}"
            return "no worker of ours was running a run: nothing killed"
        if fault == "web-kill":
            self.web.kill()
            time.sleep(self.args.web_down)
            self.web.start()
            return f"web process SIGKILLed, started again {self.args.web_down:.0f} s later"
        raise ValueError(fault)

    def worker_of(self, run_id: str) -> int:
        with database(self.database_url) as conn:
            worker = conn.execute("SELECT worker FROM evaluation_evaluationrun WHERE run_id = %s", [run_id]).fetchone()[
                0
            ]
        return int(worker.rsplit(":", 1)[-1]) if worker else 0

    def cluster_group_sigterm(self, active: dict[str, dict]) -> str:
        for status in active.values():
            if status["run_status"] != "running":
                continue
            pid = self.worker_of(status["run_id"])
            for i, cluster in enumerate(self.clusters):
                if pid and pid in {p.pid for p in psutil.Process(cluster.pid).children(recursive=True)}:
                    sent = time.monotonic()
                    os.killpg(cluster.pid, signal.SIGTERM)
                    while group_alive(cluster.pid) and time.monotonic() - sent < 120:
                        time.sleep(0.1)
                    took = time.monotonic() - sent
                    left = group_alive(cluster.pid)
                    cluster.wait(5)
                    self.clusters[i] = self.start_cluster()
                    gone = f"gone in {took:.1f} s" if not left else f"NOT gone after {took:.0f} s: {left}"
                    return f"SIGTERM to the process group of the qcluster running {status['run_id']}: {gone}; a new one started"
        return "no qcluster of ours was running a run: nothing stopped"

    def run(self, fault: str, seed: int) -> Outcome:
        if fault in CLI_FAULTS:
            return self.run_cli(fault, seed)
        return self.run_api(fault, seed)

    def run_api(self, fault: str, seed: int) -> Outcome:
        args = self.args
        run_ids = start_batch(self.api, args.runs, args.turns, args.provider, seed)
        before = wait_until(
            self.api, run_ids, lambda s: s["run_status"] in FINAL_STATUSES or s["turn"] >= 2, timeout=120
        )
        active = {r: s for r, s in before.items() if s["run_status"] in ("queued", "running")}
        if not active:  # nothing to hit: the drill says so rather than count it survived
            errors = sorted({(s["error"] or "")[:200] for s in before.values() if s["error"]})
            print(
                f"{fault}: not done, no run was active to hit; they ended {dict(Counter(s['run_status'] for s in before.values()))}"
            )
            for error in errors[:3]:
                print(f"    {error}")
            print("  NOT survived (not exercised)", flush=True)
            return Outcome(fault, ended="not exercised")
        since = time.monotonic()
        self.api.reset()
        with Poller(self.api, list(active), since) as poller:
            done = self.inflict(fault, active)
            fault_lasted = time.monotonic() - since
            slowest_answer = self.api.slowest
            during = Counter(poller.answers)
            deadline = time.monotonic() + self.limit + 60  # past the limit, to say how late a late run was
            while not poller.all_final() and time.monotonic() < deadline:
                time.sleep(0.25)
        ended = statuses(self.api, list(active))
        endings = Counter(s["run_status"] for s in ended.values())
        slowest = max(poller.final_at.values(), default=0.0)
        late = [r for r in active if poller.final_at.get(r, float("inf")) > fault_lasted + self.limit]
        short = [r for r, s in ended.items() if s["run_status"] == "completed" and s["turn"] < args.turns]
        interrupted = [r for r, s in ended.items() if s["run_status"] in ("interrupted", "failed")]
        for run_id in interrupted:
            self.api.until_ok("POST", f"/api/evaluation/runs/{run_id}/retry")
        retried = wait_until(self.api, interrupted, lambda s: s["run_status"] in FINAL_STATUSES, timeout=180)
        lost = {
            r: messages_lost(self.database_url, r, s["attempt"], s["turn"]) for r, s in {**ended, **retried}.items()
        }
        lost = {r: p for r, p in lost.items() if p}
        survived = not late and not short and not poller.unexpected and not lost
        print(f"{fault}: {done}")
        print(f"  runs affected {len(active)} of {len(run_ids)}; ended {dict(sorted(endings.items()))}", end="")
        retry_endings = Counter(s["run_status"] for s in retried.values())
        print(f"; the failed and interrupted ones after a retry {dict(retry_endings)}" if retried else "")
        print(
            f"  time to a final state {slowest:.1f} s after the fault began, which lasted {fault_lasted:.1f} s "
            f"(limit: its end + {self.limit:.0f} s)" + (f"; not final within it: {', '.join(late)}" if late else "")
        )
        if short:
            print(f"  completed with fewer turns than planned ({args.turns}): {', '.join(short)}")
        answers = poller.answers
        print(
            f"  API answers while polling: {answers['2xx']} x 2xx, {answers['503']} x 503 (allowed), "
            f"{answers['5xx']} x other 5xx, {answers['no answer']} unanswered; during the fault "
            f"{during['2xx']}/{during['503']}/{during['5xx']}/{during['no answer']}, the slowest answer {slowest_answer:.2f} s"
        )
        for line in poller.unexpected[:5]:
            print(f"    {line}")
        for run_id, status in ended.items():
            if status["run_status"] in ("failed", "interrupted"):
                print(f"    {run_id} {status['run_status']}: {(status['error'] or '')[:160]}")
        print(f"  messages lost {sum(len(p) for p in lost.values())}")
        for run_id, problems in lost.items():
            print(f"    {run_id}: {'; '.join(problems)}")
        print(f"  {'survived' if survived else 'NOT survived'}", flush=True)
        retry_text = f"; retried: {dict(sorted(retry_endings.items()))}" if retried else ""
        return Outcome(
            fault,
            affected=len(active),
            ended=f"{dict(sorted(endings.items()))}{retry_text}",
            final_in=f"{slowest:.1f} s (fault {fault_lasted:.1f} s)",
            answers=f"{answers['2xx']}/{answers['503']}/{answers['5xx']}/{answers['no answer']}",
            slowest=f"{slowest_answer:.2f} s",
            lost=sum(len(p) for p in lost.values()),
            survived=survived,
        )

    def run_cli(self, fault: str, seed: int) -> Outcome:
        """A CLI batch of every persona, with its own tutor server, stopped by a signal past its first turns:
        5 s later no run of it may be queued or running and no server of it left."""
        args = self.args
        command = [sys.executable, "manage.py", "run_evaluation", "--topic-id", "comparing-decimals"]
        command += [
            "--persona",
            "all",
            "--max-turns",
            str(args.turns),
            "--seed",
            str(seed),
            "--provider",
            args.provider,
        ]
        env = {k: v for k, v in self.env.items() if k != "EVAL_SERVER_URL"}  # it starts a server of its own
        env["EVAL_MAX_ACTIVE_RUNS"] = "64"  # a CLI batch needs a free slot for each of its runs at once
        with (self.folder / f"{fault}.log").open("wb") as out:
            cli = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        me = f"{socket.gethostname()}:{cli.pid}"

        def runs() -> dict[str, tuple[str, int]]:
            with database(self.database_url) as conn:
                rows = conn.execute(
                    "SELECT run_id, status, turn FROM evaluation_evaluationrun WHERE worker = %s", [me]
                ).fetchall()
            return {run_id: (status, turn) for run_id, status, turn in rows}

        deadline = time.monotonic() + 180
        while not any(status == "running" and turn >= 2 for status, turn in runs().values()):
            if cli.poll() is not None or time.monotonic() > deadline:
                print(f"{fault}: not done, the batch did not get past its second turn; its log {out.name}")
                print("  NOT survived (not exercised)", flush=True)
                return Outcome(fault, ended="not exercised")
            time.sleep(0.2)
        before = runs()
        servers = [p for p in psutil.Process(cli.pid).children(recursive=True)]
        self.api.reset()
        since = time.monotonic()
        with Poller(self.api, list(before), since) as poller:
            if fault == "cli-sigint":
                os.killpg(cli.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
            else:
                os.kill(cli.pid, signal.SIGTERM)
            try:
                code = cli.wait(60)
            except subprocess.TimeoutExpired:
                code = None
            exited = time.monotonic() - since
            time.sleep(max(0.0, 5 - exited))
            slowest_answer = self.api.slowest
        after = runs()
        left_active = [r for r, (status, _) in after.items() if status in ("queued", "running")]
        left_servers = [p.pid for p in servers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        endings = Counter(status for status, _ in after.values())
        short = [r for r, (status, turn) in after.items() if status == "completed" and turn < args.turns]
        lost = {r: messages_lost(self.database_url, r, 1, turn) for r, (status, turn) in after.items() if turn}
        lost = {r: p for r, p in lost.items() if p}
        survived = code is not None and not left_active and not left_servers and not short and not lost
        survived = survived and not poller.unexpected
        answers = poller.answers
        signal_name = "SIGINT to its process group" if fault == "cli-sigint" else "SIGTERM to its process"
        print(f"{fault}: run_evaluation --persona all ({len(before)} runs), {signal_name}")
        print(f"  exit status {code} {exited:.1f} s after the signal; 5 s after it: {dict(sorted(endings.items()))}")
        print(f"  queued or running then: {left_active or 'none'}; its tutor server left: {left_servers or 'none'}")
        print(
            f"  API answers while polling: {answers['2xx']} x 2xx, {answers['503']} x 503, {answers['5xx']} x other 5xx, "
            f"{answers['no answer']} unanswered; the slowest answer {slowest_answer:.2f} s"
        )
        print(f"  messages lost {sum(len(p) for p in lost.values())}")
        print(f"  {'survived' if survived else 'NOT survived'}", flush=True)
        return Outcome(
            fault,
            affected=len(before),
            ended=f"{dict(sorted(endings.items()))}; exit {code}; server left: {len(left_servers)}",
            final_in=f"{exited:.1f} s",
            answers=f"{answers['2xx']}/{answers['503']}/{answers['5xx']}/{answers['no answer']}",
            slowest=f"{slowest_answer:.2f} s",
            lost=sum(len(p) for p in lost.values()),
            survived=survived,
        )


def wait_for_clusters(clusters: int, workers: int, timeout: float = 90) -> None:
    from django_q.status import Stat

    from evaluation.runs.services import broker

    deadline = time.monotonic() + timeout
    while True:
        stats = Stat.get_all(broker())
        if len(stats) >= clusters and all(len(stat.workers) >= workers for stat in stats):
            return
        if time.monotonic() > deadline:
            sys.exit(f"the qclusters did not all start within {timeout:.0f} s: {len(stats)} of {clusters} seen")
        time.sleep(0.2)


def qcluster(env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the main process (a qcluster stops its workers itself in about 2 s; SIGTERM to the whole
    group made it wait out its workers' 20 s grace), then SIGKILL to whatever of the group is left."""
    try:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(20)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4, help="runs started for each fault")
    parser.add_argument("--turns", type=int, default=20, help="max turns of each run")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds each fake LLM call takes")
    parser.add_argument("--stale-after", type=float, default=20, help="EVAL_RUN_STALE_AFTER; the limit is it + 30 s")
    parser.add_argument("--workers", type=int, default=2, help="workers per qcluster process")
    parser.add_argument("--clusters", type=int, default=2, help="qcluster processes")
    parser.add_argument("--web-down", type=float, default=2.0, help="seconds the killed web process stays down")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {', '.join(FAULTS)}")
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown or not faults:
        parser.error(f"--faults: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(FAULTS)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what was started, as on Ctrl-C
    folder = Path(tempfile.mkdtemp(prefix="eval-bench-faults."))
    survived = 0
    with ExitStack() as stack:
        database_url = stack.enter_context(postgres_cluster())
        redis = stack.enter_context(redis_process(folder))
        llm = stack.enter_context(fake_llm(args.latency))
        args.provider = f"openai/loopback@{llm.openai_url}"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis.url,
            "EVAL_DATA_DIR": str(folder),
            "EVAL_TUTOR_PROVIDER": args.provider,
            "EVAL_SIMULATOR_PROVIDER": args.provider,
            "EVAL_JUDGE_PROVIDER": args.provider,
            "EVAL_TUTOR_PROBLEMS": "40",  # sessions run to max turns instead of finishing early
            "EVAL_MAX_ACTIVE_RUNS": str(max(args.runs, args.workers * args.clusters)),
            "EVAL_Q_WORKERS": str(args.workers),
            "EVAL_RUN_STALE_AFTER": str(args.stale_after),
            "EVAL_LLM_CONCURRENCY": "64",
        }
        os.environ.update(env)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        subprocess.run([*manage, "load_catalog"], cwd=ROOT, env=env, check=True, capture_output=True)
        import django

        django.setup()
        from django.contrib.auth.models import User
        from rest_framework.authtoken.models import Token

        staff = User.objects.create_superuser("drill", "drill@example.com", "drill-password")
        token = Token.objects.create(user=staff).key
        web = stack.enter_context(web_server(env, folder / "web.log"))
        clusters: list[subprocess.Popen] = []
        started = iter(range(1000))

        def start_cluster() -> subprocess.Popen:
            cluster = qcluster({**env, "EVAL_SERVER_URL": web.url}, folder / f"q{next(started)}.log")
            stack.callback(stop_group, cluster)
            return cluster

        for _ in range(args.clusters):
            clusters.append(start_cluster())
        print(
            f"{args.runs} runs per fault x {args.turns} turns, LLM calls {args.latency * 1000:.0f} ms; "
            f"{args.clusters} qclusters x {args.workers} workers; EVAL_RUN_STALE_AFTER {args.stale_after:.0f} s, "
            f"limit {args.stale_after + 30:.0f} s; {load_average()}; logs in {folder}",
            flush=True,
        )
        wait_for_clusters(args.clusters, args.workers)
        drill = Drill(TimedApi(web.url, token), web, redis, database_url, clusters, args, start_cluster, env, folder)
        outcomes = []
        for i, fault in enumerate(faults):
            outcomes.append(drill.run(fault, seed=100 * (i + 1)))
            if fault == "qcluster-group-sigterm":
                wait_for_clusters(args.clusters, args.workers)
        survived = sum(o.survived for o in outcomes)
    print()
    print(
        "| fault | runs affected | how they ended | time to final | API 2xx/503/other 5xx/unanswered | slowest answer | messages lost | survived |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for outcome in outcomes:
        print(outcome.row())
    print(f"faults survived {survived}/{len(faults)}")
    sys.exit(0 if survived == len(faults) else 1)


if __name__ == "__main__":
    main()
