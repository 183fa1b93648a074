"""The realism card: a set of student turns (a persona's simulated runs, an imported set) against a
reference corpus of real students, measure by measure, with intervals, distances and a flag whose rule
is stated.

The unit of resampling is the dialogue: turns of one student are not independent, so every interval is
a percentile cluster bootstrap (scipy.stats.bootstrap over dialogue indices; Field & Welsh 2007, "Bootstrapping
clustered data"). Rules (m = the number of flaggable measures, a Bonferroni family of FAMILY_ALPHA):
- a share (question rate, acknowledgement rate, ...): flagged when the (1 - FAMILY_ALPHA/m) bootstrap interval
  of the difference of shares (set - reference, both resampled by dialogue) excludes 0 and the difference is
  at least MIN_SHARE_DIFFERENCE;
- a distribution (words and characters per turn: Wasserstein-1 distance; the act distribution: Jensen-Shannon
  distance, base 2): flagged when the set is farther from the reference than the (1 - FAMILY_ALPHA/m) quantile
  of the distances of same-sized dialogue resamples of the reference itself (the reference's own sampling
  noise at the set's size in dialogues and turns), and, for lengths, when the set's mean is at least LENGTH_RATIO times the
  reference's or at most its inverse; for acts, when the distance is at least MIN_ACT_DISTANCE;
- lexical diversity (type-token ratio per dialogue) is shown, never flagged: it falls with a dialogue's
  length, and reference excerpts are shorter than most runs.
A set with fewer than MIN_DIALOGUES dialogues or MIN_TURNS student turns has no flags, and says why.
The acts of each side come from the rules or from an LLM (student_turns.ActClassifier); the card names both
(`acts_by`, `reference_acts_by`). Where they differ, the measures read from the act (ACT_MEASURES) are shown but
not judged: a difference between two classifiers is not a difference between students.
"""

import csv
import io
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.text.student_turns import ACTS, DialogueMeasures, TurnMeasures, measure_dialogue
from evaluation.tutoring.exercises import answer_matches, solve

FAMILY_ALPHA = 0.05
CONFIDENCE = 0.95
"""The level of the intervals shown beside each value."""
RESAMPLES = 1000
SEED = 20260
"""The bootstrap's seed: the same sets give the same card."""
MIN_SHARE_DIFFERENCE = 0.05
LENGTH_RATIO = 1.5
MIN_ACT_DISTANCE = 0.05
MIN_DIALOGUES = 5
MIN_TURNS = 20

SHARES: dict[str, tuple[str, Callable[[Any], bool | None]]] = {
    "question_rate": ("turns that ask a question", lambda t: t.asks_question),
    "answer_attempt_rate": ("turns that attempt an answer", lambda t: t.answer_attempt),
    "acknowledgement_rate": ("acknowledgement-only turns", lambda t: t.acknowledgement_only),
    "confusion_rate": ("turns that express confusion", lambda t: t.confusion),
    "off_task_rate": ("off-task turns", lambda t: t.off_task),
    "repeat_rate": ("turns that repeat an earlier one", lambda t: t.repeat),
    "correct_rate": ("right answers among checked answer attempts", lambda t: t.correct),
}
"""Share measures: name -> (what is counted, the turn's value; None leaves the turn out)."""
LENGTHS: dict[str, tuple[str, Callable[[Any], int]]] = {
    "words_per_turn": ("words", lambda t: t.words),
    "characters_per_turn": ("characters", lambda t: t.characters),
}
ACT_MEASURES = ("answer_attempt_rate", "correct_rate", "act_distribution")
"""The measures read from a turn's dialogue act (the rest are read from its words by rules alone)."""
FLAGGABLE = len(SHARES) + len(LENGTHS) + 1
"""The Bonferroni family: every share, every length and the act distribution."""
FAMILY_CONFIDENCE = 1 - FAMILY_ALPHA / FLAGGABLE


