"""The pipeline against an LLM with 100 ms latency per call (the loopback server), on 1 and on 4 workers.

Every role (simulator, the reference tutor, judge) calls the loopback server, so the critical path
of one run is (1 opening + 2 per turn + 1 judge) calls x latency. It prints the wall time on 1
and on N workers, the speed-up, and each wall time against the ideal.

    python bench/tutoring_loopback.py [--turns 20] [--latency 0.1] [--workers 4]
"""

import argparse
import math
import os
import time

from _django import setup

from evaluation.providers.loopback import LoopbackLLMServer  # noqa: E402  (no Django needed to import)

LATENCY = 0.1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=LATENCY)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    server = LoopbackLLMServer(latency=args.latency).start()
    provider = f"openai/loopback@{server.openai_url}"
    os.environ.update({"EVAL_TUTOR_PROBLEMS": "40", "EVAL_TUTOR_PROVIDER": provider, "EVAL_LLM_CONCURRENCY": "64"})
    setup(fresh_database=True)
    from evaluation.tutoring import services
    from evaluation.tutoring.server import managed_server

    results = {}
    with managed_server() as url:
        for workers in (1, args.workers):
            runs = services.run_start(
                topic_id="comparing-decimals",
                persona="all",
                max_turns=args.turns,
                seed=5,
                provider=provider,
                enqueue=False,
            )
            calls_before = server.count()
            started = time.perf_counter()
            done = services.runs_execute_here(runs, workers=workers, server_url=url)
            wall = time.perf_counter() - started
            failed = [r.run_id for r in done if r.status != "completed"]
            if failed:
                raise SystemExit(f"failed runs: {[(r.run_id, r.error) for r in done if r.status != 'completed']}")
            calls = server.count() - calls_before
            per_run_path = 1 + 2 * args.turns + 1
            ideal = math.ceil(len(runs) / workers) * per_run_path * args.latency
            results[workers] = wall
            print(
                f"{workers} worker(s): {len(runs)} runs, {calls} LLM calls, wall {wall:6.2f} s; "
                f"ideal {ideal:5.2f} s ({per_run_path} calls on each run's critical path x {args.latency * 1000:.0f} ms, "
                f"{math.ceil(len(runs) / workers)} run(s) per worker); wall/ideal {wall / ideal:.2f}"
            )
    server.stop()
    speedup = results[1] / results[args.workers]
    print(
        f"speed-up on {args.workers} workers: {speedup:.2f}x (ideal {args.workers:.0f}x, {speedup / args.workers:.0%} of ideal)"
    )


if __name__ == "__main__":
    main()
