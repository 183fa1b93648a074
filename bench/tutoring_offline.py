"""The tutoring harness's own cost: 8 personas x 20 turns with the offline provider.

With offline (rule-based) roles every LLM call takes microseconds, so the time per turn is the
harness itself: simulator, WebSocket round trip, the reference tutor's server work, DB writes.

    python bench/tutoring_offline.py [--turns 20] [--workers 1]
"""

import argparse
import os
import statistics
import time

from _django import setup, summary

os.environ["EVAL_TUTOR_PROBLEMS"] = "40"  # sessions run to max turns instead of finishing early
os.environ["EVAL_TUTOR_PROVIDER"] = "offline"
setup(fresh_database=True)

from evaluation.models import RunMessage  # noqa: E402
from evaluation.tutoring import services  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    runs = services.run_start(
        topic_id="two-digit-addition-regrouping",
        persona="all",
        max_turns=args.turns,
        seed=11,
        provider="offline",
        enqueue=False,
    )
    started = time.perf_counter()
    done = services.runs_execute_here(runs, workers=args.workers)
    wall = time.perf_counter() - started
    failed = [r.run_id for r in done if r.status != "completed"]
    per_turn: list[float] = []
    for run in done:
        tutor_times = list(
            RunMessage.objects.filter(run=run, role="tutor").order_by("turn").values_list("timestamp", flat=True)
        )
        per_turn += [(b - a).total_seconds() * 1000 for a, b in zip(tutor_times, tutor_times[1:], strict=False)]
    turns = sum(r.turn for r in done)
    print(
        f"8 personas x {args.turns} turns, offline provider, {args.workers} worker(s); {turns} turns in all, {len(failed)} failed"
    )
    print(summary("harness time per turn", per_turn))
    print(f"{'mean per turn':<34} {statistics.fmean(per_turn):7.3f} ms")
    print(f"{'total wall time':<34} {wall:7.2f} s  (server start, judge and reports included)")
    if failed:
        raise SystemExit(f"failed runs: {failed}")


if __name__ == "__main__":
    main()
