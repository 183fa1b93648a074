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


@pytest.fixture(autouse=True)
def no_kept_noise():
    """Each test works the reference's noise out itself (realism keeps it per process: a test that met the same
    reference and size earlier would otherwise hand it over, and a changed noise rule would go unseen)."""
    realism._NOISE.clear()
    yield
    realism._NOISE.clear()


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


# --- a whole card against a card worked out independently (scipy, written-out rules) -------------------------------


def rich(n: int, seed: int, *, ask=0.1, ack=0.25, confused=0.1, off=0.05, repeat=0.1, right=0.6, longer=1) -> Corpus:
    """Dialogues of 2-5 turns with every measure in play: acts by the shares given, answers right or wrong, repeats,
    a type-token ratio per dialogue."""
    rng = np.random.default_rng(seed)
    dialogues = []
    for i in range(n):
        ts = []
        for _ in range(int(rng.integers(2, 6))):
            roll = rng.random()
            act = (
                "acknowledgement"
                if roll < ack
                else "confusion"
                if roll < ack + confused
                else "off_task"
                if roll < ack + confused + off
                else "question"
                if roll < ack + confused + off + ask
                else ["answer_attempt", "answer_attempt", "other"][int(rng.integers(0, 3))]
            )
            correct = bool(rng.random() < right) if act == "answer_attempt" else None
            ts.append(
                turn(
                    longer * int(rng.integers(1, 5)),
                    act,
                    asks_question=act == "question" or bool(rng.random() < 0.03),
                    correct=correct,
                    repeat=bool(rng.random() < repeat),
                )
            )
        dialogues.append(DialogueMeasures(f"r{seed}-{i}", tuple(ts), round(float(rng.uniform(0.4, 1.0)), 4)))
    return Corpus(f"rich-{seed}", tuple(dialogues))


def _written_out_noise(reference: Corpus, size: int, turns: int, seed: int, distance) -> float:
    """The reference's own noise, as docs/tutoring.md says it: resample its dialogues to the set's size."""
    by_dialogue = [list(d.turns) for d in reference.dialogues]
    lengths = np.asarray([len(d) for d in by_dialogue])
    rng = np.random.default_rng(seed)
    draw = max(size, int(np.ceil(turns / lengths.mean() * 1.5)) + 10)
    found = []
    for _ in range(realism.RESAMPLES):
        drawn = rng.integers(0, len(by_dialogue), size=draw)
        enough = np.cumsum(lengths[drawn]) >= turns
        cut = max(size, int(np.argmax(enough)) + 1 if enough.any() else draw)
        found.append(distance([t for i in drawn[:cut] for t in by_dialogue[i]]))
    return float(np.quantile(found, realism.FAMILY_CONFIDENCE))


def _pooled_median(by_dialogue):
    return lambda i: np.median(np.concatenate([by_dialogue[k] for k in i]))


def _pooled_share(k, n):
    return lambda i: k[i].sum() / n[i].sum()


def _share_gap(k1, n1, k2, n2):
    return lambda i, j: k1[i].sum() / n1[i].sum() - k2[j].sum() / n2[j].sum()


def _js(p, q):
    from scipy import stats

    m = (p + q) / 2
    return float(np.sqrt(stats.entropy(m, base=2) - (stats.entropy(p, base=2) + stats.entropy(q, base=2)) / 2))


