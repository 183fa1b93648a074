"""PostgreSQL connections per process role: one uvicorn web process and 2 qclusters x 8 workers, at
idle, while a batch of runs runs, and after the pools have had time to shrink.

It starts everything itself (as bench/scale_out.py does): a throwaway PostgreSQL cluster, a
redis-server (django-q2's broker and the channel layer), the fake LLM in a process of its own, the
web processes and the qcluster processes. Every --interval seconds it reads pg_stat_activity and
finds the process behind each client connection (its client port, through the sockets of the
processes on this machine); the qcluster processes are named by django-q2's cluster stats
(sentinel, pusher, monitor, workers; "qcluster" is the command's own process). It prints, per
role, the connections held at idle (after start-up), the peak while --conversations runs of
--turns turns ran, and the connections left --settle seconds after the batch, with the bound
`manage.py check` computes from the same environment (evaluation/checks/database.py).

    python bench/connections.py [--clusters 2] [--workers 8] [--web-processes 1] [--conversations 32]
                                [--turns 6] [--latency 0.2] [--settle 150] [--interval 0.2]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path

import psutil
from _django import ROOT
from _harness import fake_llm, load_average, postgres_cluster, web_processes
from scale_out import redis_server, service, wait_for_clusters

ROLES = ("web", "qcluster", "sentinel", "pusher", "monitor", "worker", "bench", "other")


class Sampler:
    """Connections to the evaluation database per process, from pg_stat_activity."""

    def __init__(self, database_url: str, roles: dict[int, str]):
        import psycopg

        self.conn = psycopg.connect(database_url.replace("postgres://", "postgresql://"), autocommit=True)
        self.own = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.port = int(database_url.rsplit(":", 1)[1].split("/")[0])
        self.roles = roles

    def role(self, pid: int | None) -> str:
        while pid:
            if pid in self.roles:
                return self.roles[pid]
            try:
                pid = psutil.Process(pid).ppid()  # a process a service forked outside django-q2's stats
            except psutil.NoSuchProcess:
                return "other"
        return "other"

    def sample(self) -> dict[int, tuple[str, int]]:
        """{client pid: (role, connections)}; connections of unknown processes under pid 0."""
        rows = self.conn.execute(
            "SELECT client_port FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> %s",
            [self.own],
        ).fetchall()
        by_port = {
            c.laddr.port: c.pid
            for c in psutil.net_connections("tcp")
            if c.raddr and c.raddr.port == self.port and c.pid is not None
        }
        counts: Counter[int] = Counter(by_port.get(port, 0) for (port,) in rows)
        return {pid: (self.role(pid) if pid else "other", n) for pid, n in counts.items()}


def per_role(sample: dict[int, tuple[str, int]]) -> dict[str, tuple[int, int, int]]:
    """{role: (connections, processes holding any, most held by one process)}."""
    total: Counter[str] = Counter()
    holders: Counter[str] = Counter()
    most: Counter[str] = Counter()
    for role, n in sample.values():
        total[role] += n
        holders[role] += 1
        most[role] = max(most[role], n)
    return {role: (total[role], holders[role], most[role]) for role in total}


def cluster_roles(clusters: list[subprocess.Popen]) -> dict[int, str]:
    from django_q.status import Stat

    from evaluation.runs.services import broker

    roles = {c.pid: "qcluster" for c in clusters}
    for stat in Stat.get_all(broker()):
        roles[stat.sentinel] = "sentinel"
        roles[stat.pusher] = "pusher"
        roles[stat.monitor] = "monitor"
        roles.update({pid: "worker" for pid in stat.workers})
    return roles


def show(label: str, roles: dict[str, tuple[int, int, int]]) -> None:
    total = sum(n for n, _, _ in roles.values())
    parts = [
        f"{role} {roles[role][0]} ({roles[role][1]} proc, max {roles[role][2]} each)" for role in ROLES if role in roles
    ]
    print(f"{label:<28} total {total:3d}: " + "; ".join(parts), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=2)
    parser.add_argument("--workers", type=int, default=8, help="workers per qcluster process")
    parser.add_argument("--web-processes", type=int, default=1)
    parser.add_argument("--conversations", type=int, default=32)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--settle", type=float, default=150, help="seconds idle after the batch")
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args()
    if args.conversations % 8:
        sys.exit("--conversations must be a multiple of 8 (the personas)")
    slots = args.clusters * args.workers
    folder = Path(tempfile.mkdtemp(prefix="eval-bench-conn."))
    with ExitStack() as stack:
        database_url = stack.enter_context(postgres_cluster())
        redis_url, _ = stack.enter_context(redis_server(folder))
        llm = stack.enter_context(fake_llm(args.latency))
        provider = f"openai/loopback@{llm.openai_url}"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "EVAL_DATA_DIR": str(folder),
            "EVAL_TUTOR_PROVIDER": provider,
            "EVAL_SIMULATOR_PROVIDER": provider,
            "EVAL_JUDGE_PROVIDER": provider,
            "EVAL_TUTOR_PROBLEMS": "40",
            "EVAL_MAX_ACTIVE_RUNS": str(slots),
            "EVAL_Q_WORKERS": str(args.workers),
            "EVAL_QCLUSTERS": str(args.clusters),
            "EVAL_WEB_PROCESSES": str(args.web_processes),
            "EVAL_LLM_CONCURRENCY": "64",
        }
        os.environ.update(env)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        subprocess.run([*manage, "load_catalog"], cwd=ROOT, env=env, check=True, capture_output=True)
        import django

        django.setup()
        from django.db import connection

        from evaluation.models import EvaluationRun
        from evaluation.tutoring import services

        with connection.cursor() as cursor:
            cursor.execute("SHOW max_connections")
            max_connections = int(cursor.fetchone()[0])
            cursor.execute("SHOW superuser_reserved_connections")
            reserved = int(cursor.fetchone()[0])
        connection.close()

        web_url, web_pids = stack.enter_context(web_processes(env, args.web_processes, folder / "web.log"))
        clusters = [
            stack.enter_context(
                service([*manage, "qcluster"], {**env, "EVAL_SERVER_URL": web_url}, folder / f"q{i}.log")
            )
            for i in range(args.clusters)
        ]
        wait_for_clusters(args.clusters, args.workers, timeout=300)
        roles = {os.getpid(): "bench"} | {pid: "web" for pid in web_pids} | cluster_roles(clusters)
        sampler = Sampler(database_url, roles)
        print(
            f"{args.web_processes} web process(es), {args.clusters} qcluster(s) x {args.workers} workers; "
            f"max_connections {max_connections}, superuser_reserved_connections {reserved}; {load_average()}"
        )
        time.sleep(5)
        show("idle after start", per_role(sampler.sample()))

        # Peak per role and in total, and the most one process held, while the batch runs.
        peak_total = 0
        peak: Counter[str] = Counter()
        most: dict[str, int] = defaultdict(int)
        done = threading.Event()

        def watch() -> None:
            nonlocal peak_total
            while not done.is_set():
                sample = sampler.sample()
                peak_total = max(peak_total, sum(n for _, n in sample.values()))
                for role, (n, _, top) in per_role(sample).items():
                    peak[role] = max(peak[role], n)
                    most[role] = max(most[role], top)
                time.sleep(args.interval)

        watcher = threading.Thread(target=watch)
        runs = services.run_start(
            topic_id="comparing-decimals",
            persona="all",
            runs_per_persona=args.conversations // 8,
            max_turns=args.turns,
            seed=5,
            provider=provider,
        )
        watcher.start()
        started = time.perf_counter()
        pks = [r.pk for r in runs]
        while EvaluationRun.objects.filter(pk__in=pks, status__in=("queued", "running")).exists():
            time.sleep(0.2)
        wall = time.perf_counter() - started
        connection.close()
        done.set()
        watcher.join()
        statuses = Counter(EvaluationRun.objects.filter(pk__in=pks).values_list("status", flat=True))
        connection.close()
        print(f"batch: {args.conversations} runs x {args.turns} turns in {wall:.1f} s: {dict(statuses)}")
        parts = [f"{role} {peak[role]} (max {most[role]} in one process)" for role in ROLES if role in peak]
        print(f"{'peak while running':<28} total {peak_total:3d}: " + "; ".join(parts), flush=True)
        show("just after the batch", per_role(sampler.sample()))
        time.sleep(args.settle)
        show(f"{args.settle:.0f} s after the batch", per_role(sampler.sample()))

        try:
            from evaluation.checks.database import configured_budget
        except ImportError:  # a tree from before the check (the baseline)
            print("bound (manage.py check): none in this tree")
        else:
            print(f"bound (manage.py check): {configured_budget().formula()}")
        print(
            f"available: max_connections {max_connections} - superuser_reserved_connections {reserved} "
            f"= {max_connections - reserved}"
        )


if __name__ == "__main__":
    main()
