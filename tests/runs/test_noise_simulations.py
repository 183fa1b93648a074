"""The gate's error rates in simulations, independent of the formulas: hierarchical personas with their own means
and spreads, the offline judge's rare jumps, spreads carried by a few personas. Slow (about a minute), so apart
from tests/runs/test_noise.py, which mutation testing runs for every mutant."""

import numpy as np

from evaluation.runs.noise import Observation, family_test


def test_at_one_run_a_spread_from_a_few_personas_does_not_cry_wolf():
    """The bench's k=1 case (a baseline of 2 runs, one candidate run a persona, nothing changed) with the
    spread in one or two personas a dimension, as the offline judge's is: with the pooled degrees of freedom
    the gate made about 20% false alarms; with each persona's own spread, about 5%."""
    rng = np.random.default_rng(11)
    personas, dims, trials = 8, 6, 400

    def draw(means, sds, k):
        return {
            f"d{d}": [
                Observation(f"p{p}", float(np.clip(np.rint(means[p, d] + rng.normal(0, sds[p, d])), 1, 10)))
                for p in range(personas)
                for _ in range(k)
            ]
            for d in range(dims)
        }

    alarms = 0
    for _ in range(trials):
        means = rng.uniform(4, 8, (personas, dims))
        sds = np.full((personas, dims), 0.2)
        sds[rng.integers(0, personas, dims), range(dims)] = 2.0
        alarms += any(t.significant for t in family_test(draw(means, sds, 2), draw(means, sds, 1)))
    assert alarms / trials <= 0.09


def test_the_gates_false_alarm_rate_and_power_hold_in_a_simulation():
    """A hierarchical simulation, independent of the formulas: personas with their own means and spreads,
    runs drawn around them and rounded to whole points as the judge's are."""
    rng = np.random.default_rng(7)
    personas, dims = 8, 5

    def draw(means, sds, k, shift=0.0):
        return {
            f"d{d}": [
                Observation(f"p{p}", float(np.clip(np.rint(means[p, d] + shift + rng.normal(0, sds[p, d])), 1, 10)))
                for p in range(personas)
                for _ in range(k)
            ]
            for d in range(dims)
        }

    alarms = hits = 0
    trials = 150
    for _ in range(trials):
        means = rng.uniform(4, 8, (personas, dims))
        sds = rng.uniform(0.3, 1.5, (personas, dims))
        base = draw(means, sds, 4)
        alarms += any(t.significant for t in family_test(base, draw(means, sds, 4)))
        hits += any(t.significant for t in family_test(base, draw(means, sds, 4, shift=-2.0)))
    assert alarms / trials <= 0.09  # 5% family-wise, with room for 150 draws
    assert hits / trials >= 0.9


def test_at_one_run_rare_jumps_do_not_cry_wolf():
    """The offline judge's shape: a persona scores the same run after run, but now and then (10%) 3 points
    lower. A baseline of 2 runs and one candidate run a persona, nothing changed: the t test (even with Welch's
    df) cried wolf about 18% of the time; the permutation test at most alpha."""
    rng = np.random.default_rng(13)
    personas, dims, trials = 8, 5, 300

    def draw(means, k):
        return {
            f"d{d}": [
                Observation(f"p{p}", float(np.clip(means[p, d] - (3 if rng.random() < 0.1 else 0), 1, 10)))
                for p in range(personas)
                for _ in range(k)
            ]
            for d in range(dims)
        }

    alarms = 0
    for _ in range(trials):
        means = rng.integers(5, 9, (personas, dims)).astype(float)
        alarms += any(t.significant for t in family_test(draw(means, 2), draw(means, 1)))
    assert alarms / trials <= 0.07
