"""Fluency and convergence measures on 2,500 / 5,000 / 10,000 messages: time and peak memory.

Both are computed here (no LLM): 3-gram reuse across an agent's messages (fluency) and the
vocabulary overlap between speakers (convergence). They should grow linearly with the messages.

    python bench/drift_measures.py
"""

import random
import time
import tracemalloc

from _django import setup

setup()

from evaluation.text import novelty_overlap, vocabulary_stats  # noqa: E402

WORDS = "garden seed compost budget water tomato shed bees rain plan vote pounds children tools soil bed pollinator label summary committee".split()


def messages(n: int, speakers: int = 5, seed: int = 1) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"agent{i % speakers}", " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))) for i in range(n)]


def measure(fn, *args):
    tracemalloc.start()
    started = time.perf_counter()
    fn(*args)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak


def main() -> None:
    print(f"{'messages':>9} {'fluency ms':>11} {'peak KiB':>9} {'convergence ms':>15} {'peak KiB':>9}")
    base = None
    for n in (2_500, 5_000, 10_000):
        data = messages(n)
        texts = [t for _, t in data]
        by_speaker: dict[str, list[str]] = {}
        for speaker, text in data:
            by_speaker.setdefault(speaker, []).append(text)
        f_time, f_mem = measure(novelty_overlap, texts)
        c_time, c_mem = measure(vocabulary_stats, by_speaker)
        print(f"{n:>9} {f_time * 1000:>11.1f} {f_mem / 1024:>9.0f} {c_time * 1000:>15.1f} {c_mem / 1024:>9.0f}")
        if base is None:
            base = (n, f_time, c_time)
        else:
            print(
                f"{'':>9} x{n / base[0]:.0f} messages: fluency x{f_time / base[1]:.2f} time, convergence x{c_time / base[2]:.2f} time"
            )


if __name__ == "__main__":
    main()
