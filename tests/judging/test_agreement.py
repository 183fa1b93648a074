"""Agreement statistics against scikit-learn, scipy, the krippendorff package and a published worked example."""

import numpy as np
import pytest
from krippendorff import alpha as k_alpha
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

from evaluation.judging import agreement


@pytest.fixture
def pair():
    rng = np.random.default_rng(7)
    human = rng.integers(0, 5, 300)
    judge = np.clip(human + rng.integers(-1, 2, 300) * (rng.random(300) < 0.5), 0, 4)
    return judge.astype(np.int64), human.astype(np.int64)


def test_kappa_rho_and_rates_match_the_libraries_on_the_same_arrays(pair):
    judge, human = pair
    result = agreement.judge_vs_humans(judge, human, 5)
    assert result.kappa.value == pytest.approx(cohen_kappa_score(judge, human, weights="quadratic"))
    assert result.rho.value == pytest.approx(spearmanr(judge, human).statistic)
    assert result.exact.value == pytest.approx(np.mean(judge == human))
    assert result.within_one.value == pytest.approx(np.mean(np.abs(judge - human) <= 1))
    assert result.kappa.n == 300 and result.kappa.low < result.kappa.value < result.kappa.high
    assert 0.5 < result.kappa.value < 0.95  # correlated, imperfect
    assert sum(map(sum, result.confusion)) == 300 and result.confusion[0][0] == np.sum((human == 0) & (judge == 0))


def test_the_vectorised_resamples_equal_the_libraries_resample_by_resample(pair):
    judge, human = pair
    idx = agreement.resample_indices(len(judge), resamples=25, seed=3)
    kappas = agreement.qwk_resampled(judge, human, 5, idx)
    rhos = agreement.spearman_resampled(judge, human, 5, idx)
    for r in range(25):
        a, b = judge[idx[r]], human[idx[r]]
        assert kappas[r] == pytest.approx(cohen_kappa_score(a, b, labels=range(5), weights="quadratic"))
        assert rhos[r] == pytest.approx(spearmanr(a, b).statistic)


def test_alpha_resamples_equal_the_krippendorff_package():
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 4, 120)
    units = [[int(np.clip(t + rng.integers(-1, 2), 0, 3)) for _ in range(rng.integers(1, 4))] for t in truth]
    counts = agreement.value_counts(units, 4)
    pairable = counts[counts.sum(1) >= 2]
    idx = agreement.resample_indices(len(pairable), resamples=20, seed=5)
    alphas = agreement.alpha_resampled(pairable, 4, idx)
    for r in range(20):
        expected = k_alpha(value_counts=pairable[idx[r]], value_domain=range(4), level_of_measurement="ordinal")
        assert alphas[r] == pytest.approx(expected)


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the example with missing values:
# four coders, twelve units, values 1-5. Published: nominal 0.743, ordinal 0.815, interval 0.849.
K2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_alpha_on_the_published_worked_example():
    units = [[coder[u] - 1 for coder in K2011 if coder[u] is not None] for u in range(12)]
    estimate = agreement.alpha_estimate(units, 5)
    assert estimate.value == pytest.approx(0.815, abs=5e-4)
    assert estimate.n == 11  # unit 12 has one value: not pairable
    counts = agreement.value_counts(units, 5)
    pairable = counts[counts.sum(1) >= 2]
    identity = np.arange(len(pairable))[None, :]
    assert agreement.alpha_resampled(pairable, 5, identity)[0] == pytest.approx(0.815, abs=5e-4)


def test_undefined_statistics_say_so_instead_of_inventing_a_number():
    same = np.zeros(10, dtype=np.int64)
    result = agreement.judge_vs_humans(same, same, 3)
    assert result.kappa.value is None and result.rho.value is None and result.exact.value == 1.0
    assert agreement.judge_vs_humans(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 3).kappa.n == 0


def people(n_items: int, n_annotators: int, noise: float, seed: int):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n_items)
    humans = {
        i: {
            f"a{j}": int(np.clip(truth[i] + (rng.random() < noise) * rng.choice([-1, 1]), 0, 2))
            for j in range(n_annotators)
        }
        for i in range(n_items)
    }
    return truth, humans


def test_the_alternative_annotator_test_tells_a_stand_in_from_a_poor_judge():
    truth, humans = people(80, 3, 0.3, 1)
    good = {i: int(t) for i, t in enumerate(truth)}
    ceiling = agreement.alternative_annotator_test(good, humans, 3)
    assert ceiling.verdict == agreement.STAND_IN and ceiling.winning_rate == 1.0 and ceiling.annotators == 3
    rng = np.random.default_rng(2)
    poor = {i: int(rng.integers(0, 3)) for i in range(80)}
    ceiling = agreement.alternative_annotator_test(poor, humans, 3)
    assert ceiling.verdict == agreement.CANNOT and ceiling.winning_rate == 0.0


def test_not_enough_labels_says_what_it_would_take():
    truth, humans = people(80, 2, 0.3, 4)
    ceiling = agreement.alternative_annotator_test({i: int(t) for i, t in enumerate(truth)}, humans, 3)
    assert ceiling.verdict == agreement.NOT_ENOUGH and ceiling.annotators_needed == 1
    truth, humans = people(12, 3, 0.3, 4)
    ceiling = agreement.alternative_annotator_test({i: int(t) for i, t in enumerate(truth)}, humans, 3)
    assert ceiling.verdict == agreement.NOT_ENOUGH and ceiling.items_needed >= agreement.MIN_ITEMS
    assert "most shared items: 12" in ceiling.detail


def test_one_dimension_end_to_end():
    truth, humans = people(60, 3, 0.2, 9)
    judge = {i: [int(t), int(t), int(np.clip(t - 1, 0, 2))] for i, t in enumerate(truth)}
    result = agreement.dimension_agreement("Tone", ("Offensive", "Neutral", "Encouraging"), judge, humans)
    assert result.humans.n == 60 and 0.3 < result.humans.value < 1.0
    assert result.self_consistency.n == 60 and result.self_consistency.value < 1.0
    assert result.judge_vs_humans.kappa.n == 60
    assert all(j != h for _, j, h in result.disagreements)
