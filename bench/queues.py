"""Labelling queues: the server's time per labelled item, and what a queue of label next's picks buys against
labelling at random.

1. Server time per item: a fresh SQLite database with synthetic candidate responses judged by the offline judge;
   a blind queue of --queue items, two annotators; each label is the labelling page's POST (the labels of 8
   dimensions) and the GET of the next item it redirects to, through Django's test client in this process (no
   network). Median, 10th-90th percentile and max of the two together (wall clock, and this process's CPU time,
   which a busy machine inflates less), after a warm-up of 3 not counted, and the SQL statements each takes.

2. Interval width after N labels: a simulated population of --items judged items on a three-level scale, where
   people agree with the judge's "Yes" nearly always and vary widely where it says "No" or "Somewhat"; --start
   random items labelled first; then N more, either label next's picks (estimates.label_next: stratified by the
   judge's level, Neyman allocation) or a random sample. The corrected (PPI++) 95% interval's width of the share
   of "Yes", median over --seeds, and how often each interval holds the population's true share (label next's
   picks are not a simple random sample: its coverage is shown, not assumed).

    python bench/queues.py [--queue 20] [--items 2000] [--start 30] [--labels 20,50,100] [--seeds 200]
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import percentile, setup  # noqa: E402

WARM_UP = 3
LEVELS = ("No", "Somewhat", "Yes")  # worst first
JUDGE_SHARES = (0.3, 0.3, 0.4)
PEOPLE_GIVEN_JUDGE = ((0.5, 0.25, 0.25), (1 / 3, 1 / 3, 1 / 3), (0.0, 0.05, 0.95))
"""P(people's level | the judge's level): close agreement on "Yes", wide spread elsewhere."""
TRUE_YES = sum(s * p[2] for s, p in zip(JUDGE_SHARES, PEOPLE_GIVEN_JUDGE, strict=True))


def server_time(queue_items: int) -> None:
    setup(fresh_database=True)
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from evaluation.judging import services
    from evaluation.models import Item
    from tests.judging.synthetic import candidate_sets

    services.transcripts_import(json.dumps(candidate_sets(12, 8, seed=5)), file="synthetic.json")
    services.transcripts_judge(rubric="tutor-response", provider="offline", repeats=1, workers=2)
    users = get_user_model()
    for name in ("owner", "alice", "bob"):
        users.objects.create_user(name, password="x" * 16, is_staff=True).groups.add(Group.objects.get(name="operator"))
    ids = sorted(Item.objects.values_list("pk", flat=True))
    queue = services.queue_create(
        name="bench",
        rubric="tutor-response",
        owner=users.objects.get(username="owner"),
        items=ids[:queue_items],
        annotators=["alice", "bob"],
    )
    url = f"/admin/evaluation/judging/queues/{queue.pk}/label"
    times, cpu, queries = [], [], []
    for who in ("alice", "bob"):
        client = Client()
        client.force_login(users.objects.get(username=who))
        page = client.get(url)
        while b'id="label-form"' in page.content:
            body = page.content.decode()
            item = body.split('name="item" value="')[1].split('"')[0]
            form = {"item": item, "action": "submit"}
            for chunk in body.split('name="label_')[1:]:
                name, rest = chunk.split('"', 1)
                form.setdefault(f"label_{name}", rest.split('value="')[1].split('"')[0])
            with CaptureQueriesContext(connection) as captured:
                started, started_cpu = time.perf_counter(), time.process_time()
                answer = client.post(url, form)
                page = client.get(url)
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
            queries.append(len(captured.captured_queries))
            assert answer.status_code == 302 and page.status_code == 200, (answer.status_code, page.status_code)
    kept = [t * 1000 for t in times[WARM_UP:]]
    kept_cpu = [t * 1000 for t in cpu[WARM_UP:]]
    load = os.getloadavg()[0]
    print(
        f"server time per item (POST the labels of 8 dimensions + GET the next item), {len(kept)} items after "
        f"{WARM_UP} warm-up: median {statistics.median(kept):.1f} ms, p10-p90 {percentile(kept, 10):.1f}-"
        f"{percentile(kept, 90):.1f} ms, max {max(kept):.1f} ms; CPU time of this process median "
        f"{statistics.median(kept_cpu):.1f} ms (p10-p90 {percentile(kept_cpu, 10):.1f}-{percentile(kept_cpu, 90):.1f}); "
        f"SQL statements per item median {statistics.median(queries[WARM_UP:]):.0f}; load average {load:.1f} "
        f"on {os.cpu_count()} cores"
    )


def simulate(rng: np.random.Generator, items: int) -> tuple[dict[int, int], dict[int, int]]:
    judged = rng.choice(3, size=items, p=JUDGE_SHARES)
    people = np.array([rng.choice(3, p=PEOPLE_GIVEN_JUDGE[f]) for f in judged])
    return dict(enumerate(judged.tolist())), dict(enumerate(people.tolist()))


def widths(items: int, start: int, sizes: list[int], seeds: int) -> None:
    from evaluation.judging import estimates

    values = dict(estimates.estimands(LEVELS, False))["share:Yes"]
    out: dict[tuple[str, int], list[float]] = {}
    covered: dict[tuple[str, int], int] = {}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        judged, truth = simulate(rng, items)
        first = rng.choice(items, size=start, replace=False).tolist()
        people = {i: truth[i] for i in first}
        for n in sizes:
            picked, _ = estimates.label_next(values, LEVELS, judged, people, count=n, seed=seed)
            rest = [i for i in judged if i not in people]
            at_random = rng.choice(rest, size=n, replace=False).tolist()
            for how, extra in (("label next", picked), ("random", at_random)):
                labelled = people | {i: truth[i] for i in extra}
                row = next(
                    r
                    for r in estimates.dimension_estimates("d", LEVELS, False, judged, labelled)
                    if r.estimand == "share:Yes"
                )
                c = row.corrected
                out.setdefault((how, n), []).append(c.width if c.width is not None else float("nan"))
                hit = c.low is not None and c.high is not None and c.low <= TRUE_YES <= c.high
                covered[(how, n)] = covered.get((how, n), 0) + int(hit)
    print(
        f"\ncorrected 95% interval width of the share of 'Yes' ({items} judged items, {start} labelled at random "
        f"first, median over {seeds} seeds; coverage of the true share {TRUE_YES:.3f}):"
    )
    for n in sizes:
        nxt, rnd = out[("label next", n)], out[("random", n)]
        print(
            f"  +{n:>4} labels: label next {np.nanmedian(nxt):.4f} (coverage {covered[('label next', n)] / seeds:.1%}),"
            f" random {np.nanmedian(rnd):.4f} (coverage {covered[('random', n)] / seeds:.1%}); "
            f"label next / random {np.nanmedian(nxt) / np.nanmedian(rnd):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, default=20)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--start", type=int, default=30)
    parser.add_argument("--labels", default="20,50,100")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--no-server", action="store_true", help="Only the simulation.")
    args = parser.parse_args()
    if not args.no_server:
        server_time(args.queue)
    widths(args.items, args.start, [int(n) for n in args.labels.split(",")], args.seeds)


if __name__ == "__main__":
    os.environ.setdefault("EVAL_LOG_LEVEL", "WARNING")
    main()