def _length_expected(s: Corpus, r: Corpus, get: str, judged: bool) -> dict:
    """Unit and attribute are one word here: words, characters."""
    from scipy import stats

    sd = [np.asarray([getattr(t, get) for t in d.turns], dtype=float) for d in s.dialogues]
    rd = [np.asarray([getattr(t, get) for t in d.turns], dtype=float) for d in r.dialogues]
    sv, rv = np.concatenate(sd), np.concatenate(rd)
    dist = stats.wasserstein_distance(sv, rv)
    row = {
        "value": float(np.median(sv)),
        "reference_value": float(np.median(rv)),
        "interval": _plain_bootstrap((np.arange(len(sd)),), _pooled_median(sd), realism.SEED),
        "reference_interval": _plain_bootstrap((np.arange(len(rd)),), _pooled_median(rd), realism.SEED),
        "distance": round(dist, 4),
        "flag": None,
        "distance_interval": None,
    }
    if judged:
        noise = _written_out_noise(
            r,
            len(s.dialogues),
            s.turns,
            realism.SEED + 1,
            lambda ts: stats.wasserstein_distance([getattr(t, get) for t in ts], rv),
        )
        ratio = sv.mean() / rv.mean()
        row["flag"] = bool(dist > noise and (ratio >= 1.5 or ratio <= 1 / 1.5))
        row["distance_interval"] = [0.0, round(noise, 4)]
        if row["flag"]:
            s_med, r_med = np.median(sv), np.median(rv)
            times = s_med / r_med if ratio > 1 else r_med / s_med
            row["note"] = (
                f"student turns {times:.1f}x {'longer' if ratio > 1 else 'shorter'} than real students' (median "
                f"{s_med:g} {get} against {r_med:g}; mean {sv.mean():.1f} against {rv.mean():.1f})"
            )
    return row


def _share_expected(s: Corpus, r: Corpus, what: str, get, judged: bool) -> dict:
    def counts(c):
        k = np.asarray([sum(bool(get(t)) for t in d.turns if get(t) is not None) for d in c.dialogues], float)
        n = np.asarray([sum(get(t) is not None for t in d.turns) for d in c.dialogues], float)
        return k, n

    (k1, n1), (k2, n2) = counts(s), counts(r)
    row: dict = {"flag": None, "distance_interval": None}
    if not (n1.sum() and n2.sum()):
        missing = "the set" if not n1.sum() else "the reference"
        return row | {"distance": None, "rule_starts": "not compared: " + missing}
    value, ref = k1.sum() / n1.sum(), k2.sum() / n2.sum()
    row |= {
        "value": round(value, 4),
        "reference_value": round(ref, 4),
        "distance": round(value - ref, 4),
        "interval": _plain_bootstrap((np.arange(len(k1)),), _pooled_share(k1, n1), realism.SEED),
        "reference_interval": _plain_bootstrap((np.arange(len(k2)),), _pooled_share(k2, n2), realism.SEED),
    }
    if judged:
        lo, hi = _plain_bootstrap(
            (np.arange(len(k1)), np.arange(len(k2))),
            _share_gap(k1, n1, k2, n2),
            realism.SEED,
            realism.FAMILY_CONFIDENCE,
        )
        row["distance_interval"] = [lo, hi]
        row["flag"] = bool((lo > 0 or hi < 0) and abs(value - ref) >= 0.05)
        if row["flag"]:
            row["note"] = f"{what}: {value:.0%} against {ref:.0%} for real students"
    return row


def _act_intervals_expected(c: Corpus) -> dict:
    n = np.asarray([len(d.turns) for d in c.dialogues], float)
    found = {}
    for i, a in enumerate(ACTS):
        k = np.asarray([sum(t.act == a for t in d.turns) for d in c.dialogues], float)
        found[a] = _plain_bootstrap((np.arange(len(k)),), _pooled_share(k, n), realism.SEED + 10 + i)
    return found


