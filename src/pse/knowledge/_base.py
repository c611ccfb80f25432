"""`KnowledgeBase`: one knowledge folder, its index kept up to date, and hybrid BM25 + vector search."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pse.config import Settings
from pse.exceptions import UserError
from pse.knowledge._bm25 import BM25
from pse.knowledge._embedders import Embedder, HashingEmbedder, create_embedder
from pse.knowledge._index import BuildReport, LoadedIndex, build_index, load_index
from pse.knowledge._text import tokenize

__all__ = ["MAX_K", "Citation", "KnowledgeBase", "KnowledgeHit"]

MAX_K = 20
"""Most results one search returns."""
_VECTOR_POOL = 50
"""Vector candidates fetched per search beyond k (the lexical side scores every chunk)."""


class Citation(BaseModel):
    """Where a result comes from: a file of the knowledge folder and a line range."""

    model_config = ConfigDict(frozen=True)

    file: str = Field(description="path relative to the knowledge folder")
    start_line: int
    end_line: int
    heading: str = ""

    @property
    def label(self) -> str:
        """`file:start-end`, the form roles cite."""
        return f"{self.file}:{self.start_line}-{self.end_line}"


class KnowledgeHit(BaseModel):
    """One ranked result. `score` is the hybrid score in [0, 1]; `lexical` and `vector` its two parts."""

    rank: int
    citation: Citation
    score: float
    lexical: float
    vector: float
    text: str


class KnowledgeBase:
    """A task's knowledge folder with its index; searching brings the index up to date first.

    Args:
        knowledge_dir: the folder (e.g. `tasks/incident-review/knowledge`); the index goes in its `.index/`.
        settings: backend, model, chunking and hybrid weight (PSE_KB_*).
        embedder: use this embedder instead of the configured one (tests, benchmarks).
        hybrid_weight: override `settings.kb_hybrid_weight`.

    Example:
        >>> kb = KnowledgeBase(task.knowledge_dir, load_settings())
        >>> for hit in kb.search("pool exhausted by a batch job", k=3):
        ...     print(hit.citation.label, round(hit.score, 3))
    """

    def __init__(
        self,
        knowledge_dir: Path,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        hybrid_weight: float | None = None,
    ) -> None:
        if not knowledge_dir.is_dir():
            raise UserError(f"knowledge folder {knowledge_dir} does not exist; create it and add .md files")
        self.knowledge_dir = knowledge_dir
        self.settings = settings
        self._embedder = embedder
        self.hybrid_weight = settings.kb_hybrid_weight if hybrid_weight is None else hybrid_weight
        self._loaded: LoadedIndex | None = None
        self._bm25: BM25 | None = None
        self._query_idf: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        """The embedder in use (created from the settings on first use)."""
        if self._embedder is None:
            self._embedder = create_embedder(self.settings)
        return self._embedder

    def build(self, *, force: bool = False) -> BuildReport:
        """Index new and changed files (all of them with `force`) and load the result for searching."""
        with self._lock:
            return self._build(force)

    def _build(self, force: bool) -> BuildReport:
        report = build_index(
            self.knowledge_dir,
            self.embedder,
            self.settings.kb_chunk_chars,
            self.settings.kb_chunk_overlap,
            force=force,
        )
        loaded = load_index(self.knowledge_dir)
        assert loaded is not None, "a build that succeeded leaves a loadable index"
        self._loaded = loaded
        self._bm25 = BM25([tokenize(c.searchable) for c in loaded.chunks])
        self._query_idf = None
        if isinstance(self.embedder, HashingEmbedder) and loaded.chunks:
            # Query-side IDF over the hash buckets: rare features weigh more (TF-IDF, see HashingEmbedder).
            df = np.count_nonzero(loaded.vectors, axis=0)
            self._query_idf = np.log((1 + len(loaded.chunks)) / (1 + df)).astype(np.float32) + 1.0
        return report

    def _ready(self) -> LoadedIndex:
        with self._lock:
            if self._loaded is None:
                self._build(force=False)  # a missing or stale index is built (only changes re-embedded)
            assert self._loaded is not None
            return self._loaded

    def search(self, query: str, k: int = 5) -> list[KnowledgeHit]:
        """The `k` best chunks for `query`, best first, each with its citation and scores.

        Raises:
            ValueError: the query is empty or k is out of 1..MAX_K (a role's mistake: answered as an error).
            EmbeddingBackendError: the configured embedding backend failed.
        """
        if not query.strip():
            raise ValueError("the query is empty; say what you are looking for in a few words")
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
        loaded = self._ready()
        n = len(loaded.chunks)
        if n == 0:
            return []
        assert self._bm25 is not None
        lexical = self._bm25.scores(tokenize(query))
        top = float(lexical.max())
        lexical = lexical / top if top > 0 else lexical
        vector = np.zeros(n, dtype=np.float64)
        weight = self.hybrid_weight
        if weight > 0 and loaded.faiss_index is not None:
            q = self.embedder.embed([query])
            if self._query_idf is not None:
                q = q * self._query_idf
                q = q / max(float(np.linalg.norm(q)), 1e-12)
            found, ids = loaded.faiss_index.search(q.astype(np.float32), min(n, k + _VECTOR_POOL))
            for sim, i in zip(found[0], ids[0], strict=True):
                if i >= 0:
                    vector[i] = max(float(sim), 0.0)
            peak = float(vector.max())
            vector = vector / peak if peak > 0 else vector
        fused = (1 - weight) * lexical + weight * vector
        order = sorted(range(n), key=lambda i: (-fused[i], i))[:k]
        hits = []
        for rank, i in enumerate(order, start=1):
            if fused[i] <= 0:
                break
            chunk = loaded.chunks[i]
            hits.append(
                KnowledgeHit(
                    rank=rank,
                    citation=Citation(
                        file=chunk.file,
                        start_line=chunk.start_line,
                        end_line=chunk.end_line,
                        heading=chunk.heading,
                    ),
                    score=round(float(fused[i]), 4),
                    lexical=round(float(lexical[i]), 4),
                    vector=round(float(vector[i]), 4),
                    text=chunk.text,
                )
            )
        return hits
