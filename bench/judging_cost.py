"""The cost of judging imported items: wall time against the vendor's rate limits, failed items, tokens
billed with prompt caching and without, and the harness's CPU and memory.

N transcripts are imported through the import service (transcripts_import), then judged with the
tutor-session rubric through the loopback LLM server, which runs in a process of its own with a fixed
latency per call and enforces a requests-per-minute and a (prompt) tokens-per-minute limit with 429 and
Retry-After, reporting both in the vendor's rate-limit headers and cached tokens as the vendor does.

Modes (a function each, so another way of sending the calls is one more entry in MODES):
  direct  the judge's calls sent one by one on --workers threads, every worker drawing on the one shared
          rate-limit budget (evaluation/providers/ratelimit.py).
  batch   the same calls as one provider batch (OpenAI's Batch API or Anthropic's Message Batches), waited for.

Each repeat judges every item twice, prompt caching on and off (the judge's LLM config options
{"prompt_cache": false}), in alternating order, after a warm-up pass over a few items that is not counted;
figures are the median (min-max) over the repeats. The rate-limit bound is max(items / rpm, prompt
tokens / tpm) minutes, and no run can beat items / workers x latency either: the ratio is to the larger.

    python bench/judging_cost.py [--items 10000] [--mode direct] [--workers 16] [--latency 1.0]
                                 [--rpm 600] [--tpm 1500000] [--vendor anthropic] [--model ...] [--repeats 1]
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUBRIC = "tutor-session"


# --- the loopback server in its own process ---------------------------------------------------------
def serve(args: argparse.Namespace) -> None:
    """--serve: the loopback server with limits; prints its URL, answers `stats` (totals so far) on stdin."""
    sys.path.insert(0, str(ROOT))
    from evaluation.providers.loopback import LoopbackLLMServer

    server = LoopbackLLMServer(latency=args.latency, rpm=args.rpm, tpm=args.tpm, responder=varied_responder).start()
    print(server.url, flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "stats":
            stats = {"requests": server.count(), "limited": server.rate_limited, **server.billed}
            print(json.dumps(stats), flush=True)
    server.stop()


def varied(schema: dict, key: str) -> object:
    """A valid instance of the judge's schema whose levels and numbers depend on key (the item's text), so a
    batch answer mapped back to the wrong item shows as a different score than the direct call's."""
    import hashlib

    pick = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    if "enum" in schema:
        return schema["enum"][pick % len(schema["enum"])]
    if schema.get("type") == "object" or "properties" in schema:
        return {name: varied(sub, f"{key}/{name}") for name, sub in schema.get("properties", {}).items()}
    if schema.get("type") == "array":
        return [varied(schema.get("items", {}), f"{key}/{i}") for i in range(max(1, schema.get("minItems", 1)))]
    if schema.get("type") == "integer":
        low, high = schema.get("minimum", 0), schema.get("maximum", 10)
        return low + pick % (high - low + 1)
    from evaluation.providers.loopback import example_for

    return example_for(schema)


def varied_responder(endpoint: str, body: dict, n: int):
    from evaluation.providers.loopback import Reply, requested_schema

    schema = requested_schema(endpoint, body)
    last = (body.get("messages") or body.get("input") or [{}])[-1]
    return Reply(json=varied(schema, json.dumps(last, sort_keys=True))) if schema else Reply(text=f"reply {n}")


def scores_digest() -> str:
    """A digest of every stored judge score (item, dimension, repeat, value, score): equal digests, equal results."""
    import hashlib

    from evaluation.models import JudgeScore

    rows = JudgeScore.objects.order_by("item__transcript__external_id", "dimension__name", "repeat").values_list(
        "item__transcript__external_id", "dimension__name", "repeat", "value", "score"
    )
    return hashlib.sha256(json.dumps(list(rows)).encode()).hexdigest()[:16]


class Loopback:
    def __init__(self, process: subprocess.Popen, url: str):
        self.process, self.url, self.pid = process, url, process.pid

    def ask(self, command: str) -> dict[str, int]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())