def _acts_expected(s: Corpus, r: Corpus, judged: bool) -> dict:
    sa = [t.act for d in s.dialogues for t in d.turns]
    ra = [t.act for d in r.dialogues for t in d.turns]
    p = np.asarray([sa.count(a) / len(sa) for a in ACTS])
    q = np.asarray([ra.count(a) / len(ra) for a in ACTS])
    js = _js(p, q)
    row = {
        "value": {a: round(float(x), 4) for a, x in zip(ACTS, p, strict=True)},
        "reference_value": {a: round(float(x), 4) for a, x in zip(ACTS, q, strict=True)},
        "interval": _act_intervals_expected(s),
        "reference_interval": _act_intervals_expected(r),
        "distance": round(js, 4),
        "flag": None,
        "distance_interval": None,
    }
    if judged:

        def js_of(ts):
            return _js(np.asarray([sum(t.act == a for t in ts) / len(ts) for a in ACTS]), q)

        noise = _written_out_noise(r, len(s.dialogues), s.turns, realism.SEED + 2, js_of)
        row["flag"] = bool(js > noise and js >= 0.05)
        row["distance_interval"] = [0.0, round(noise, 4)]
        if row["flag"]:
            gaps = sorted(zip(ACTS, p - q, strict=True), key=lambda x: -abs(x[1]))[:2]
            row["note"] = (
                "dialogue acts unlike real students' ("
                + ", ".join(
                    f"{a.replace('_', ' ')} {p[ACTS.index(a)]:.0%} against {q[ACTS.index(a)]:.0%}" for a, _ in gaps
                )
                + ")"
            )
    return row


def expected_card(s: Corpus, r: Corpus) -> dict:
    """Every figure and flag of the card, from scipy and the rules as docs/tutoring.md states them."""
    judged = len(s.dialogues) >= 5 and s.turns >= 20
    out = {
        "words_per_turn": _length_expected(s, r, "words", judged),
        "characters_per_turn": _length_expected(s, r, "characters", judged),
    }
    for name, (what, get) in realism.SHARES.items():
        out[name] = _share_expected(s, r, what, get, judged)
    out["act_distribution"] = _acts_expected(s, r, judged)
    a = np.asarray([d.type_token_ratio for d in s.dialogues])
    b = np.asarray([d.type_token_ratio for d in r.dialogues])
    out["lexical_diversity"] = {
        "value": round(a.mean(), 4),
        "reference_value": round(b.mean(), 4),
        "interval": _plain_bootstrap((a,), np.mean, realism.SEED + 3),
        "reference_interval": _plain_bootstrap((b,), np.mean, realism.SEED + 3),
        "distance": round(a.mean() - b.mean(), 4),
        "flag": None,
        "distance_interval": None,
    }
    return out


def _close(got, want) -> bool:
    if isinstance(want, dict):
        return set(got) == set(want) and all(_close(got[k], want[k]) for k in want)
    return got == pytest.approx(want, abs=1e-4)


@pytest.mark.parametrize(
    ("make", "longer", "unrealistic"),
    [
        (lambda: rich(40, seed=2), 1, False),  # like the reference
        (lambda: rich(30, seed=3, ask=0.4, ack=0.02, confused=0.0, repeat=0.4, right=0.95, longer=3), 1, True),
        (lambda: rich(12, seed=5), 3, True),  # shorter turns than the reference's
        (lambda: rich(5, seed=4), 1, None),  # 17 turns: shown, not judged
    ],
    ids=["alike", "unlike", "shorter", "too-small"],
)
def test_the_whole_card_matches_one_worked_out_independently(make, longer, unrealistic):
    reference = rich(120, seed=1, longer=longer)
    s = make()
    card = realism_card(s, reference)
    expected = expected_card(s, reference)
    assert [m.name for m in card.measures] == list(expected)
    assert (card.turns, card.dialogues, card.reference_turns, card.reference_dialogues) == (
        s.turns,
        len(s.dialogues),
        reference.turns,
        len(reference.dialogues),
    )
    for m in card.measures:
        want = expected[m.name]
        for key in ("value", "reference_value", "interval", "reference_interval", "distance"):
            if key in want:
                assert _close(getattr(m, key), want[key]), (m.name, key, getattr(m, key), want[key])
        assert m.flag == want["flag"], m.name
        if want["distance_interval"] is None:
            assert m.distance_interval is None, m.name
        else:
            assert m.distance_interval == want["distance_interval"], m.name
        assert m.note == want.get("note", ""), m.name
        if "rule_starts" in want:
            assert m.rule.startswith(want["rule_starts"]), m.name
    assert card.unrealistic is unrealistic
    if unrealistic is not None:
        assert card.notes == tuple(m.note for m in card.measures if m.flag)
        assert all(card.notes) and (len(card.notes) > 0) == unrealistic


