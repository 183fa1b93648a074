"""Scale-out on PostgreSQL and Redis: 64 conversations x 20 turns, every LLM call 100 ms, on two
qcluster processes (two machines simulated on one).

It starts everything itself: a throwaway PostgreSQL cluster, a redis-server (django-q2's broker and
the channel layer), the fake LLM in a process of its own, one uvicorn web process (the API and the
reference tutor) and two `manage.py qcluster` processes of --workers each; EVAL_MAX_ACTIVE_RUNS is
the total worker count (the slots). A warm-up batch (one short run per slot) is not counted; then
--repeats batches of --conversations runs are started through the run kernel, as the API starts
them, and timed until the last one ends. It prints the wall time against the ideal (the slots
filled back to back, each conversation's critical path being (1 opening + 2 per turn + 1 judge)
calls x latency), failures, how long one run takes against its LLM latency and how long a worker
waits between runs, and the CPU seconds per conversation of each part (workers, web server,
PostgreSQL, Redis; not the fake LLM), as the median (min-max) of the repeats.

    python bench/scale_out.py [--conversations 64] [--turns 20] [--latency 0.1] [--workers 4] [--repeats 3]
                              [--web-processes 1] [--server uvicorn|daphne] [--orm] [--no-prepare]

--orm sends the one-row writes and reads by key through the ORM instead of the SQL built once
(`evaluation/models/statements.py`, EVAL_HAND_SQL=0); --no-prepare turns PostgreSQL's prepared
statements off (EVAL_DB_PREPARE_THRESHOLD=off), so the two can be measured apart and together.
"""

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from _django import ROOT
from _harness import (
    WEB_SERVERS,
    fake_llm,
    free_port,
    load_average,
    postgres_cluster,
    postmaster_pid,
    spread,
    tree_cpu,
    web_processes,
)


