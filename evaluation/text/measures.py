"""Tokens and n-gram measures. Linear in the text's length; no external models."""

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9]+(?:['./][a-z0-9]+)*")

STOPWORDS = frozenset(
    """a an the and or but if of to in on at for with by from is are was were be been am i you he she it we they
    me my your our their this that these those what which who how do does did so not no yes ok okay can could
    would should will just like um uh oh there here then than as about into up out its it's i'm you're let's""".split()
)


def tokens(text: str) -> list[str]:
    """Lower-case word tokens; numbers like 3/8 and 0.25 stay whole."""
    return _WORD.findall(text.lower())


def word_count(text: str) -> int:
    return len(text.split())


def content_words(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in STOPWORDS and len(t) > 2}


def ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


NgramsOfText = tuple[tuple[tuple[str, ...], ...], frozenset[tuple[str, ...]]]

CACHED_TEXT_CHARS = 2000
"""Texts up to this long have their n-grams cached (at most 1024 of them: a few MB at most)."""


def _ngrams_of(text: str, n: int) -> NgramsOfText:
    grams = tuple(ngrams(tokens(text), n))
    return grams, frozenset(grams)


_cached_ngrams_of = lru_cache(maxsize=1024)(_ngrams_of)


def _text_ngrams(text: str, n: int) -> NgramsOfText:
    """A text's n-grams, in order and as a set: a conversation compares each message with the ones
    before it every turn, so a message is tokenised once, not once per comparison."""
    return _cached_ngrams_of(text, n) if len(text) <= CACHED_TEXT_CHARS else _ngrams_of(text, n)


def ngram_overlap(a: str, b: str, n: int = 3) -> float:
    """Share of a's n-grams that also occur in b (0 when a has none)."""
    grams_a, _ = _text_ngrams(a, n)
    if not grams_a:
        return 0.0
    _, grams_b = _text_ngrams(b, n)
    return sum(1 for g in grams_a if g in grams_b) / len(grams_a)


def repeated_ngrams(texts: Iterable[str], n: int = 3, min_count: int = 2) -> list[tuple[str, int]]:
    """N-grams that occur in at least min_count of the texts, most frequent first (counted once per text)."""
    counts: Counter[tuple[str, ...]] = Counter()
    for text in texts:
        counts.update(set(ngrams(tokens(text), n)))
    return [(" ".join(g), c) for g, c in counts.most_common() if c >= min_count]


AGREEMENT_MARKERS = (
    "agree",
    "agreed",
    "exactly",
    "totally",
    "absolutely",
    "definitely",
    "you're right",
    "youre right",
    "you are right",
    "same here",
    "good point",
    "great point",
    "well said",
    "i second",
    "me too",
)
"""Phrases that mark agreement, matched as whole words within a clause."""
_AGREE_ANYWAY = ("couldn't agree more", "couldnt agree more", "could not agree more")
_AGREE_SYMBOLS = re.compile(r"(?<![\w+])\+1(?!\d)|\byes!")
_DISAGREE = re.compile(r"\bdisagree")
_NEGATIONS = frozenset(
    """not no never nor neither hardly don't dont doesn't doesnt didn't didnt isn't isnt aren't arent wasn't
    wasnt weren't werent can't cant cannot couldn't couldnt won't wont wouldn't wouldnt shouldn't shouldnt""".split()
)
_NEGATION_WINDOW = 3
"""How many words before a marker a negation reaches ("I don't think you're right")."""
_INTENSIFIERS = frozenset({"exactly", "totally", "absolutely", "definitely"})
"""Markers that a negation right after turns around ("absolutely not", "definitely not it")."""
_CLAUSE = re.compile(r"[,.;:!?()\[\]\n]+")
_MARKER_WORDS = tuple(tuple(tokens(marker)) for marker in AGREEMENT_MARKERS)


def is_agreement(text: str) -> bool:
    """Whether a message agrees with someone: a marker phrase not negated in its clause, and no
    "disagree". "No, you're right" agrees; "I don't agree", "not exactly" and "definitely not" do not."""
    lowered = text.lower().replace("\u2019", "'")
    if _DISAGREE.search(lowered):
        return False
    spaced = f" {' '.join(tokens(lowered))} "
    if _AGREE_SYMBOLS.search(lowered) or any(f" {phrase} " in spaced for phrase in _AGREE_ANYWAY):
        return True
    for clause in _CLAUSE.split(lowered):
        words = tokens(clause)
        for marker in _MARKER_WORDS:
            for start in range(len(words) - len(marker) + 1):
                if tuple(words[start : start + len(marker)]) == marker and not _negated(words, start, marker):
                    return True
    return False


def _negated(words: list[str], start: int, marker: tuple[str, ...]) -> bool:
    before = words[max(0, start - _NEGATION_WINDOW) : start]
    after = words[start + len(marker) : start + len(marker) + 1]
    return not _NEGATIONS.isdisjoint(before) or (marker[-1] in _INTENSIFIERS and not _NEGATIONS.isdisjoint(after))


def agreement_ratio(texts: Iterable[str]) -> float:
    """Share of messages that mainly agree with someone (marker phrases); 0 for none."""
    items = list(texts)
    return sum(1 for t in items if is_agreement(t)) / len(items) if items else 0.0


def novelty_overlap(texts: Iterable[str], n: int = 3) -> float:
    """Mean share of each message's n-grams already used in an earlier message (linear time)."""
    seen: set[tuple[str, ...]] = set()
    shares = []
    for text in texts:
        grams = ngrams(tokens(text), n)
        if grams:
            shares.append(sum(1 for g in grams if g in seen) / len(grams))
            seen.update(grams)
    return sum(shares) / len(shares) if shares else 0.0


def vocabulary_stats(texts_by_speaker: dict[str, list[str]]) -> dict[str, float]:
    """Type-token ratio per speaker and the mean Jaccard overlap of speakers' content vocabularies.

    Linear in the number of words; the pairwise part is over speakers, not messages.
    """
    vocab: dict[str, set[str]] = {}
    ttr: dict[str, float] = {}
    for speaker, texts in texts_by_speaker.items():
        words = [w for text in texts for w in tokens(text)]
        content = {w for w in words if w not in STOPWORDS and len(w) > 2}
        vocab[speaker] = content
        ttr[speaker] = len(set(words)) / len(words) if words else 0.0
    speakers = sorted(vocab)
    pairs = [(a, b) for i, a in enumerate(speakers) for b in speakers[i + 1 :]]
    overlaps = [len(vocab[a] & vocab[b]) / len(vocab[a] | vocab[b]) for a, b in pairs if vocab[a] | vocab[b]]
    return {
        "speakers": float(len(speakers)),
        "mean_type_token_ratio": sum(ttr.values()) / len(ttr) if ttr else 0.0,
        "mean_vocabulary_overlap": sum(overlaps) / len(overlaps) if overlaps else 0.0,
    }
