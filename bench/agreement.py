"""Judge validity end to end: import 200 dialogues x 8 candidate responses (generated, labelled; a third of the
dialogues by three annotators), judge them with the offline provider on 4 workers, compute agreement.

Each stage's wall time is the median (min-max) over --repeats runs after one warm-up run that is not
counted; every run starts from an empty judging state on a fresh SQLite database. Peak memory: the
Python heap's peak per stage (tracemalloc, in one extra untimed run, as tracing slows the code down)
and the process's peak resident set size.

    python bench/agreement.py [--dialogues 200] [--candidates 8] [--workers 4] [--repeats 3] [--judge-repeats 1]
"""

import argparse
import json
import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from _django import setup

setup(fresh_database=True)

from evaluation.judging import selectors, services  # noqa: E402
from evaluation.models import JudgeConfiguration, Transcript  # noqa: E402
from tests.judging.synthetic import candidate_sets  # noqa: E402

STAGES = ("import", "judge", "agreement")


def one_run(path: Path, args: argparse.Namespace, *, trace: bool = False) -> dict[str, float]:
    Transcript.objects.all().delete()
    JudgeConfiguration.objects.all().delete()
    out: dict[str, float] = {}
    steps = {
        "import": lambda: services.transcripts_import(path, rubric="tutor-response"),
        "judge": lambda: services.transcripts_judge(
            rubric="tutor-response", provider="offline", repeats=args.judge_repeats, workers=args.workers
        ),
        "agreement": lambda: selectors.agreement_table(JudgeConfiguration.objects.get()),
    }
    results = {}
    for stage in STAGES:
        if trace:
            tracemalloc.start()
        started = time.perf_counter()
        results[stage] = steps[stage]()
        out[stage] = time.perf_counter() - started
        if trace:
            out[stage] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    report = results["judge"]
    expected = args.dialogues * args.candidates * args.judge_repeats
    assert report.judged == expected and not report.failed, report
    assert results["import"].items == args.dialogues * args.candidates
    if not trace:
        out["table"] = results["agreement"]  # type: ignore[assignment]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--judge-repeats", type=int, default=1)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="eval-agreement-"))
    path = folder / "candidates.json"
    path.write_text(json.dumps(candidate_sets(args.dialogues, args.candidates, seed=11)))
    print(
        f"{args.dialogues} dialogues x {args.candidates} candidates = {args.dialogues * args.candidates} items, "
        f"8 dimensions, judge repeats {args.judge_repeats}, {args.workers} workers; file {path.stat().st_size / 1e6:.1f} MB"
    )
    one_run(path, args)  # warm-up: imports, first queries, the offline provider's instance
    runs = [one_run(path, args) for _ in range(args.repeats)]
    print(f"\n{'stage':<10} {'median s':>9} {'min-max s':>15}   (n={args.repeats}, warm-up excluded)")
    totals = []
    for stage in STAGES:
        values = [r[stage] for r in runs]
        print(f"{stage:<10} {statistics.median(values):>9.3f} {min(values):>7.3f}-{max(values):<7.3f}")
    totals = [sum(r[s] for s in STAGES) for r in runs]
    print(f"{'total':<10} {statistics.median(totals):>9.3f} {min(totals):>7.3f}-{max(totals):<7.3f}")
    peaks = one_run(path, args, trace=True)
    print("\npeak Python heap per stage (tracemalloc): " + ", ".join(f"{s} {peaks[s] / 2**20:.1f} MiB" for s in STAGES))
    print(f"peak resident set size of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    table = runs[-1]["table"]
    print(f"\n{table.configuration}: quadratic-weighted kappa, judge vs people (95% CI, n)")
    for row in table.rows:  # type: ignore[attr-defined]
        alpha = row.humans
        print(
            f"  {row.dimension:<24} kappa {row.judge_vs_humans.kappa}   people alpha {alpha}   ceiling: {row.ceiling.verdict}"
        )


if __name__ == "__main__":
    main()