@dataclass(frozen=True)
class Corpus:
    """A set of dialogues' student turns, measured: the side under test or the reference."""

    name: str
    dialogues: tuple[DialogueMeasures, ...]
    description: str = ""
    acts_by: str = "rules"
    """What gave the turns' acts: "rules", or "llm:provider/model" (student_turns.ActClassifier.label)."""

    @property
    def turns(self) -> int:
        return sum(len(d.turns) for d in self.dialogues)


@dataclass(frozen=True)
class MeasureRow:
    """One measure of the card, the set beside the reference."""

    name: str
    value: Any
    """The set's value: a median (lengths), a share, a mean ratio, or {act: share}."""
    interval: Any
    """Its 95% cluster-bootstrap interval [lo, hi] ({act: [lo, hi]} for the act distribution)."""
    reference_value: Any
    reference_interval: Any
    distance: float | None
    """Wasserstein-1 (lengths), difference of shares (set - reference), Jensen-Shannon distance (acts)."""
    distance_name: str
    distance_interval: list[float] | None
    """For a difference of shares: its family-wise interval; for a distribution: [0, the reference's own
    noise at the set's size] (the distance a set of real students this size reaches)."""
    flag: bool | None
    """True: outside what the reference shows; None: not judged (not enough data, or never flagged)."""
    rule: str
    note: str = ""
    """In plain words, when flagged: "student turns 6.0x longer than real students' (median 12 words against 2)"."""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Card:
    """A set's realism card against one reference."""

    name: str
    reference: str
    turns: int
    dialogues: int
    reference_turns: int
    reference_dialogues: int
    measures: tuple[MeasureRow, ...]
    unrealistic: bool | None
    """True when any measure is flagged; None when the set is too small to judge."""
    notes: tuple[str, ...]
    """The flagged measures in plain words, or why nothing was judged."""
    acts_by: str = "rules"
    """What gave the set's dialogue acts: "rules", or "llm:provider/model"."""
    reference_acts_by: str = "rules"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def measure(self, name: str) -> MeasureRow:
        return next(m for m in self.measures if m.name == name)

    def summary(self) -> str:
        """One line: flagged measures, or realistic, or not judged."""
        if self.unrealistic is None:
            return f"not judged against {self.reference}: " + "; ".join(self.notes)
        if not self.unrealistic:
            return f"within what real students show ({self.reference}) on every flagged measure"
        return f"unrealistic against {self.reference}: " + "; ".join(self.notes)


# --- arrays -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Arrays:
    """Per-turn values and each turn's dialogue index, for resampling by dialogue."""

    dialogue_of_turn: np.ndarray
    dialogues: int

    @classmethod
    def of(cls, corpus: Corpus) -> "_Arrays":
        index = [i for i, d in enumerate(corpus.dialogues) for _ in d.turns]
        return cls(np.asarray(index, dtype=np.int64), len(corpus.dialogues))


def _values(corpus: Corpus, get: Callable[[Any], Any]) -> list[Any]:
    return [get(t) for d in corpus.dialogues for t in d.turns]


def _per_dialogue_counts(corpus: Corpus, get: Callable[[Any], bool | None]) -> tuple[np.ndarray, np.ndarray]:
    """(successes, counted turns) per dialogue; a turn whose value is None is not counted."""
    k = np.zeros(len(corpus.dialogues))
    n = np.zeros(len(corpus.dialogues))
    for i, d in enumerate(corpus.dialogues):
        for t in d.turns:
            value = get(t)
            if value is not None:
                n[i] += 1
                k[i] += bool(value)
    return k, n


def _ratio(k: np.ndarray, n: np.ndarray) -> np.ndarray | float:
    with np.errstate(invalid="ignore", divide="ignore"):
        return k / n


def _interval(result: Any) -> list[float]:
    ci = result.confidence_interval
    low, high = float(ci.low), float(ci.high)
    if np.isnan(low) or np.isnan(high):  # every resample gave the same value (all or none of the turns count)
        low = high = float(np.nanmedian(result.bootstrap_distribution))
    return [round(low, 4), round(high, 4)]


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., Any], confidence: float, seed: int) -> Any:
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)  # handled in _interval
        return stats.bootstrap(
            data,
            statistic,
            n_resamples=RESAMPLES,
            confidence_level=confidence,
            method="percentile",
            vectorized=True,
            random_state=np.random.default_rng(seed),
        )