@contextmanager
def redis_server(folder: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(folder), "--logfile", str(folder / "redis.log")],
    )
    try:
        import redis

        client = redis.Redis(port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0", process.pid
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def service(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def wait_for_clusters(clusters: int, workers: int, timeout: float = 60) -> None:
    """Until django-q2's cluster stats show every qcluster with all its workers: the senders count the
    clusters to send each task's copies, so work started before the last one registered would get too
    few copies (a start-up effect, not the steady state this measures)."""
    from django_q.status import Stat

    from evaluation.runs.services import broker

    deadline = time.monotonic() + timeout
    while True:
        stats = Stat.get_all(broker())
        if len(stats) >= clusters and all(len(stat.workers) >= workers for stat in stats):
            return
        if time.monotonic() > deadline:
            sys.exit(f"the qclusters did not all start within {timeout:.0f} s: {len(stats)} of {clusters} seen")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=64)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=4, help="workers per qcluster process (two of them)")
    parser.add_argument("--clusters", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--web-processes", type=int, default=1, help="web processes on one socket (one per core: docs/scaling.md)"
    )
    parser.add_argument("--server", choices=sorted(WEB_SERVERS), default="uvicorn", help="the web server")
    parser.add_argument(
        "--max-active-runs", type=int, default=0, help="EVAL_MAX_ACTIVE_RUNS (default: the total worker count)"
    )
    parser.add_argument("--orm", action="store_true", help="one-row writes through the ORM (EVAL_HAND_SQL=0)")
    parser.add_argument(
        "--no-prepare", action="store_true", help="no prepared statements (EVAL_DB_PREPARE_THRESHOLD=off)"
    )
    args = parser.parse_args()
    slots = args.workers * args.clusters
    if args.conversations % 8 or slots % 8:
        sys.exit("--conversations and the slots (workers x clusters) must be multiples of 8 (the personas)")
    folder = Path(tempfile.mkdtemp(prefix="eval-bench-scale."))
    with ExitStack() as stack:
        database_url = stack.enter_context(postgres_cluster())
        redis_url, redis_pid = stack.enter_context(redis_server(folder))
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
            "EVAL_TUTOR_PROBLEMS": "40",  # sessions run to max turns instead of finishing early
            "EVAL_MAX_ACTIVE_RUNS": str(args.max_active_runs or slots),
            "EVAL_Q_WORKERS": str(args.workers),
            "EVAL_LLM_CONCURRENCY": "64",
            "EVAL_HAND_SQL": "0" if args.orm else "1",
            "EVAL_DB_PREPARE_THRESHOLD": "off" if args.no_prepare else os.environ.get("EVAL_DB_PREPARE_THRESHOLD", "5"),
        }
        os.environ.update(env)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        subprocess.run([*manage, "load_catalog"], cwd=ROOT, env=env, check=True, capture_output=True)
        import django

        django.setup()
        from evaluation.models import EvaluationRun
        from evaluation.tutoring import services

        web_url, web_pids = stack.enter_context(web_processes(env, args.web_processes, folder / "web.log", args.server))
        clusters = [
            stack.enter_context(
                service([*manage, "qcluster"], {**env, "EVAL_SERVER_URL": web_url}, folder / f"q{i}.log")
            )
            for i in range(args.clusters)
        ]

        def batch(count: int, turns: int) -> tuple[float, list[EvaluationRun]]:
            runs = services.run_start(
                topic_id="comparing-decimals",
                persona="all",  # 8 personas
                runs_per_persona=count // 8,
                max_turns=turns,
                seed=5,
                provider=provider,
            )
            started = time.perf_counter()
            pks = [r.pk for r in runs]
            while EvaluationRun.objects.filter(pk__in=pks, status__in=("queued", "running")).exists():
                time.sleep(0.1)
            return time.perf_counter() - started, list(EvaluationRun.objects.filter(pk__in=pks))

        def cpu() -> dict[str, float]:
            return {
                "workers": sum(tree_cpu(c.pid) for c in clusters),
                "web": sum(tree_cpu(pid) for pid in web_pids),
                "postgresql": tree_cpu(postmaster_pid(database_url)),
                "redis": tree_cpu(redis_pid),
            }

        print(
            f"{args.conversations} conversations x {args.turns} turns, LLM calls {args.latency * 1000:.0f} ms; "
            f"{args.clusters} qcluster processes x {args.workers} workers = {slots} slots; "
            f"{args.web_processes} {args.server} process(es); one-row writes by "
            f"{'the ORM' if args.orm else 'SQL built once'}, prepared statements "
            f"{'off' if args.no_prepare else env['EVAL_DB_PREPARE_THRESHOLD']}; {load_average()}"
        )
        wait_for_clusters(args.clusters, args.workers)
        batch(slots, 1)  # warm-up: every worker's first run, not counted
        ideal = math.ceil(args.conversations / slots) * (1 + 2 * args.turns + 1) * args.latency
        walls, failures, per_part = [], [], {k: [] for k in ("workers", "web", "postgresql", "redis", "all")}
        durations: list[float] = []
        gaps: list[float] = []
        for _ in range(args.repeats):
            before = cpu()
            wall, done = batch(args.conversations, args.turns)
            after = cpu()
            walls.append(wall)
            begun = sorted((r for r in done if r.started_at), key=lambda r: r.started_at)
            longest = max((r.completed_at or r.started_at) - r.started_at for r in begun).total_seconds()
            per_worker = Counter(r.worker for r in begun).values()
            print(
                f"  batch {len(walls)}: wall {wall:.2f} s; last run begun "
                f"{(begun[-1].started_at - begun[0].started_at).total_seconds():.2f} s after the first; "
                f"longest run {longest:.2f} s; runs per worker {min(per_worker)}-{max(per_worker)}",
                flush=True,
            )
            durations += [(r.completed_at - r.started_at).total_seconds() for r in done if r.completed_at]
            by_worker: dict[str, list[EvaluationRun]] = {}
            for r in done:
                by_worker.setdefault(r.worker, []).append(r)
            for runs in by_worker.values():
                runs.sort(key=lambda r: r.started_at)
                gaps += [(b.started_at - a.completed_at).total_seconds() for a, b in zip(runs, runs[1:], strict=False)]
            failed = [(r.run_id, r.error) for r in done if r.status != "completed"]
            failures.append(len(failed))
            for run_id, error in failed[:3]:
                print(f"  failed {run_id}: {error}")
            for part in before:
                per_part[part].append((after[part] - before[part]) / args.conversations)
            per_part["all"].append(sum(after[p] - before[p] for p in before) / args.conversations)
    print(f"wall {spread(walls)} s; ideal {ideal:.1f} s; wall/ideal {spread([w / ideal for w in walls])}")
    print(f"failed runs per batch: {failures}")
    path = (1 + 2 * args.turns + 1) * args.latency
    waits = (
        f"median {statistics.median(gaps) * 1000:.0f} ms, max {max(gaps) * 1000:.0f} ms"
        if gaps
        else "none (no worker ran two runs in a batch)"
    )
    print(
        f"one run, begin to end: median {statistics.median(durations):.2f} s against its {path:.1f} s of LLM "
        f"latency; a worker's wait between one run's end and its next run's begin: {waits}"
    )
    for part, values in per_part.items():
        print(f"CPU-s per conversation, {part:<10} {spread(values, '{:.3f}')}")


if __name__ == "__main__":
    main()