def test_the_smallest_sets_judged_and_not(reference):
    """MIN_DIALOGUES dialogues and MIN_TURNS turns are judged; one fewer of either is not."""
    five_by_four = corpus("five", [[turn(2)] * 4 for _ in range(5)])
    assert realism_card(five_by_four, reference).unrealistic is not None
    four_by_six = corpus("four", [[turn(2)] * 6 for _ in range(4)])
    assert realism_card(four_by_six, reference).unrealistic is None
    nineteen = corpus("nineteen", [[turn(2)] * 4 for _ in range(4)] + [[turn(2)] * 3])
    card = realism_card(nineteen, reference)
    assert card.unrealistic is None and card.notes == (
        "nineteen has 5 dialogue(s) and 19 student turn(s): at least 5 and 20 are needed to judge",
    )
    empty = realism_card(corpus("empty", [[] for _ in range(6)]), reference)
    assert (empty.unrealistic, empty.measures, empty.turns, empty.dialogues) == (None, (), 0, 6)
    with pytest.raises(ValueError, match="holds no student turns"):
        realism_card(reference, corpus("none", [[]]))


def test_shares_the_reference_or_the_set_cannot_count_are_not_compared(reference):
    checked = rich(20, seed=6)  # its answers are checked right or wrong; the reference's are not
    row = realism._share_row("correct_rate", "right answers", lambda t: t.correct, checked, reference, judged=True)
    k = sum(t.correct is True for d in checked.dialogues for t in d.turns)
    n = sum(t.correct is not None for d in checked.dialogues for t in d.turns)
    assert row.value == pytest.approx(k / n, abs=1e-4) and row.reference_value is None
    assert row.interval == _plain_bootstrap(
        (np.arange(20),),
        lambda i: (
            sum(sum(t.correct is True for t in checked.dialogues[x].turns) for x in i)
            / sum(sum(t.correct is not None for t in checked.dialogues[x].turns) for x in i)
        ),
        realism.SEED,
    )
    assert (row.flag, row.distance, row.distance_interval, row.reference_interval) == (None, None, None, None)
    assert row.rule == "not compared: the reference has no right answers"
    assert row.extra == {"counted": n, "reference_counted": 0}
    back = realism._share_row("correct_rate", "right answers", lambda t: t.correct, reference, checked, judged=True)
    assert back.rule == "not compared: the set has no right answers" and back.value is None and back.interval is None
    assert back.reference_value == pytest.approx(k / n, abs=1e-4) and back.reference_interval == row.interval


def test_act_measures_across_two_classifiers_are_shown_not_judged(reference):
    by_llm = Corpus("by llm", rich(30, seed=3).dialogues, acts_by="llm:m")
    card = realism_card(by_llm, reference)
    assert (card.acts_by, card.reference_acts_by) == ("llm:m", "rules")
    for m in card.measures:
        if m.name in realism.ACT_MEASURES:
            assert m.flag is None and m.rule.startswith(
                "not judged: the set's acts are by llm:m, the reference's by rules"
            )
        elif m.name != "lexical_diversity":
            assert m.flag is not None and not m.rule.startswith("not judged"), m.name
    same = realism_card(Corpus("rules", by_llm.dialogues), reference)
    assert same.measure("act_distribution").flag is not None
    assert same.measure("answer_attempt_rate").flag is not None


# --- the reference tables and the grounding fitted to them -----------------------------------------------------------