def share_interval(k: np.ndarray, n: np.ndarray, *, confidence: float = CONFIDENCE, seed: int = SEED) -> list[float]:
    """The cluster-bootstrap percentile interval of sum(k)/sum(n), resampling dialogues."""
    idx = np.arange(len(k))

    def statistic(i: np.ndarray, axis: int = -1) -> Any:
        return _ratio(k[i].sum(axis=axis), n[i].sum(axis=axis))

    return _interval(_bootstrap((idx,), statistic, confidence, seed))


def share_difference_interval(
    k1: np.ndarray, n1: np.ndarray, k2: np.ndarray, n2: np.ndarray, *, confidence: float, seed: int = SEED
) -> list[float]:
    """The interval of sum(k1)/sum(n1) - sum(k2)/sum(n2), each side resampled by dialogue, independently."""

    def statistic(i: np.ndarray, j: np.ndarray, axis: int = -1) -> Any:
        return _ratio(k1[i].sum(axis=axis), n1[i].sum(axis=axis)) - _ratio(k2[j].sum(axis=axis), n2[j].sum(axis=axis))

    return _interval(_bootstrap((np.arange(len(k1)), np.arange(len(k2))), statistic, confidence, seed))


def _turn_weights(draws: np.ndarray, dialogue_of_turn: np.ndarray, dialogues: int) -> np.ndarray:
    """For each resample (a row of dialogue indices drawn), how many times each turn is drawn."""
    counts = np.zeros((draws.shape[0], dialogues))
    rows = np.repeat(np.arange(draws.shape[0]), draws.shape[1])
    np.add.at(counts, (rows, draws.ravel()), 1)
    return counts[:, dialogue_of_turn]


