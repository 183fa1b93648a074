"""The realism card: its distances and intervals against independent computations, and its flags' rules
(each at its boundary, so a changed constant or comparison fails a test)."""

import os
from pathlib import Path

import numpy as np
import pytest

from evaluation.text.student_turns import ACTS, DialogueMeasures, TurnMeasures
from evaluation.tutoring import realism
from evaluation.tutoring.realism import Corpus, realism_card


def turn(words: int = 1, act: str = "answer_attempt", **flags) -> TurnMeasures:
    values = {
        "asks_question": False,
        "answer_attempt": act == "answer_attempt",
        "correct": None,
        "acknowledgement_only": act == "acknowledgement",
        "confusion": act == "confusion",
        "off_task": act == "off_task",
        "repeat": False,
    }
    values.update(flags)
    return TurnMeasures(words=words, characters=5 * words, act=act, **values)


def corpus(name: str, dialogues: list[list[TurnMeasures]]) -> Corpus:
    return Corpus(name, tuple(DialogueMeasures(f"{name}-{i}", tuple(ts), 1.0) for i, ts in enumerate(dialogues)))


def real_like(n: int, seed: int) -> Corpus:
    """Terse students: 1-3 words, a third acknowledgements, a few questions."""
    rng = np.random.default_rng(seed)
    dialogues = []
    for _ in range(n):
        ts = []
        for _ in range(int(rng.integers(1, 4))):
            act = ["answer_attempt", "answer_attempt", "acknowledgement"][int(rng.integers(0, 3))]
            ts.append(turn(int(rng.integers(1, 4)), act, asks_question=bool(rng.random() < 0.05)))
        dialogues.append(ts)
    return corpus("real", dialogues)


@pytest.fixture(scope="module")
def reference():
    return real_like(300, seed=1)


def test_wasserstein_and_jensen_shannon_match_their_definitions():
    a, b = [1, 1, 2, 5], [1, 3, 3]
    # W1 in one dimension is the area between the two empirical CDFs.
    grid = np.arange(0, 6)
    cdf_a = np.array([np.mean(np.array(a) <= x) for x in grid])
    cdf_b = np.array([np.mean(np.array(b) <= x) for x in grid])
    assert realism.wasserstein(a, b) == pytest.approx(np.abs(cdf_a - cdf_b)[:-1].sum())
    # Weighted, as the reference's resamples use it: weights are repeats.
    assert realism.wasserstein([1, 2], b, [3, 1]) == pytest.approx(realism.wasserstein([1, 1, 1, 2], b))
    p, q = np.array([0.5, 0.5, 0, 0, 0, 0]), np.array([0.25, 0.25, 0.5, 0, 0, 0])
    m = (p + q) / 2

    def kl(x, y):
        keep = x > 0
        return float(np.sum(x[keep] * np.log2(x[keep] / y[keep])))

    assert realism.jensen_shannon(p, q) == pytest.approx(np.sqrt((kl(p, m) + kl(q, m)) / 2))
    assert realism.act_shares(["question", "question", "other", "answer_attempt"]).tolist() == [
        0.25,
        0.5,
        0,
        0,
        0,
        0.25,
    ]
    assert list(ACTS) == ["answer_attempt", "question", "acknowledgement", "confusion", "off_task", "other"]


def test_share_interval_is_a_cluster_bootstrap(reference):
    """Against the procedure written out: resample dialogues with replacement, pool their turns, take the share;
    the 2.5th and 97.5th percentiles."""
    k, n = realism._per_dialogue_counts(reference, lambda t: t.acknowledgement_only)
    ours = realism.share_interval(k, n)
    rng = np.random.default_rng(5)
    shares = []
    for _ in range(4000):
        i = rng.integers(0, len(k), len(k))
        shares.append(k[i].sum() / n[i].sum())
    assert ours == pytest.approx(list(np.percentile(shares, [2.5, 97.5])), abs=0.012)
    # Clustered data: the interval is wider than one that treats turns as independent when dialogues differ.
    clustered = corpus("c", [[turn(act="acknowledgement")] * 6 if i % 2 else [turn()] * 6 for i in range(40)])
    kc, nc = realism._per_dialogue_counts(clustered, lambda t: t.acknowledgement_only)
    low, high = realism.share_interval(kc, nc)
    naive = 1.96 * np.sqrt(0.25 / 240)
    assert high - low > 2 * naive * 1.8


