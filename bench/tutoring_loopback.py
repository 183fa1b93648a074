"""The pipeline against a fake LLM with a fixed latency per call, on 1 and on N worker threads.

Every role (simulator, the reference tutor, judge) calls the fake LLM (the loopback server, in a
process of its own), so the critical path of one run is (1 opening + 2 per turn + 1 judge) calls x
latency. Passes with 1 and N workers alternate (1, N, N, 1, ...) after a warm-up batch that is not
counted; each figure is the median (min-max) of the repeats. It prints the wall time against the
ideal, and the CPU seconds of the process tree (this worker process and the tutor server,
not the fake LLM) per turn; `--latency 0` measures the harness's cost through real HTTP calls.

    python bench/tutoring_loopback.py [--turns 20] [--latency 0.1] [--workers 4] [--repeats 3]
"""

import argparse
import math
import os
import time

from _django import setup
from _harness import fake_llm, load_average, spread, tree_cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--single", action=argparse.BooleanOptionalAction, default=True, help="also run on 1 worker")
    args = parser.parse_args()
    with fake_llm(args.latency) as llm:
        provider = f"openai/loopback@{llm.openai_url}"
        os.environ.update({"EVAL_TUTOR_PROBLEMS": "40", "EVAL_TUTOR_PROVIDER": provider, "EVAL_LLM_CONCURRENCY": "64"})
        setup(fresh_database=True)
        from evaluation.tutoring import services
        from evaluation.tutoring.server import managed_server

        def batch(workers: int, turns: int, url: str) -> tuple[int, int, float, float, float]:
            runs = services.run_start(
                topic_id="comparing-decimals", persona="all", max_turns=turns, seed=5, provider=provider, enqueue=False
            )
            calls = llm.count()
            cpu, own, started = tree_cpu(exclude=[llm.pid]), time.process_time(), time.perf_counter()
            done = services.runs_execute_here(runs, workers=workers, server_url=url, manage_server=False)
            wall, cpu = time.perf_counter() - started, tree_cpu(exclude=[llm.pid]) - cpu
            own = time.process_time() - own
            failed = [(r.run_id, r.error) for r in done if r.status != "completed"]
            if failed:
                raise SystemExit(f"failed runs: {failed}")
            calls = llm.count() - calls
            expected = len(runs) * (1 + 2 * turns + 1)
            if calls != expected:
                print(f"  note: {calls} LLM calls, not the {expected} of the critical path (retries or repairs)")
            return len(runs), sum(r.turn for r in done), wall, cpu, own

        counts = [1, args.workers] if args.single and args.workers != 1 else [args.workers]
        walls: dict[int, list[float]] = {w: [] for w in counts}
        cpus: dict[int, list[float]] = {w: [] for w in counts}
        owns: dict[int, list[float]] = {w: [] for w in counts}
        print(
            f"8 personas x {args.turns} turns, every LLM call {args.latency * 1000:.0f} ms (fake LLM in its own "
            f"process); {load_average()}"
        )
        with managed_server() as url:
            batch(args.workers, 2, url)  # warm-up, not counted
            for repeat in range(args.repeats):
                for workers in counts if repeat % 2 == 0 else counts[::-1]:
                    runs, turns, wall, cpu, own = batch(workers, args.turns, url)
                    walls[workers].append(wall)
                    cpus[workers].append(cpu / turns * 1000)
                    owns[workers].append(own / turns * 1000)
    per_run_path = 1 + 2 * args.turns + 1
    for workers in counts:
        ideal = math.ceil(runs / workers) * per_run_path * args.latency
        ratio = spread([w / ideal for w in walls[workers]]) if ideal else "n/a (zero latency)"
        print(
            f"{workers} worker(s): wall {spread(walls[workers])} s; ideal {ideal:.2f} s ({per_run_path} calls on each "
            f"run's critical path, {math.ceil(runs / workers)} run(s) per worker); wall/ideal {ratio}"
        )
        print(
            f"{'':>12}CPU per turn (worker + tutor server) {spread(cpus[workers])} ms, "
            f"of which the worker {spread(owns[workers])} ms"
        )
    if len(counts) == 2:
        speedups = [a / b for a, b in zip(walls[1], walls[args.workers], strict=True)]
        print(f"speed-up on {args.workers} workers: {spread(speedups)}x (ideal {args.workers}x)")


if __name__ == "__main__":
    main()