def weighted_medians(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The median of each row's sample, where row r holds values[i] weights[r, i] times (whole numbers): the
    middle of the expanded, sorted sample, or the mean of the two middle elements, as numpy.median gives it."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    cum = np.cumsum(weights[:, order], axis=1)
    total = cum[:, -1]
    low = np.array([np.searchsorted(c, (t - 1) // 2, side="right") for c, t in zip(cum, total, strict=True)])
    high = np.array([np.searchsorted(c, t // 2, side="right") for c, t in zip(cum, total, strict=True)])
    return (ordered[np.minimum(low, len(ordered) - 1)] + ordered[np.minimum(high, len(ordered) - 1)]) / 2


CHUNK = 100
"""Resamples weighed at once: bounds the memory a large set takes (CHUNK x its turns)."""


def median_interval(
    values: np.ndarray, dialogue_of_turn: np.ndarray, dialogues: int, *, seed: int = SEED
) -> list[float]:
    """The cluster-bootstrap percentile interval of the median turn value: each resample weighs every turn by
    how often its dialogue was drawn."""

    def statistic(i: np.ndarray, axis: int = -1) -> Any:
        draws = np.atleast_2d(i)
        out = np.concatenate(
            [
                weighted_medians(values, _turn_weights(draws[start : start + CHUNK], dialogue_of_turn, dialogues))
                for start in range(0, draws.shape[0], CHUNK)
            ]
        )
        return out if i.ndim > 1 else out[0]

    return _interval(_bootstrap((np.arange(dialogues),), statistic, CONFIDENCE, seed))


def wasserstein(a: Any, b: Any, a_weights: Any = None) -> float:
    """The Wasserstein-1 distance of two samples (a weighted by a_weights, when given)."""
    from scipy.stats import wasserstein_distance

    return float(wasserstein_distance(a, b, u_weights=a_weights))


def ks_statistic(a: Any, b: Any) -> float:
    from scipy.stats import ks_2samp

    return float(ks_2samp(a, b).statistic)


def act_codes(acts: Sequence[str]) -> np.ndarray:
    return np.asarray([ACTS.index(a) for a in acts], dtype=np.int64)


def act_shares(acts: Sequence[str] | np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The share of each of ACTS (in that order) among the turns, each counted `weights` times (once by default)."""
    codes = acts if isinstance(acts, np.ndarray) else act_codes(acts)
    counts = np.bincount(codes, weights=weights, minlength=len(ACTS)).astype(float)
    return counts / counts.sum() if counts.sum() else counts


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> float:
    """The Jensen-Shannon distance (the square root of the divergence), base 2: 0 same, 1 disjoint."""
    from scipy.spatial.distance import jensenshannon

    return float(jensenshannon(p, q, base=2))


def noise_quantile(
    reference: Corpus, size: int, distance: Callable[[np.ndarray], float], *, turns: int = 0, seed: int = SEED
) -> float:
    """The FAMILY_CONFIDENCE quantile of the distance from the reference to a sample of its own dialogues drawn
    with replacement, as large as the set (`size` dialogues and at least `turns` student turns: the reference's
    dialogues may be shorter than the set's): how far a set of real students of that size lands by chance.
    `distance` takes the reference's turns' weights in one resample (how often each turn was drawn)."""
    rng = np.random.default_rng(seed)
    arrays = _Arrays.of(reference)
    lengths = np.bincount(arrays.dialogue_of_turn, minlength=arrays.dialogues)
    mean_length = max(float(lengths.mean()), 1e-9)
    draw = max(size, int(np.ceil(turns / mean_length * 1.5)) + 10)
    found = []
    for _ in range(RESAMPLES):
        drawn = rng.integers(0, arrays.dialogues, size=draw)
        enough = np.cumsum(lengths[drawn]) >= turns
        cut = max(size, int(np.argmax(enough)) + 1 if enough.any() else draw)
        counts = np.bincount(drawn[:cut], minlength=arrays.dialogues)
        found.append(distance(counts[arrays.dialogue_of_turn].astype(float)))
    return float(np.quantile(found, FAMILY_CONFIDENCE))


_NOISE: dict[tuple[Any, ...], float] = {}
NOISE_KEPT = 4096


def kept_noise(
    reference: Corpus, what: str, size: int, turns: int, seed: int, distance: Callable[[np.ndarray], float]
) -> float:
    """noise_quantile, worked out once per reference, measure (`what`), size and seed in a process: it reads the
    reference alone (never the set's values), so every set of a size shares it (a batch's personas of as many runs
    and turns, a persona carded again)."""
    key = (what, reference.name, len(reference.dialogues), hash(reference.dialogues), size, turns, seed)
    found = _NOISE.get(key)
    if found is None:
        if len(_NOISE) >= NOISE_KEPT:
            _NOISE.clear()
        found = _NOISE[key] = noise_quantile(reference, size, distance, turns=turns, seed=seed)
    return found


# --- the card ---------------------------------------------------------------------------------------


def _too_small(corpus: Corpus) -> str:
    if len(corpus.dialogues) < MIN_DIALOGUES or corpus.turns < MIN_TURNS:
        return (
            f"{corpus.name} has {len(corpus.dialogues)} dialogue(s) and {corpus.turns} student turn(s): at least "
            f"{MIN_DIALOGUES} and {MIN_TURNS} are needed to judge"
        )
    return ""


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or np.isnan(x) else round(float(x), digits)


def _length_row(
    name: str, unit: str, get: Callable[[Any], int], s: Corpus, r: Corpus, judged: bool, shown: bool = True
) -> MeasureRow:
    sv = np.asarray(_values(s, get), dtype=float)
    rv = np.asarray(_values(r, get), dtype=float)
    sa, ra = _Arrays.of(s), _Arrays.of(r)
    s_med, r_med = float(np.median(sv)), float(np.median(rv))
    s_mean, r_mean = float(sv.mean()), float(rv.mean())
    distance = wasserstein(sv, rv)
    rule = (
        f"flagged when the Wasserstein-1 distance of {unit} per turn exceeds the {FAMILY_CONFIDENCE:.4f} quantile of "
        f"the reference's own resamples at this set's size and the mean is at least {LENGTH_RATIO}x the "
        f"reference's or at most 1/{LENGTH_RATIO}"
    )
    noise = None
    flag = None
    note = ""
    if judged:
        noise = kept_noise(r, name, len(s.dialogues), s.turns, SEED + 1, lambda w: wasserstein(rv, rv, w))
        ratio = s_mean / r_mean if r_mean else float("inf")
        flag = distance > noise and (ratio >= LENGTH_RATIO or ratio <= 1 / LENGTH_RATIO)
        if flag:
            times = s_med / r_med if r_med and s_med else ratio
            way = "longer" if ratio > 1 else "shorter"
            times_text = f"{times:.1f}x" if times >= 1 else f"{1 / times:.1f}x"
            note = (
                f"student turns {times_text} {way} than real students' (median {s_med:g} {unit} against "
                f"{r_med:g}; mean {s_mean:.1f} against {r_mean:.1f})"
            )
    return MeasureRow(
        name=name,
        value=s_med,
        interval=median_interval(sv, sa.dialogue_of_turn, sa.dialogues) if shown else None,
        reference_value=r_med,
        reference_interval=median_interval(rv, ra.dialogue_of_turn, ra.dialogues) if shown else None,
        distance=_r(distance),
        distance_name="wasserstein",
        distance_interval=[0.0, round(noise, 4)] if noise is not None else None,
        flag=flag,
        rule=rule,
        note=note,
        extra={"mean": _r(s_mean, 2), "reference_mean": _r(r_mean, 2), "ks": _r(ks_statistic(sv, rv))},
    )


def _share_row(
    name: str,
    what: str,
    get: Callable[[Any], bool | None],
    s: Corpus,
    r: Corpus,
    judged: bool,
    shown: bool = True,
) -> MeasureRow:
    k1, n1 = _per_dialogue_counts(s, get)
    k2, n2 = _per_dialogue_counts(r, get)
    rule = (
        f"flagged when the {FAMILY_CONFIDENCE:.4f} cluster-bootstrap interval of the difference of shares excludes 0 "
        f"and the difference is at least {MIN_SHARE_DIFFERENCE}"
    )
    if n1.sum() == 0 or n2.sum() == 0:
        missing = "the set" if n1.sum() == 0 else "the reference"
        value = float(k1.sum() / n1.sum()) if n1.sum() else None
        return MeasureRow(
            name=name,
            value=_r(value),
            interval=share_interval(k1, n1) if n1.sum() and shown else None,
            reference_value=_r(float(k2.sum() / n2.sum())) if n2.sum() else None,
            reference_interval=share_interval(k2, n2) if n2.sum() and shown else None,
            distance=None,
            distance_name="difference",
            distance_interval=None,
            flag=None,
            rule=f"not compared: {missing} has no {what}",
            extra={"counted": int(n1.sum()), "reference_counted": int(n2.sum())},
        )
    value, ref = float(k1.sum() / n1.sum()), float(k2.sum() / n2.sum())
    difference = value - ref
    diff_interval = None
    flag = None
    note = ""
    if judged:
        diff_interval = share_difference_interval(k1, n1, k2, n2, confidence=FAMILY_CONFIDENCE)
        excludes = diff_interval[0] > 0 or diff_interval[1] < 0
        flag = excludes and abs(difference) >= MIN_SHARE_DIFFERENCE
        if flag:
            note = f"{what}: {value:.0%} against {ref:.0%} for real students"
    return MeasureRow(
        name=name,
        value=_r(value),
        interval=share_interval(k1, n1) if shown else None,
        reference_value=_r(ref),
        reference_interval=share_interval(k2, n2) if shown else None,
        distance=_r(difference),
        distance_name="difference",
        distance_interval=diff_interval,
        flag=flag,
        rule=rule,
        note=note,
        extra={"counted": int(n1.sum()), "reference_counted": int(n2.sum())},
    )


def _act_intervals(corpus: Corpus) -> dict[str, list[float]]:
    out = {}
    n = np.asarray([len(d.turns) for d in corpus.dialogues], dtype=float)
    for i, act in enumerate(ACTS):
        k = np.asarray([sum(1 for t in d.turns if t.act == act) for d in corpus.dialogues], dtype=float)
        out[act] = share_interval(k, n, seed=SEED + 10 + i)
    return out


def _acts_row(s: Corpus, r: Corpus, judged: bool, shown: bool = True) -> MeasureRow:
    p = act_shares(_values(s, lambda t: t.act))
    q = act_shares(_values(r, lambda t: t.act))
    distance = jensen_shannon(p, q)
    rule = (
        f"flagged when the Jensen-Shannon distance (base 2) exceeds the {FAMILY_CONFIDENCE:.4f} quantile of the "
        f"reference's own resamples at this set's size and is at least {MIN_ACT_DISTANCE}"
    )
    noise = None
    flag = None
    note = ""
    if judged:
        acts = act_codes(_values(r, lambda t: t.act))
        noise = kept_noise(
            r, "act_distribution", len(s.dialogues), s.turns, SEED + 2, lambda w: jensen_shannon(act_shares(acts, w), q)
        )
        flag = distance > noise and distance >= MIN_ACT_DISTANCE
        if flag:
            gaps = sorted(zip(ACTS, p - q, strict=True), key=lambda x: -abs(x[1]))[:2]
            note = (
                "dialogue acts unlike real students' ("
                + ", ".join(
                    f"{a.replace('_', ' ')} {p[ACTS.index(a)]:.0%} against {q[ACTS.index(a)]:.0%}" for a, _ in gaps
                )
                + ")"
            )
    return MeasureRow(
        name="act_distribution",
        value={a: _r(x) for a, x in zip(ACTS, p, strict=True)},
        interval=_act_intervals(s) if shown else None,
        reference_value={a: _r(x) for a, x in zip(ACTS, q, strict=True)},
        reference_interval=_act_intervals(r) if shown else None,
        distance=_r(distance),
        distance_name="jensen_shannon",
        distance_interval=[0.0, round(noise, 4)] if noise is not None else None,
        flag=flag,
        rule=rule,
        note=note,
    )


def _diversity_row(s: Corpus, r: Corpus, shown: bool = True) -> MeasureRow:
    def ratios(c: Corpus) -> np.ndarray:
        return np.asarray([d.type_token_ratio for d in c.dialogues if d.type_token_ratio is not None], dtype=float)

    def interval(x: np.ndarray) -> list[float] | None:
        if len(x) < 2:
            return None

        def mean(v: np.ndarray, axis: int = -1) -> Any:
            return v.mean(axis=axis)

        return _interval(_bootstrap((x,), mean, CONFIDENCE, SEED + 3))

    a, b = ratios(s), ratios(r)
    return MeasureRow(
        name="lexical_diversity",
        value=_r(a.mean()) if len(a) else None,
        interval=interval(a) if shown else None,
        reference_value=_r(b.mean()) if len(b) else None,
        reference_interval=interval(b) if shown else None,
        distance=_r(a.mean() - b.mean()) if len(a) and len(b) else None,
        distance_name="difference",
        distance_interval=None,
        flag=None,
        rule="never flagged: the type-token ratio per dialogue falls as a dialogue grows, so it compares only "
        "dialogues of like length",
    )


def realism_card(corpus: Corpus, reference: Corpus, *, intervals: bool = True) -> Card:
    """The card of `corpus` against `reference` (rules in the module docstring). intervals=False leaves out the
    95% intervals shown beside the values (None), which no flag reads: the verdict and notes alone, for a note
    beside a report (most of a card's time goes to them)."""
    if not reference.dialogues or reference.turns == 0:
        raise ValueError(f"the reference {reference.name!r} holds no student turns")
    reason = _too_small(corpus)
    if corpus.turns == 0:
        return Card(
            corpus.name,
            reference.name,
            0,
            len(corpus.dialogues),
            reference.turns,
            len(reference.dialogues),
            (),
            None,
            (reason,),
        )
    judged = not reason
    same_acts = corpus.acts_by == reference.acts_by
    rows = [_length_row(name, unit, get, corpus, reference, judged, intervals) for name, (unit, get) in LENGTHS.items()]
    rows += [
        _share_row(name, what, get, corpus, reference, judged and (same_acts or name not in ACT_MEASURES), intervals)
        for name, (what, get) in SHARES.items()
    ]
    rows += [
        _acts_row(corpus, reference, judged and same_acts, intervals),
        _diversity_row(corpus, reference, intervals),
    ]
    if not same_acts:
        why = (
            f"not judged: the set's acts are by {corpus.acts_by}, the reference's by {reference.acts_by} (two "
            "classifiers' difference is not the students'); "
        )
        rows = [replace(m, rule=why + m.rule) if m.name in ACT_MEASURES and m.flag is None else m for m in rows]
    notes = tuple(m.note for m in rows if m.flag)
    return Card(
        name=corpus.name,
        reference=reference.name,
        turns=corpus.turns,
        dialogues=len(corpus.dialogues),
        reference_turns=reference.turns,
        reference_dialogues=len(reference.dialogues),
        measures=tuple(rows),
        unrealistic=(bool(notes) if judged else None),
        notes=notes if judged else (reason,),
        acts_by=corpus.acts_by,
        reference_acts_by=reference.acts_by,
    )


# --- measuring dialogues, and the shipped reference tables ----------------------------------------------

REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
"""Reference tables shipped with the product: per-turn measure values only, no dialogue text (README.md there
names each table's source, licence and the command that made it)."""
BUILTIN = ("bridge",)
TABLE_COLUMNS = (
    "dialogue",
    "splits",
    "error",
    "words",
    "characters",
    "asks_question",
    "answer_attempt",
    "correct",
    "acknowledgement_only",
    "confusion",
    "off_task",
    "repeat",
    "act",
    "type_token_ratio",
)
BRIDGE_ERRORS = ("guess", "misinterpret", "careless", "right-idea", "imprecise", "not-sure", "diagnose")
"""Bridge's error types (its `e` label); any other annotation (free text, "no error") is "other"."""


def answer_check(tutor_message: str, student: str) -> bool | None:
    """Right or wrong where the tutor's question is one of the exercises the offline roles can solve."""
    solved = solve(tutor_message)
    return None if solved is None else answer_matches(student, solved[0])


def message_pairs(messages: Sequence[dict[str, Any]] | Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(role, text) of a stored conversation ({"role", "content"} dicts, or pairs already)."""
    return [(m["role"], m["content"]) if isinstance(m, dict) else (m[0], m[1]) for m in messages]


def measure_messages(
    messages: Sequence[dict[str, Any]] | Sequence[tuple[str, str]],
    dialogue: str,
    acts: Callable[[str, str], str] | None = None,
) -> DialogueMeasures:
    """A stored conversation ({"role", "content"} dicts, or (role, text) pairs), measured (acts by `acts`, an
    ActClassifier, or the rules)."""
    return measure_dialogue(message_pairs(messages), dialogue=dialogue, check=answer_check, acts=acts)


@dataclass(frozen=True)
class TableDialogue:
    """A reference dialogue as its table holds it."""

    measures: DialogueMeasures
    splits: tuple[str, ...]
    error: str


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def table_text(rows: Sequence[TableDialogue]) -> str:
    """The table as CSV: one line per student turn, the dialogue's columns repeated."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TABLE_COLUMNS)
    for row in rows:
        d = row.measures
        for t in d.turns:
            writer.writerow(
                [d.dialogue, ";".join(row.splits), row.error]
                + [_cell(getattr(t, c)) for c in TABLE_COLUMNS[3:-1]]
                + [_cell(d.type_token_ratio)]
            )
    return out.getvalue()


def _flag(text: str) -> bool | None:
    return None if text == "" else text == "1"


def table_read(text: str) -> list[TableDialogue]:
    """A reference table's dialogues, in file order."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != TABLE_COLUMNS:
        raise ValueError(f"a reference table has the columns {', '.join(TABLE_COLUMNS)}")
    found: dict[str, tuple[list[TurnMeasures], tuple[str, ...], str, float | None]] = {}
    for line in reader:
        turns, *_ = found.setdefault(
            line["dialogue"],
            (
                [],
                tuple(s for s in line["splits"].split(";") if s),
                line["error"],
                float(line["type_token_ratio"]) if line["type_token_ratio"] else None,
            ),
        )
        turns.append(
            TurnMeasures(
                words=int(line["words"]),
                characters=int(line["characters"]),
                asks_question=line["asks_question"] == "1",
                answer_attempt=line["answer_attempt"] == "1",
                correct=_flag(line["correct"]),
                acknowledgement_only=line["acknowledgement_only"] == "1",
                confusion=line["confusion"] == "1",
                off_task=line["off_task"] == "1",
                repeat=line["repeat"] == "1",
                act=line["act"],
            )
        )
    return [
        TableDialogue(DialogueMeasures(k, tuple(t), ratio), splits, error)
        for k, (t, splits, error, ratio) in found.items()
    ]


@lru_cache(maxsize=4)
def builtin_table(name: str) -> tuple[TableDialogue, ...]:
    if name not in BUILTIN:
        raise KeyError(name)
    return tuple(table_read((REFERENCE_DIR / f"{name}.csv").read_text(encoding="utf-8")))


def is_builtin(name: str) -> bool:
    return name.split(":", 1)[0] in BUILTIN


def builtin_corpus(name: str) -> Corpus:
    """A shipped table, whole (`bridge`) or a part of it: `bridge:test` (the dialogues of one split),
    `bridge:not-test` (those in no test split: a reference held out from it), `bridge:error=guess` (one error type)."""
    table, _, part = name.partition(":")
    rows = builtin_table(table)
    if part.startswith("error="):
        wanted = part.removeprefix("error=")
        chosen = [r for r in rows if r.error == wanted]
    elif part.startswith("not-"):
        chosen = [r for r in rows if part.removeprefix("not-") not in r.splits]
    elif part:
        chosen = [r for r in rows if part in r.splits]
    else:
        chosen = list(rows)
    if not chosen:
        splits = sorted({s for r in rows for s in r.splits})
        errors = sorted({r.error for r in rows})
        raise LookupError(
            f"{name!r} selects no dialogue of the {table} table; parts: {', '.join(splits)}, not-<split>, "
            f"error=<{'|'.join(errors)}>"
        )
    return Corpus(name, tuple(r.measures for r in chosen), f"shipped table {table}.csv")


def bridge_error(value: Any) -> str:
    text = str(value or "").strip().lower()
    return text if text in BRIDGE_ERRORS else "other"


def grounding_fit(reference: Corpus) -> dict[str, Any]:
    """Grounding values (personas/schema.json `grounding`) that reproduce the reference's measures: the median
    words of a turn, and the shares of questions, acknowledgement-only turns and turns that take up the task
    (every act but confusion, off-task and other)."""
    turns = [t for d in reference.dialogues for t in d.turns]
    if not turns:
        raise ValueError(f"{reference.name!r} holds no student turns to fit")
    share = lambda keep: round(sum(1 for t in turns if keep(t)) / len(turns), 3)  # noqa: E731
    return {
        "verbosity": max(1, int(round(float(np.median([t.words for t in turns]))))),
        "question_rate": share(lambda t: t.asks_question),
        "acknowledgement_rate": share(lambda t: t.acknowledgement_only),
        "cooperation": share(lambda t: t.act not in ("confusion", "off_task", "other")),
        "source": reference.name,
    }