def test_median_interval_weighs_turns_by_their_dialogue_draws():
    rng = np.random.default_rng(2)
    values = rng.integers(0, 12, 60).astype(float)
    weights = rng.integers(0, 3, (50, 60))
    weights[:, 0] += 1
    expected = [np.median(np.repeat(values, w)) for w in weights]
    assert realism.weighted_medians(values, weights).tolist() == expected


def test_a_real_like_set_is_not_flagged(reference):
    card = realism_card(real_like(60, seed=9), reference)
    assert card.unrealistic is False, card.notes
    assert {m.name for m in card.measures} >= {
        "words_per_turn",
        "question_rate",
        "acknowledgement_rate",
        "act_distribution",
    }
    words = card.measure("words_per_turn")
    assert words.interval[0] <= words.value <= words.interval[1]
    assert words.rule.startswith("flagged when the Wasserstein-1 distance")


def test_long_turns_are_flagged_and_said_in_plain_words(reference):
    long_set = real_like(40, seed=4)
    long_set = corpus("chatty", [[turn(12 * t.words, t.act) for t in d.turns] for d in long_set.dialogues])
    card = realism_card(long_set, reference)
    words = card.measure("words_per_turn")
    assert words.flag is True
    assert card.unrealistic is True
    assert any(n.startswith("student turns ") and "x longer than real students'" in n for n in card.notes)
    assert "median 24 words against 2" in words.note


def test_the_length_rule_needs_the_ratio_of_means(reference):
    """A shift far beyond the reference's noise is flagged only when the mean is at least LENGTH_RATIO times."""
    base = real_like(200, seed=11)
    mean = np.mean([t.words for d in reference.dialogues for t in d.turns])

    def shifted(extra: float) -> Corpus:
        # add whole words to a share of turns so the mean grows by `extra` words
        dialogues = []
        rng = np.random.default_rng(3)
        for d in base.dialogues:
            whole, part = divmod(extra, 1)
            dialogues.append([turn(t.words + int(whole) + int(rng.random() < part), t.act) for t in d.turns])
        return corpus("shifted", dialogues)

    def words(c: Corpus):
        return realism._length_row("words_per_turn", "words", lambda t: t.words, c, reference, judged=True)

    below = words(shifted(0.4 * mean))
    above = words(shifted(0.6 * mean))
    assert below.distance > below.distance_interval[1]  # beyond the noise...
    assert below.extra["mean"] / below.extra["reference_mean"] < realism.LENGTH_RATIO
    assert below.flag is False  # ...but not 1.5x
    assert above.extra["mean"] / above.extra["reference_mean"] >= realism.LENGTH_RATIO
    assert above.flag is True


def test_the_share_rule_needs_the_interval_and_the_margin(reference):
    ref_rate = np.mean([t.asks_question for d in reference.dialogues for t in d.turns])

    def asking(rate: float, n: int) -> Corpus:
        rng = np.random.default_rng(8)
        return corpus(
            "asking", [[turn(2, asks_question=bool(rng.random() < rate)) for _ in range(3)] for _ in range(n)]
        )

    def questions(c: Corpus):
        return realism._share_row(
            "question_rate", "turns that ask a question", lambda t: t.asks_question, c, reference, True
        )

    small = questions(asking(ref_rate + 0.04, 1500))
    assert small.distance_interval[0] > 0  # a real difference...
    assert small.flag is False  # ...under MIN_SHARE_DIFFERENCE
    big = questions(asking(ref_rate + 0.3, 60))
    assert big.flag is True
    assert "turns that ask a question" in big.note
    # 3 of 21 turns ask (14% against about 5%), all in one dialogue of seven: a third of resamples miss it
    one_asker = [[turn(2, asks_question=True)] * 3] + [[turn(2)] * 3 for _ in range(6)]
    noisy = questions(corpus("one asker", one_asker))
    assert noisy.distance >= realism.MIN_SHARE_DIFFERENCE
    assert noisy.distance_interval[0] <= 0 <= noisy.distance_interval[1]
    assert noisy.flag is False  # over the margin, but the interval holds 0


