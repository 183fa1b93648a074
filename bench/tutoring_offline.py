"""The tutoring harness's own cost: 8 personas x 20 turns with the offline provider.

With offline (rule-based) roles every LLM call takes microseconds, so what a turn costs is the
harness itself: the simulator, the WebSocket round trip, the reference tutor's server work and the
database writes. It prints the CPU seconds of the whole process tree (this worker process and the
uvicorn tutor server) per turn, and the wall time per turn, as the median (min-max) of several
repeats; the tutor server's start and a warm-up batch are not counted.

    python bench/tutoring_offline.py [--turns 20] [--repeats 5] [--workers 1]
"""

import argparse
import os
import time

from _django import setup
from _harness import load_average, spread, tree_cpu

os.environ["EVAL_TUTOR_PROBLEMS"] = "40"  # sessions run to max turns instead of finishing early
os.environ["EVAL_TUTOR_PROVIDER"] = "offline"
setup(fresh_database=True)

from evaluation.tutoring import services  # noqa: E402
from evaluation.tutoring.server import managed_server  # noqa: E402


def batch(turns: int, workers: int, url: str) -> tuple[int, float, float, float]:
    """(turns done, tree CPU s, this process's CPU s, wall s) of one batch of 8 personas."""
    runs = services.run_start(
        topic_id="two-digit-addition-regrouping",
        persona="all",
        max_turns=turns,
        seed=11,
        provider="offline",
        enqueue=False,
    )
    cpu, own, started = tree_cpu(), time.process_time(), time.perf_counter()
    done = services.runs_execute_here(runs, workers=workers, server_url=url, manage_server=False)
    wall = time.perf_counter() - started
    cpu, own = tree_cpu() - cpu, time.process_time() - own
    failed = [(r.run_id, r.error) for r in done if r.status != "completed"]
    if failed:
        raise SystemExit(f"failed runs: {failed}")
    return sum(r.turn for r in done), cpu, own, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    print(f"8 personas x {args.turns} turns, offline provider, {args.workers} worker thread(s); {load_average()}")
    with managed_server() as url:
        batch(2, args.workers, url)  # warm-up: imports, first connections, the server's first requests
        tree, worker, wall = [], [], []
        for _ in range(args.repeats):
            turns, cpu, own, seconds = batch(args.turns, args.workers, url)
            tree.append(cpu / turns * 1000)
            worker.append(own / turns * 1000)
            wall.append(seconds / turns * 1000)
    print(f"harness CPU per turn, process tree   {spread(tree)} ms")
    print(f"  of which the worker process        {spread(worker)} ms (the rest: the tutor server)")
    print(f"wall time per turn                   {spread(wall)} ms (judge and reports included)")


if __name__ == "__main__":
    main()
