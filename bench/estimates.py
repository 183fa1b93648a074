"""Corrected estimates on simulated data where the truth is known: do the corrected intervals (PPI++, and the
doors' estimate, stratified by the judge's level where each level holds two labels) cover the truth at
their nominal 95%, does the judge-only one (it should not: the judge is biased), and is the corrected interval
ever materially wider than the people-only one?

Each seed draws a fresh population of judged items (--items), its true values, a judge with a known bias and
noise, and people's labels (the truth) on a random --share of the items; then computes the three estimates of
evaluation/judging/estimates.py. Two estimands: the share of "Yes" on a three-level categorical scale (the judge
calls a "To some extent" item "Yes" too often) and the mean of a 1-10 integer scale (the judge scores one point
high on average, and noisily). Coverage is the share of seeds whose interval holds the true value in the
population the items are drawn from (what the intervals are built for); also, as a check, of the mean over the
drawn items, which they cover more often, the labelled items being a tenth of those very items. Widths are the
median (10th-90th percentile) over seeds. Time: the median (min-max) per corrected estimate, over the seeds
after a warm-up of 20 not counted.

    python bench/estimates.py [--seeds 500] [--items 2000] [--share 0.1]
"""

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluation.judging import estimates  # noqa: E402

WARM_UP = 20


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


TRUE_MEAN = sum(
    k * ((_normal_cdf((k + 0.5 - 6) / 2) if k < 10 else 1.0) - (_normal_cdf((k - 0.5 - 6) / 2) if k > 1 else 0.0))
    for k in range(1, 11)
)
"""The expected value of round(N(6, 2)) clipped to 1-10 (round half to even aside: ties have probability 0)."""
TRUTH = {"share:Yes": 0.45, "mean": TRUE_MEAN}
"""What the population's people would say on average: the estimand the intervals are built for."""


def population(rng: np.random.Generator, kind: str, items: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(people's places on the scale, the judge's places, each place's value) of every item."""
    if kind == "share:Yes":
        truth = rng.choice(3, size=items, p=[0.25, 0.3, 0.45])  # 0 No, 1 To some extent, 2 Yes
        judge = truth.copy()
        lifted = (truth == 1) & (rng.random(items) < 0.5)  # half the "To some extent" items called "Yes"
        judge[lifted] = 2
        slips = rng.random(items) < 0.1  # and a tenth of all items at random
        judge[slips] = rng.choice(3, size=int(slips.sum()))
        return truth, judge, np.array([0.0, 0.0, 1.0])
    truth = np.clip(np.round(rng.normal(6.0, 2.0, size=items)), 1, 10)
    judge = np.clip(np.round(truth + 1 + rng.normal(0.0, 1.5, size=items)), 1, 10)
    return truth.astype(np.int64) - 1, judge.astype(np.int64) - 1, np.arange(1.0, 11.0)


def one_seed(seed: int, kind: str, args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    places, judged, values = population(rng, kind, args.items)
    truth, judge = values[places], values[judged]
    target, finite = TRUTH[kind], float(truth.mean())
    labelled = np.zeros(args.items, dtype=bool)
    labelled[rng.choice(args.items, size=max(2, round(args.share * args.items)), replace=False)] = True
    started = time.perf_counter()
    corrected = estimates.ppi_mean(truth[labelled], judge[labelled], judge[~labelled])
    elapsed = time.perf_counter() - started
    doors = estimates.corrected_mean(values, judged[labelled], places[labelled], judged[~labelled])
    people = estimates.classical_mean(truth[labelled])
    judge_only = estimates.judge_only(judge)
    out = {"seconds": elapsed, "lam": corrected.lam or 0.0, "bias": float(judge.mean()) - finite}
    for name, e in (("corrected", corrected), ("stratified", doors), ("people", people), ("judge", judge_only)):
        assert e.low is not None and e.high is not None, (name, e.reason)
        out[f"{name}_covers"] = float(e.low <= target <= e.high)
        out[f"{name}_covers_drawn"] = float(e.low <= finite <= e.high)
        out[f"{name}_width"] = e.high - e.low
    out["ratio"] = out["corrected_width"] / out["people_width"]
    out["stratified_ratio"] = out["stratified_width"] / out["people_width"]
    out["stratified_used"] = float(doors.method.startswith(estimates.STRATIFIED))
    return out


def spread(values: list[float]) -> str:
    low, mid, high = np.percentile(values, [10, 50, 90])
    return f"{mid:.4f} ({low:.4f}-{high:.4f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=500)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--share", type=float, default=0.1, help="The share of items people labelled")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    n = max(2, round(args.share * args.items))
    print(f"{args.seeds} seeds, {args.items} judged items, people's labels on {n} ({args.share:.0%}); load {load:.2f}")
    for kind in ("share:Yes", "mean"):
        for seed in range(WARM_UP):
            one_seed(10**6 + seed, kind, args)
        runs = [one_seed(seed, kind, args) for seed in range(args.seeds)]
        nominal_se = math.sqrt(0.95 * 0.05 / args.seeds)
        print(
            f"\n{kind} (judge's bias {statistics.mean(r['bias'] for r in runs):+.3f}, lambda {spread([r['lam'] for r in runs])})"
        )
        for name in ("corrected", "stratified", "people", "judge"):
            cover = statistics.mean(r[f"{name}_covers"] for r in runs)
            drawn = statistics.mean(r[f"{name}_covers_drawn"] for r in runs)
            print(
                f"  {name:<10} coverage {cover:.3f} (nominal 0.95 +/- {2 * nominal_se:.3f}; of the drawn items' "
                f"own mean {drawn:.3f})  width {spread([r[f'{name}_width'] for r in runs])}"
            )
        for name, key in (("corrected (PPI++)", "ratio"), ("stratified", "stratified_ratio")):
            ratios = [r[key] for r in runs]
            print(
                f"  corrected width / people-only width, {name}: median {statistics.median(ratios):.3f}, "
                f"max {max(ratios):.3f}, seeds above 1.05: {sum(r > 1.05 for r in ratios)}"
            )
        used = statistics.mean(r["stratified_used"] for r in runs)
        print(f"  the doors' estimate was the stratified one in {used:.0%} of seeds (else PPI++)")
        times = [r["seconds"] * 1e6 for r in runs]
        print(f"  time per corrected estimate {statistics.median(times):.1f} us ({min(times):.1f}-{max(times):.1f})")


if __name__ == "__main__":
    main()