def test_acts_unlike_real_students_are_flagged(reference):
    card = realism_card(corpus("polite", [[turn(2, "question")] * 3 for _ in range(30)]), reference)
    acts = card.measure("act_distribution")
    assert acts.flag is True
    assert acts.distance == pytest.approx(
        realism.jensen_shannon(realism.act_shares(["question"]), np.array(list(acts.reference_value.values()))),
        abs=1e-3,
    )


def test_a_small_set_is_not_judged_and_says_why(reference):
    card = realism_card(corpus("tiny", [[turn(30)] * 3] * 4), reference)
    assert card.unrealistic is None
    assert all(m.flag is None for m in card.measures)
    assert "at least 5 and 20 are needed" in card.notes[0]


def test_shipped_bridge_table_held_out_split_is_not_flagged():
    """Bridge's test split against the dialogues in no test split (the shipped table; no download)."""
    held_out = realism.builtin_corpus("bridge:test")
    rest = realism.builtin_corpus("bridge:not-test")
    assert not {d.dialogue for d in held_out.dialogues} & {d.dialogue for d in rest.dialogues}
    card = realism_card(held_out, rest)
    assert card.unrealistic is False, card.notes
    assert card.measure("words_per_turn").reference_value == 1.0
    assert realism.builtin_corpus("bridge").turns == 727
    with pytest.raises(LookupError, match="selects no dialogue"):
        realism.builtin_corpus("bridge:nosuch")


BRIDGE_DIR = os.environ.get("REALISM_BRIDGE_DIR", "")


@pytest.mark.skipif(
    not BRIDGE_DIR, reason="REALISM_BRIDGE_DIR (a folder with Bridge's train/validation/test.json) is not set"
)
def test_shipped_table_is_what_the_measures_give_on_bridge(tmp_path):
    from django.core.management import call_command

    files = [Path(BRIDGE_DIR) / f"{split}.json" for split in ("train", "validation", "test")]
    out = tmp_path / "bridge.csv"
    call_command("realism", "--build-reference", *map(str, files), "--out", str(out))
    assert out.read_text() == (realism.REFERENCE_DIR / "bridge.csv").read_text()


# --- against scipy, computed independently of realism.py's vectorised shortcuts ------------------------------------


def _plain_bootstrap(data, statistic, seed, confidence=realism.CONFIDENCE):
    """scipy.stats.bootstrap with a plain (not vectorised) statistic over dialogue indices: the procedure as
    written, drawing exactly the resamples realism.py draws (the same generator and seed)."""
    from scipy import stats

    result = stats.bootstrap(
        data,
        statistic,
        n_resamples=realism.RESAMPLES,
        confidence_level=confidence,
        method="percentile",
        vectorized=False,
        random_state=np.random.default_rng(seed),
    )
    return [round(float(result.confidence_interval.low), 4), round(float(result.confidence_interval.high), 4)]


def test_median_interval_is_scipys_cluster_bootstrap_of_the_pooled_median():
    rng = np.random.default_rng(4)
    dialogues = [rng.integers(1, 15, int(rng.integers(1, 6))).astype(float) for _ in range(37)]
    values = np.concatenate(dialogues)
    of_turn = np.concatenate([[i] * len(d) for i, d in enumerate(dialogues)]).astype(np.int64)

    def pooled_median(idx):
        return np.median(np.concatenate([dialogues[i] for i in idx]))

    expected = _plain_bootstrap((np.arange(len(dialogues)),), pooled_median, seed=77)
    assert realism.median_interval(values, of_turn, len(dialogues), seed=77) == expected


