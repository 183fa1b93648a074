"""A fault drill: the infrastructure fails under a batch of runs, and the drill checks what an operator
would: every run reaches a final state within the limit, the API never answers 5xx (503 allowed), and
no message of a conversation is lost or stored twice.

It starts everything itself, as bench/scale_out.py does: a throwaway PostgreSQL cluster, a
redis-server (django-q2's broker and the channel layer), the fake LLM with --latency per call, one
uvicorn web process (the API and the reference tutor) and two `manage.py qcluster` processes of
--workers each, with EVAL_RUN_STALE_AFTER set to --stale-after. Then, for each fault in turn, it starts
--runs tutoring runs through the API, waits until each is past its second turn, and:

    postgres-restart  pg_ctl restart -m fast of the cluster
    redis-restart     redis-server stopped and started again on its port, empty
    worker-kill       SIGKILL of the qcluster worker process running one of the runs
    web-kill          SIGKILL of the web process, started again on its port --web-down s later

While it happens and until the runs end, a poller reads `GET /api/evaluation/runs` and every run's
`/status` with a staff token and counts the answers: 503 (allowed, the documented answer while a
dependency is down), other 5xx (not allowed), and no answer (the web process is down). Runs that end
`interrupted` or `failed` are retried through the API and followed to their end. Per fault it prints
the runs affected (active when the fault began), how each ended and how the retried ones ended, the
time from the fault to the last final state, the answers counted, and the messages lost: for every
attempt of every affected run, the stored conversation against what the run reports (its `turn`): a
message stored twice or missing, one out of turn, or student turns that are not 1..`turn`. A fault
is survived when every affected run was final within EVAL_RUN_STALE_AFTER + 30 s of the fault, with
no unexpected 5xx and no message lost; the last line is `faults survived K/N`, and the exit status
is 1 unless all were.

    python bench/faults.py [--runs 4] [--turns 20] [--latency 0.2] [--stale-after 20] [--workers 2]
                           [--web-down 2] [--faults postgres-restart,redis-restart,worker-kill,web-kill]
"""

import argparse
import os
import signal
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

FAULTS = ("postgres-restart", "redis-restart", "worker-kill", "web-kill")

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


@dataclass
class Drill:
    api: Api
    web: WebServer
    redis: RedisServer
    database_url: str
    clusters: list[subprocess.Popen]
    args: argparse.Namespace

    @property
    def limit(self) -> float:
        return self.args.stale_after + 30

    def inflict(self, fault: str, active: dict[str, dict]) -> str:
        """Do it; what was done, in words."""
        if fault == "postgres-restart":
            return f"pg_ctl restart -m fast took {postgres_restart(self.database_url):.1f} s"
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

    def run(self, fault: str, seed: int) -> bool:
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
            return False
        since = time.monotonic()
        with Poller(self.api, list(active), since) as poller:
            done = self.inflict(fault, active)
            deadline = since + self.limit + 60  # past the limit, to say how late a late run was
            while not poller.all_final() and time.monotonic() < deadline:
                time.sleep(0.25)
        ended = statuses(self.api, list(active))
        endings = Counter(s["run_status"] for s in ended.values())
        slowest = max(poller.final_at.values(), default=0.0)
        late = [r for r in active if poller.final_at.get(r, float("inf")) > self.limit]
        interrupted = [r for r, s in ended.items() if s["run_status"] in ("interrupted", "failed")]
        for run_id in interrupted:
            self.api.until_ok("POST", f"/api/evaluation/runs/{run_id}/retry")
        retried = wait_until(self.api, interrupted, lambda s: s["run_status"] in FINAL_STATUSES, timeout=180)
        lost = {
            r: messages_lost(self.database_url, r, s["attempt"], s["turn"]) for r, s in {**ended, **retried}.items()
        }
        lost = {r: p for r, p in lost.items() if p}
        survived = not late and not poller.unexpected and not lost
        print(f"{fault}: {done}")
        print(f"  runs affected {len(active)} of {len(run_ids)}; ended {dict(sorted(endings.items()))}", end="")
        retry_endings = Counter(s["run_status"] for s in retried.values())
        print(f"; the failed and interrupted ones after a retry {dict(retry_endings)}" if retried else "")
        print(
            f"  time to a final state {slowest:.1f} s (limit {self.limit:.0f} s)"
            + (f"; not final within it: {', '.join(late)}" if late else "")
        )
        answers = poller.answers
        print(
            f"  API answers while polling: {answers['2xx']} x 2xx, {answers['503']} x 503 (allowed), "
            f"{answers['5xx']} x other 5xx, {answers['no answer']} unanswered"
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
        return survived


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
        clusters = []
        for i in range(args.clusters):
            clusters.append(qcluster({**env, "EVAL_SERVER_URL": web.url}, folder / f"q{i}.log"))
            stack.callback(stop_group, clusters[-1])
        print(
            f"{args.runs} runs per fault x {args.turns} turns, LLM calls {args.latency * 1000:.0f} ms; "
            f"{args.clusters} qclusters x {args.workers} workers; EVAL_RUN_STALE_AFTER {args.stale_after:.0f} s, "
            f"limit {args.stale_after + 30:.0f} s; {load_average()}; logs in {folder}",
            flush=True,
        )
        wait_for_clusters(args.clusters, args.workers)
        drill = Drill(Api(web.url, token), web, redis, database_url, clusters, args)
        for i, fault in enumerate(faults):
            survived += drill.run(fault, seed=100 * (i + 1))
    print(f"faults survived {survived}/{len(faults)}")
    sys.exit(0 if survived == len(faults) else 1)


if __name__ == "__main__":
    main()
