"""Tokens and n-gram measures. Linear in the text's length; no external models."""

import re
from collections import Counter
from collections.abc import Iterable

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


def ngram_overlap(a: str, b: str, n: int = 3) -> float:
    """Share of a's n-grams that also occur in b (0 when a has none)."""
    grams_a = ngrams(tokens(a), n)
    if not grams_a:
        return 0.0
    grams_b = set(ngrams(tokens(b), n))
    return sum(1 for g in grams_a if g in grams_b) / len(grams_a)


def repeated_ngrams(texts: Iterable[str], n: int = 3, min_count: int = 2) -> list[tuple[str, int]]:
    """N-grams that occur in at least min_count of the texts, most frequent first (counted once per text)."""
    counts: Counter[tuple[str, ...]] = Counter()
    for text in texts:
        counts.update(set(ngrams(tokens(text), n)))
    return [(" ".join(g), c) for g, c in counts.most_common() if c >= min_count]