def test_a_table_reads_back_what_was_written():
    rows = [
        realism.TableDialogue(d, splits, error)
        for d, splits, error in zip(
            rich(12, seed=8).dialogues, [("train",), ("train", "test"), ()] * 4, realism.BRIDGE_ERRORS * 2, strict=False
        )
    ]
    text = realism.table_text(rows)
    assert text.splitlines()[0] == ",".join(realism.TABLE_COLUMNS)
    assert len(text.splitlines()) == 1 + sum(len(r.measures.turns) for r in rows)
    assert realism.table_read(text) == rows
    assert {t.correct for r in rows for t in r.measures.turns} == {None, True, False}  # all three survive the trip
    with pytest.raises(ValueError, match="a reference table has the columns dialogue, splits"):
        realism.table_read("dialogue,words\nx,1\n")


def test_the_shipped_tables_parts_are_the_rows_the_csv_holds():
    import csv

    lines = list(csv.DictReader((realism.REFERENCE_DIR / "bridge.csv").open(encoding="utf-8")))
    whole = realism.builtin_corpus("bridge")
    assert whole.turns == len(lines) == 727 and len(whole.dialogues) == len({r["dialogue"] for r in lines}) == 459
    assert sum(t.words for d in whole.dialogues for t in d.turns) == sum(int(r["words"]) for r in lines)
    assert sum(t.acknowledgement_only for d in whole.dialogues for t in d.turns) == sum(
        r["acknowledgement_only"] == "1" for r in lines
    )
    assert [t.act for d in whole.dialogues for t in d.turns] == [r["act"] for r in lines]

    def dialogues(keep):
        return {r["dialogue"] for r in lines if keep(r)}

    assert {d.dialogue for d in realism.builtin_corpus("bridge:test").dialogues} == dialogues(
        lambda r: "test" in r["splits"].split(";")
    )
    assert {d.dialogue for d in realism.builtin_corpus("bridge:not-test").dialogues} == dialogues(
        lambda r: "test" not in r["splits"].split(";")
    )
    guess = realism.builtin_corpus("bridge:error=guess")
    assert {d.dialogue for d in guess.dialogues} == dialogues(lambda r: r["error"] == "guess")
    assert guess.name == "bridge:error=guess" and realism.is_builtin("bridge:error=guess")
    assert not realism.is_builtin("mine") and realism.is_builtin("bridge")
    with pytest.raises(LookupError, match="parts: test, train, validation, not-<split>, error=<"):
        realism.builtin_corpus("bridge:error=nothing")
    with pytest.raises(KeyError):
        realism.builtin_table("nosuch")
    assert realism.bridge_error(" Guess ") == "guess" and realism.bridge_error("no error") == "other"
    assert realism.bridge_error(None) == "other"


def test_grounding_is_fitted_from_the_reference_turns_by_hand():
    ts = [
        turn(1, "acknowledgement"),
        turn(3, "question", asks_question=True),
        turn(2, "confusion"),
        turn(4),
        turn(2, "other"),
        turn(5, "off_task", asks_question=True),
        turn(1),
        turn(2),
    ]
    fitted = realism.grounding_fit(corpus("hand", [ts[:3], ts[3:]]))
    assert fitted == {
        "verbosity": 2,  # median of 1 1 2 2 2 3 4 5
        "question_rate": 0.25,  # 2 of 8
        "acknowledgement_rate": 0.125,  # 1 of 8
        "cooperation": 0.625,  # 5 of 8: not confusion, off-task or other
        "source": "hand",
    }
    assert realism.grounding_fit(corpus("one", [[turn(0, "other")]]))["verbosity"] == 1  # at least one word
    assert realism.grounding_fit(corpus("odd", [[turn(3), turn(4)]]))["verbosity"] == 4  # round(3.5): to even
    with pytest.raises(ValueError, match="holds no student turns to fit"):
        realism.grounding_fit(corpus("none", [[]]))


