"""EVAL.md harness speed: parse 10,000 cases and fingerprint them; a fully cached re-run of 1,000 cases.

The first run calls the fake LLM (the loopback server in a process of its own, zero latency); the
re-run reloads the cache from disk and must make no LLM call. A warm-up (a small suite parsed,
fingerprinted and run once) is not counted; each figure is the median (min-max) of --repeats, and
each repeat starts from an empty cache.

python bench/suites.py [--cases 10000] [--cached 1000] [--repeats 5]
"""

import argparse
import tempfile
import time
from pathlib import Path

from _django import setup
from _harness import fake_llm, load_average, spread

setup()

from evaluation.suites.cache import FileCache, fingerprint  # noqa: E402
from evaluation.suites.parser import parse_suite  # noqa: E402
from evaluation.suites.runner import RunOptions, run_case  # noqa: E402
from evaluation.suites.scope import SuiteScope  # noqa: E402
from evaluation.suites.subjects import resolve_subject  # noqa: E402


def suite_text(n: int) -> str:
    return "\n".join(
        f"## case {i}\n### Prompt\nWhat is {i} + {i}? Explain briefly.\n### Step {i}\nnested heading stays in the prompt\n"
        f"### Expect\nThe assistant answers {2 * i} and explains it in one sentence.\n"
        for i in range(n)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--cached", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from django.conf import settings

    # The bench measures the parser past the default bounds (docs/limits.md), so it lifts them.
    settings.EVALUATION = {
        **settings.EVALUATION,
        "SUITE_MAX_CASES": max(args.cases, args.cached, 100),
        "SUITE_MAX_FILE_BYTES": 100_000_000,
    }
    folder = Path(tempfile.mkdtemp(prefix="eval-bench-"))
    (folder / "SKILL.md").write_text("Answer arithmetic questions and explain in one sentence.\n")
    text = suite_text(args.cases)
    print(f"{args.repeats} repeats after a warm-up; {load_average()}")
    warm_text = suite_text(100)
    warm_suite = parse_suite(warm_text, str(folder / "EVAL.md"))
    # The bench's temporary folder is its one suite folder.
    subject = resolve_subject(warm_suite, SuiteScope(folders=(folder.resolve(),), packages=(), root=folder.resolve()))
    parse_and_fingerprint(warm_text, folder, subject, 100)
    parse_us, hash_us = [], []
    for _ in range(args.repeats):
        parsed, hashed = parse_and_fingerprint(text, folder, subject, args.cases)
        parse_us.append(parsed / args.cases * 1e6)
        hash_us.append(hashed / args.cases * 1e6)
    print(f"parse {args.cases} cases ({len(text) / 1e6:.1f} MB): {spread(parse_us, '{:.1f}')} us/case")
    print(f"fingerprint {args.cases} cases: {spread(hash_us, '{:.1f}')} us/case")

    small = parse_suite(suite_text(args.cached), str(folder / "EVAL.md"))
    colds, warms, calls, cached_calls, served = [], [], set(), set(), set()
    with fake_llm(0.0) as server:
        cached_runs(server, warm_suite, subject, folder / "warm-up.json")
        for i in range(args.repeats):
            cold, warm, passes, cached, calls_first, second_calls = cached_runs(
                server, small, subject, folder / f"cache-{i}.json"
            )
            colds.append(cold)
            warms.append(warm / args.cached * 1000)
            calls.add(calls_first)
            cached_calls.add(second_calls)
            served.add(cached)
    print(
        f"first run of {args.cached} cases against the fake LLM (0 ms latency, {passes} passed, "
        f"LLM calls {sorted(calls)}): {spread(colds)} s"
    )
    print(
        f"fully cached re-run of {args.cached} cases: {spread(warms)} ms/case, served from the cache "
        f"{sorted(served)}, LLM calls {sorted(cached_calls)}"
    )


def parse_and_fingerprint(text: str, folder: Path, subject, cases: int) -> tuple[float, float]:
    """Seconds to parse the suite, and to fingerprint every case."""
    started = time.perf_counter()
    suite = parse_suite(text, str(folder / "EVAL.md"))
    parsed = time.perf_counter() - started
    started = time.perf_counter()
    keys = [
        fingerprint(suite, c, subject, agent_model="openai/gpt-5.2", judge_model="openai/gpt-5.2", judge=True)
        for c in suite.cases
    ]
    hashed = time.perf_counter() - started
    assert len(set(keys)) == cases
    return parsed, hashed


def cached_runs(server, small, subject, path: Path):
    """A first run into an empty cache at `path`, then a re-run with the cache reloaded from disk:
    (first s, re-run s, passed, served from the cache, LLM calls of the first, LLM calls of the re-run)."""
    model = f"openai/bench@{server.openai_url}"
    options = RunOptions(model=model, judge_model=model, cache=FileCache(path), use_db=False)
    before = server.count()
    started = time.perf_counter()
    first = [run_case(small, c, options, subject=subject) for c in small.cases]
    cold = time.perf_counter() - started
    passes = sum(r.passed for r in first)
    calls_first = server.count() - before  # before the re-run: a cache hit is not an LLM call
    # Reload the cache from disk, as a new process (or CI with a restored cache) would.
    options.cache = FileCache(path)
    started = time.perf_counter()
    second = [run_case(small, c, options, subject=subject) for c in small.cases]
    warm = time.perf_counter() - started
    cached = sum(r.cached for r in second)
    second_calls = server.count() - before - calls_first
    return cold, warm, passes, cached, calls_first, second_calls


if __name__ == "__main__":
    main()
