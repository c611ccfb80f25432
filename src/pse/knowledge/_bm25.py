"""Okapi BM25 over the chunks' tokens: the lexical half of the hybrid ranking (exact words, ids, numbers)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["BM25"]


class BM25:
    """BM25 scores of every document for a query.

    Args:
        documents: each document's tokens.
        k1: term-frequency saturation.
        b: length normalisation.
    """

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self._k1 = k1
        self._b = b
        self._tf = [Counter(doc) for doc in documents]
        self._len = np.array([len(doc) for doc in documents], dtype=np.float64)
        self._avg = float(self._len.mean()) if len(documents) else 0.0
        df: Counter[str] = Counter()
        for counts in self._tf:
            df.update(counts.keys())
        n = len(documents)
        # The "+1" form never goes negative, so a word in most chunks still counts a little.
        self._idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def idf(self, term: str) -> float:
        """Inverse document frequency of a term (0 when no document holds it)."""
        return self._idf.get(term, 0.0)

    def scores(self, query: Sequence[str]) -> NDArray[np.float64]:
        """One score per document, in document order."""
        out = np.zeros(len(self._tf), dtype=np.float64)
        if not self._tf:
            return out
        norm = self._k1 * (1 - self._b + self._b * self._len / max(self._avg, 1e-9))
        for term in set(query):
            idf = self._idf.get(term)
            if idf is None:
                continue
            tf = np.array([counts.get(term, 0) for counts in self._tf], dtype=np.float64)
            out += idf * tf * (self._k1 + 1) / (tf + norm)
        return out
