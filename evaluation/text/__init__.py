"""Shared text measures (tokens, n-grams, overlap, vocabulary) used by judges and drift scorers."""

from evaluation.text.measures import (
    STOPWORDS,
    agreement_ratio,
    content_words,
    is_agreement,
    ngram_overlap,
    ngrams,
    novelty_overlap,
    repeated_ngrams,
    tokens,
    vocabulary_stats,
    word_count,
)

__all__ = [
    "STOPWORDS",
    "agreement_ratio",
    "is_agreement",
    "novelty_overlap",
    "vocabulary_stats",
    "content_words",
    "ngram_overlap",
    "ngrams",
    "repeated_ngrams",
    "tokens",
    "word_count",
]