def test_stored_messages_are_measured_with_answers_checked():
    stored = [
        {"role": "tutor", "content": "What is 3/8 + 2/8?"},
        {"role": "student", "content": "5/8"},
        {"role": "tutor", "content": "What is 3/8 + 2/8?"},
        {"role": "student", "content": "4/8"},
        {"role": "tutor", "content": "Nice. Any questions?"},
        {"role": "student", "content": "ok"},
    ]
    pairs = realism.message_pairs(stored)
    assert pairs[0] == ("tutor", "What is 3/8 + 2/8?") and realism.message_pairs(pairs) == pairs
    measured = realism.measure_messages(stored, "d1")
    assert measured.dialogue == "d1"
    assert [(t.act, t.correct, t.words) for t in measured.turns] == [
        ("answer_attempt", True, 1),
        ("answer_attempt", False, 1),
        ("acknowledgement", None, 1),
    ]
    assert realism.answer_check("What is 3/8 + 2/8?", "5/8") is True
    assert realism.answer_check("Tell me about your day", "5/8") is None
    by_other = realism.measure_messages(stored, "d1", lambda tutor, text: "question")
    assert [t.act for t in by_other.turns] == ["question"] * 3 and by_other.turns[0].correct is None
    card = realism.Card("s", "r", 0, 4, 10, 3, (), None, ("s has 4 dialogue(s)",))
    assert card.summary() == "not judged against r: s has 4 dialogue(s)"
    assert realism.Card("s", "r", 9, 9, 9, 9, (), False, ()).summary().startswith("within what real students show (r)")
    flagged = realism.Card("s", "r", 9, 9, 9, 9, (), True, ("a", "b"))
    assert flagged.summary() == "unrealistic against r: a; b" and flagged.as_dict()["notes"] == ("a", "b")


# --- the rules at their boundaries, and what a note's card leaves out -------------------------------------------------


def flat(name: str, words: int, n: int = 8, per: int = 4, **flags) -> Corpus:
    return corpus(name, [[turn(words, **flags) for _ in range(per)] for _ in range(n)])


def test_the_length_rule_at_its_ratios():
    """Constant references have no noise: any distance is beyond it, and the ratio of means decides."""

    def words_flag(s: Corpus, r: Corpus) -> bool | None:
        return realism_card(s, r).measure("words_per_turn").flag

    assert words_flag(flat("s", 3), flat("r", 2)) is True  # 1.5x exactly
    assert realism_card(flat("s", 3), flat("r", 2)).measure("words_per_turn").note == (
        "student turns 1.5x longer than real students' (median 3 words against 2; mean 3.0 against 2.0)"
    )
    assert words_flag(flat("s", 2), flat("r", 3)) is True  # 1/1.5 exactly
    assert words_flag(flat("s", 4), flat("r", 5)) is False  # 0.8x: beyond the noise, not beyond the ratios
    assert words_flag(flat("s", 7), flat("r", 5)) is False  # 1.4x
    assert words_flag(flat("s", 2), flat("r", 2)) is False  # no distance at all
    silent = realism_card(flat("s", 2), flat("r", 0)).measure("words_per_turn")
    assert silent.flag is True and silent.note.startswith("student turns infx longer")  # real turns of no words
    short = realism_card(flat("s", 2), flat("r", 3)).measure("words_per_turn")
    assert short.note == (
        "student turns 1.5x shorter than real students' (median 2 words against 3; mean 2.0 against 3.0)"
    )
    assert short.extra == {"mean": 2.0, "reference_mean": 3.0, "ks": 1.0} and short.distance_name == "wasserstein"


def test_the_share_rule_at_its_edges():
    none = flat("r", 2)  # no turn asks

    def questions(s: Corpus, r: Corpus = none):
        return realism_card(s, r).measure("question_rate")

    # one question in each of 20 dialogues of 20 turns: 5% in every resample, against none
    exact = corpus("exact", [[turn(2, asks_question=True)] + [turn(2)] * 19 for _ in range(20)])
    row = questions(exact)
    assert row.distance == 0.05 and row.distance_interval == [0.05, 0.05] and row.flag is True
    assert row.distance_name == "difference"
    # the interval's lower end is exactly 0 (a resample of only the three silent dialogues): not flagged
    edge = corpus("edge", [[turn(2, asks_question=True)] * 4] * 2 + [[turn(2)] * 4] * 3)
    row = questions(edge)
    assert row.distance_interval[0] == 0.0 and row.distance == 0.4 and row.flag is False
    # and the upper end exactly 0, against a reference where every turn asks
    every = flat("every", 2, asks_question=True)
    row = questions(edge, every)
    assert row.distance_interval[1] == 0.0 and row.distance == -0.6 and row.flag is False