@contextmanager
def loopback(args: argparse.Namespace) -> Iterator[Loopback]:
    command = [sys.executable, __file__, "--serve", "--latency", str(args.latency), "--rpm", str(args.rpm)]
    command += ["--tpm", str(args.tpm)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the loopback server did not start: {url!r}")
        yield Loopback(process, url)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


# --- the work ---------------------------------------------------------------------------------------
def transcripts(n: int, seed: int = 3) -> str:
    """n tutoring transcripts of 6 messages as JSONL, different in their numbers and wording."""
    rng = random.Random(seed)
    openers = ("Let's look at", "Today we try", "Here is", "Can you work out")
    lines = []
    for i in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        wrong = a + b + rng.choice((-10, -1, 1, 10))
        messages = [
            {"role": "tutor", "content": f"{rng.choice(openers)} {a} + {b}. What do you get?"},
            {"role": "student", "content": f"I think it is {wrong}, I added the tens first."},
            {"role": "tutor", "content": f"Check the ones: {a % 10} + {b % 10}. What is that?"},
            {"role": "student", "content": f"Oh, {a % 10 + b % 10}. So I need to carry?"},
            {"role": "tutor", "content": "Yes. Write the carried ten above the tens column and add again."},
            {"role": "student", "content": f"Then it is {a + b}."},
        ]
        lines.append(json.dumps({"id": f"bench-{i}", "messages": messages}))
    return "\n".join(lines) + "\n"


@dataclass
class Pass:
    wall: float
    cpu: float
    judged: int
    failed: int
    stats: dict[str, int]
    digest: str


def judge_direct(args: argparse.Namespace, item_ids: list[int] | None) -> tuple[int, int]:
    """Mode "direct": (judged, failed) items."""
    from evaluation.judging import services

    report = services.transcripts_judge(
        rubric=RUBRIC, workers=args.workers, only_missing=False, item_ids=item_ids, batch=False
    )
    return report.judged, len(report.failed)


def judge_batch(args: argparse.Namespace, item_ids: list[int] | None) -> tuple[int, int]:
    """Mode "batch": the same calls as one provider batch (docs/batches.md), waited for in this process and
    polled every second; the loopback answers each line as its single endpoint does."""
    from django.conf import settings

    from evaluation.judging import services

    settings.EVALUATION["BATCH_POLL_SECONDS"] = 1.0
    report = services.transcripts_judge(
        rubric=RUBRIC, workers=args.workers, only_missing=False, item_ids=item_ids, batch=True
    )
    return report.judged, len(report.failed)


MODES: dict[str, Callable[[argparse.Namespace, list[int] | None], tuple[int, int]]] = {
    "direct": judge_direct,
    "batch": judge_batch,
}


def configure(server: Loopback, args: argparse.Namespace, *, cache: bool) -> None:
    from evaluation.models import LLMConfig

    url = server.url if args.vendor == "anthropic" else server.url + "/v1"
    options = {"prompt_cache": cache, **({"api": "responses"} if args.vendor == "openai" else {})}
    LLMConfig.objects.update_or_create(
        role="rubric_judge",
        defaults={"provider": args.vendor, "model": args.model, "base_url": url, "options": options},
    )


def one_pass(server: Loopback, args: argparse.Namespace, *, cache: bool, item_ids: list[int] | None) -> Pass:
    from evaluation.models import JudgeScore

    configure(server, args, cache=cache)
    JudgeScore.objects.all().delete()  # each pass stores its own results, compared by digest
    before = server.ask("stats")
    cpu, started = time.process_time(), time.perf_counter()
    judged, failed = MODES[args.mode](args, item_ids)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    after = server.ask("stats")  # the server's rate window runs on from pass to pass, as a vendor's does
    return Pass(wall, cpu, judged, failed, {name: after[name] - before[name] for name in after}, scores_digest())


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--mode", choices=sorted(MODES), default="direct")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds each call waits before answering")
    parser.add_argument("--rpm", type=int, default=600, help="requests per minute the server allows")
    parser.add_argument("--tpm", type=int, default=1_500_000, help="prompt tokens per minute the server allows")
    parser.add_argument("--vendor", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument(
        "--model",
        default="",
        help="the judge's model (default: the vendor's default, claude-opus-4-6 or gpt-5.2); the loopback caches "
        "only prefixes as long as its minimum cacheable prompt (Opus 4.6: 4,096 tokens; Sonnet 4.6: 1,024)",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=20, help="items judged once first, not counted")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.model = args.model or ("claude-opus-4-6" if args.vendor == "anthropic" else "gpt-5.2")
    if args.serve:
        return serve(args)

    sys.path.insert(0, str(ROOT / "bench"))
    from _django import setup

    # Every worker may have its call in flight (the provider layer's default allows 8 at once).
    os.environ["EVAL_LLM_CONCURRENCY"] = str(max(args.workers, 8))
    os.environ["EVAL_IMPORT_MAX_RECORDS"] = str(max(args.items, 10_000))
    os.environ["EVAL_IMPORT_MAX_FILE_BYTES"] = str(max(args.items * 2_000, 20_000_000))
    setup(fresh_database=True)
    from evaluation.judging import services
    from evaluation.models import Item

    folder = Path(tempfile.mkdtemp(prefix="judging-cost-"))
    path = folder / "items.jsonl"
    path.write_text(transcripts(args.items))
    started = time.perf_counter()
    imported = services.transcripts_import(path)
    import_seconds = time.perf_counter() - started
    ids = sorted(Item.objects.values_list("id", flat=True))
    assert len(ids) == args.items, f"imported {len(ids)} items, not {args.items}: {imported}"

    passes: dict[bool, list[Pass]] = {True: [], False: []}
    with loopback(args) as server:
        one_pass(server, args, cache=True, item_ids=ids[: args.warmup])  # warm-up: not counted
        for repeat in range(args.repeats):
            for cache in (True, False) if repeat % 2 == 0 else (False, True):
                passes[cache].append(one_pass(server, args, cache=cache, item_ids=ids))
                print(f"  pass: caching {'on' if cache else 'off'}: {passes[cache][-1]}", flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(
        f"\n{args.items} imported items (import {import_seconds:.1f} s), mode {args.mode}, {args.workers} workers, "
        f"{args.vendor} wire format, model {args.model}, latency {args.latency:g} s, limits {args.rpm} requests and {args.tpm} prompt "
        f"tokens a minute; {args.repeats} repeat(s), warm-up of {args.warmup} items not counted"
    )
    for cache in (True, False):
        runs = passes[cache]
        prompt = statistics.median(p.stats["input_tokens"] for p in runs)
        bound = max(args.items / args.rpm, prompt / args.tpm) * 60
        floor = args.items / args.workers * args.latency
        ideal = max(bound, floor)
        print(f"caching {'on' if cache else 'off'}:")
        ratio = (
            spread([p.wall / ideal for p in runs])
            if args.mode == "direct"
            else "- (the loopback ends a batch when first polled; a vendor takes up to 24 h, unlimited by rpm)"
        )
        print(
            f"  wall {spread([p.wall for p in runs], '{:.1f}')} s; rate-limit bound {bound:.1f} s, "
            f"concurrency bound {floor:.1f} s; wall/bound {ratio}"
        )
        print(
            f"  failed items {spread([float(p.failed) for p in runs], '{:.0f}')}; judged "
            f"{spread([float(p.judged) for p in runs], '{:.0f}')}; requests {spread([float(p.stats['requests']) for p in runs], '{:.0f}')}, "
            f"of them refused 429 {spread([float(p.stats['limited']) for p in runs], '{:.0f}')}"
        )
        uncached = [p.stats["input_tokens"] - p.stats["cached_input_tokens"] for p in runs]
        print(
            f"  prompt tokens {spread([float(p.stats['input_tokens']) for p in runs], '{:.0f}')}, read from the "
            f"cache {spread([float(p.stats['cached_input_tokens']) for p in runs], '{:.0f}')}, written to it "
            f"{spread([float(p.stats['cache_write_tokens']) for p in runs], '{:.0f}')}, billed at the full input "
            f"price {spread([float(u) for u in uncached], '{:.0f}')}; output "
            f"{spread([float(p.stats['output_tokens']) for p in runs], '{:.0f}')}"
        )
        print(f"  harness CPU per item {spread([p.cpu / args.items * 1000 for p in runs], '{:.2f}')} ms")
        print(f"  results digest {', '.join(sorted({p.digest for p in runs}))}")
    on, off = passes[True], passes[False]
    full_on = statistics.median(p.stats["input_tokens"] - p.stats["cached_input_tokens"] for p in on)
    full_off = statistics.median(p.stats["input_tokens"] for p in off)
    print(
        f"prompt tokens at the full input price, caching on / off: {full_on:.0f} / {full_off:.0f} "
        f"({full_on / full_off:.1%}); peak memory (max RSS) {peak_mb:.0f} MB"
    )


if __name__ == "__main__":
    main()