def test_share_intervals_are_scipys_cluster_bootstraps(reference):
    k, n = realism._per_dialogue_counts(reference, lambda t: t.acknowledgement_only)
    asking = real_like(50, seed=21)
    k2, n2 = realism._per_dialogue_counts(asking, lambda t: t.acknowledgement_only)

    def share(i):
        return k[i].sum() / n[i].sum()

    assert realism.share_interval(k, n, seed=5) == _plain_bootstrap((np.arange(len(k)),), share, seed=5)

    def difference(j, i):
        return k2[j].sum() / n2[j].sum() - k[i].sum() / n[i].sum()

    expected = _plain_bootstrap((np.arange(len(k2)), np.arange(len(k))), difference, 9, realism.FAMILY_CONFIDENCE)
    assert realism.share_difference_interval(k2, n2, k, n, confidence=realism.FAMILY_CONFIDENCE, seed=9) == expected
    # every resample the same (no turn counted acknowledges): the interval is the point, not NaN
    none = np.zeros(10)
    assert realism.share_interval(none, np.ones(10)) == [0.0, 0.0]


def test_distances_against_scipy_and_the_formulas():
    from scipy import stats
    from scipy.spatial import distance

    rng = np.random.default_rng(3)
    a, b = rng.integers(1, 30, 80), rng.integers(1, 6, 50)
    assert realism.wasserstein(a, b) == pytest.approx(stats.wasserstein_distance(a, b))
    # weights as repeats: the weighted distance of the distinct values is the unweighted one of the repeated sample
    w = rng.integers(0, 4, 80)
    assert realism.wasserstein(a, b, w) == pytest.approx(stats.wasserstein_distance(np.repeat(a, w), b))
    # KS: the largest gap between the two empirical CDFs, written out
    grid = np.union1d(a, b)
    gap = max(abs(np.mean(a <= x) - np.mean(b <= x)) for x in grid)
    assert realism.ks_statistic(a, b) == pytest.approx(gap) == pytest.approx(stats.ks_2samp(a, b).statistic)
    p = realism.act_shares(["answer_attempt"] * 5 + ["question"] * 2 + ["other"])
    q = realism.act_shares(["answer_attempt"] * 2 + ["acknowledgement"] * 3 + ["confusion"])
    m = (p + q) / 2
    by_entropy = np.sqrt(stats.entropy(m, base=2) - (stats.entropy(p, base=2) + stats.entropy(q, base=2)) / 2)
    assert realism.jensen_shannon(p, q) == pytest.approx(by_entropy) == pytest.approx(distance.jensenshannon(p, q, 2))
    assert realism.jensen_shannon(p, p) == 0.0
    disjoint = realism.act_shares(["off_task"])
    assert realism.jensen_shannon(realism.act_shares(["question"]), disjoint) == pytest.approx(1.0)
    assert realism.act_shares([]).tolist() == [0.0] * len(ACTS)


def test_noise_quantile_is_the_quantile_of_same_sized_resamples_as_scipy_measures_them(reference):
    """Written out: draw the reference's dialogues until the set's size in dialogues and turns, repeat their turns,
    take scipy's distance to the whole reference; the FAMILY_CONFIDENCE quantile of RESAMPLES of them."""
    from scipy import stats

    rv = np.asarray([t.words for d in reference.dialogues for t in d.turns], dtype=float)
    by_dialogue = [np.asarray([t.words for t in d.turns], dtype=float) for d in reference.dialogues]
    lengths = np.asarray([len(d) for d in by_dialogue])
    for size, turns in ((10, 0), (6, 60)):
        rng = np.random.default_rng(123)
        draw = max(size, int(np.ceil(turns / lengths.mean() * 1.5)) + 10)
        found = []
        for _ in range(realism.RESAMPLES):
            drawn = rng.integers(0, len(by_dialogue), size=draw)
            cut = max(size, int(np.argmax(np.cumsum(lengths[drawn]) >= turns)) + 1)
            sample = np.concatenate([by_dialogue[i] for i in drawn[:cut]])
            assert len(sample) >= turns
            found.append(stats.wasserstein_distance(sample, rv))
        expected = float(np.quantile(found, realism.FAMILY_CONFIDENCE))
        ours = realism.noise_quantile(reference, size, lambda w: realism.wasserstein(rv, rv, w), turns=turns, seed=123)
        assert ours == pytest.approx(expected, rel=1e-9)
