"""Fluency and convergence measures on 2,500 / 5,000 / 10,000 messages: time and peak memory.

Both are computed here (no LLM): 3-gram reuse across an agent's messages (fluency) and the
vocabulary overlap between speakers (convergence). They should grow linearly with the messages.
Times are the median (min-max) of --repeats runs with tracemalloc off (it slows allocation-heavy
code several times over); the peak memory comes from one more run with tracemalloc on.

    python bench/drift_measures.py [--repeats 5]
"""

import argparse
import random
import statistics
import time
import tracemalloc

from _django import setup
from _harness import load_average

setup()

from evaluation.text import novelty_overlap, vocabulary_stats  # noqa: E402

WORDS = "garden seed compost budget water tomato shed bees rain plan vote pounds children tools soil bed pollinator label summary committee".split()


def messages(n: int, speakers: int = 5, seed: int = 1) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"agent{i % speakers}", " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))) for i in range(n)]


def timed(fn, args: tuple, repeats: int) -> list[float]:
    fn(*args)  # warm-up, not counted
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - started)
    return out


def peak_memory(fn, args: tuple) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"median (min-max) of {args.repeats} repeats; {load_average()}")
    print(f"{'messages':>9} {'fluency ms':>22} {'peak KiB':>9} {'convergence ms':>22} {'peak KiB':>9}")
    base = None
    for n in (2_500, 5_000, 10_000):
        data = messages(n)
        texts = [t for _, t in data]
        by_speaker: dict[str, list[str]] = {}
        for speaker, text in data:
            by_speaker.setdefault(speaker, []).append(text)
        f_times = timed(novelty_overlap, (texts,), args.repeats)
        c_times = timed(vocabulary_stats, (by_speaker,), args.repeats)
        f_mem, c_mem = peak_memory(novelty_overlap, (texts,)), peak_memory(vocabulary_stats, (by_speaker,))
        f_time, c_time = statistics.median(f_times), statistics.median(c_times)
        f_cell = f"{f_time * 1000:.1f} ({min(f_times) * 1000:.1f}-{max(f_times) * 1000:.1f})"
        c_cell = f"{c_time * 1000:.1f} ({min(c_times) * 1000:.1f}-{max(c_times) * 1000:.1f})"
        print(f"{n:>9} {f_cell:>22} {f_mem / 1024:>9.0f} {c_cell:>22} {c_mem / 1024:>9.0f}")
        if base is None:
            base = (n, f_time, c_time)
        else:
            print(
                f"{'':>9} x{n / base[0]:.0f} messages: fluency x{f_time / base[1]:.2f} time, "
                f"convergence x{c_time / base[2]:.2f} time"
            )


if __name__ == "__main__":
    main()