def test_the_act_rule_names_the_two_largest_gaps(reference):
    card = realism_card(
        corpus("askers", [[turn(2, "question")] * 3 + [turn(2, "confusion")] for _ in range(30)]), reference
    )
    acts = card.measure("act_distribution")
    assert acts.flag is True and acts.distance_name == "jensen_shannon"
    q = acts.reference_value
    assert acts.note == (
        f"dialogue acts unlike real students' (question 75% against {q['question']:.0%}, answer attempt 0% against "
        f"{q['answer_attempt']:.0%})"
    )


def test_kept_noise_is_the_noise_and_is_kept_per_reference_and_size(reference):
    rv = np.asarray([t.words for d in reference.dialogues for t in d.turns], dtype=float)

    def distance(w):
        return realism.wasserstein(rv, rv, w)

    fresh = realism.noise_quantile(reference, 12, distance, turns=30, seed=4)
    assert realism.kept_noise(reference, "words", 12, 30, 4, distance) == fresh
    assert realism.kept_noise(reference, "words", 12, 30, 4, lambda w: -1.0) == fresh  # kept: not worked out again
    assert realism.kept_noise(reference, "words", 13, 30, 4, lambda w: -1.0) == -1.0  # another size is
    other = real_like(300, seed=2)
    assert realism.kept_noise(other, "words", 12, 30, 4, lambda w: -2.0) == -2.0  # and another reference
    assert realism.noise_quantile(reference, 12, distance, seed=4) == realism.noise_quantile(
        reference, 12, distance, turns=0, seed=4
    )


def test_noise_over_a_reference_with_empty_dialogues():
    """Dialogues without a student turn count as drawn, hold nothing, and may close the reference."""
    from scipy import stats

    gappy = corpus("gappy", [[turn(1)], [], [turn(3), turn(2)], [], []])
    rv = np.asarray([1.0, 3.0, 2.0])
    ours = realism.noise_quantile(gappy, 4, lambda w: realism.wasserstein(rv, rv, w), turns=6, seed=8)
    by_dialogue = [[1.0], [], [3.0, 2.0], [], []]
    lengths = np.asarray([1, 0, 2, 0, 0])
    rng = np.random.default_rng(8)
    draw = max(4, int(np.ceil(6 / lengths.mean() * 1.5)) + 10)
    found = []
    for _ in range(realism.RESAMPLES):
        drawn = rng.integers(0, 5, size=draw)
        enough = np.cumsum(lengths[drawn]) >= 6
        cut = max(4, int(np.argmax(enough)) + 1 if enough.any() else draw)
        sample = [x for i in drawn[:cut] for x in by_dialogue[i]]
        found.append(stats.wasserstein_distance(sample, rv) if sample else np.nan)
    assert ours == pytest.approx(float(np.quantile(found, realism.FAMILY_CONFIDENCE)), rel=1e-9)


def test_a_note_card_leaves_out_only_the_shown_intervals():
    reference = rich(120, seed=1)
    s = rich(20, seed=12, ask=0.4)
    full = realism_card(s, reference)
    bare = realism_card(s, reference, intervals=False)
    assert (bare.unrealistic, bare.notes) == (full.unrealistic, full.notes)
    for a, b in zip(full.measures, bare.measures, strict=True):
        assert a.interval is not None and a.reference_interval is not None, a.name
        assert b.interval is None and b.reference_interval is None, b.name
        assert (a.value, a.distance, a.distance_interval, a.flag, a.note) == (
            b.value,
            b.distance,
            b.distance_interval,
            b.flag,
            b.note,
        )
