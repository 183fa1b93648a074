"""Shared text measures (tokens, n-grams, overlap, vocabulary) used by judges and drift scorers."""

from evaluation.text.measures import (
    STOPWORDS,
    content_words,
    ngram_overlap,
    ngrams,
    repeated_ngrams,
    tokens,
    word_count,
)

__all__ = ["STOPWORDS", "content_words", "ngram_overlap", "ngrams", "repeated_ngrams", "tokens", "word_count"]
