"""`KnowledgeBase`: one knowledge folder, its index kept up to date, and hybrid BM25 + vector search.

An index is only ever searched with the embedder that built it: when the backend in use is another one
(say `PSE_KB_BACKEND=auto` found the embeddings extra after the index was built with the offline
embedder), searching is refused with the command that rebuilds it. `build()` itself re-embeds everything
in that case and its report names the embedder it replaced.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pse.config import Settings
from pse.exceptions import UserError
from pse.knowledge._bm25 import BM25
from pse.knowledge._embedders import (
    BackendChoice,
    Embedder,
    HashingEmbedder,
    backend_of,
    choose_backend,
    create_embedder,
)
from pse.knowledge._index import (
    BuildReport,
    LoadedIndex,
    build_index,
    index_dir_of,
    load_index,
    read_manifest,
)
from pse.knowledge._text import tokenize

__all__ = ["MAX_K", "TUNED_HYBRID_WEIGHTS", "Citation", "KnowledgeBase", "KnowledgeHit"]

MAX_K = 20
"""Most results one search returns."""
_VECTOR_POOL = 50
"""Vector candidates fetched per search beyond k (the lexical side scores every chunk)."""
TUNED_HYBRID_WEIGHTS = {"minilm": 0.7, "offline": 0.3}
"""The hybrid weight of each backend when PSE_KB_HYBRID_WEIGHT is unset, tuned on the dev split of
`tests/data/kb-ops` (docs/knowledge.md has the sweep). A backend not measured gets `_UNTUNED_WEIGHT`."""
_UNTUNED_WEIGHT = 0.3


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
        hybrid_weight: override `settings.kb_hybrid_weight` (None there too: the backend's tuned weight).
        task: the task's name, for the rebuild command in messages (default: the folder's parent's name).

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
        task: str | None = None,
    ) -> None:
        if not knowledge_dir.is_dir():
            raise UserError(f"knowledge folder {knowledge_dir} does not exist; create it and add .md files")
        self.knowledge_dir = knowledge_dir
        self.settings = settings
        self.task = task or knowledge_dir.resolve().parent.name
        self._embedder = embedder
        self._choice = None if embedder is None else BackendChoice(backend_of(embedder.identity), "given")
        self._weight = settings.kb_hybrid_weight if hybrid_weight is None else hybrid_weight
        self._loaded: LoadedIndex | None = None
        self.last_build: BuildReport | None = None
        """The build a search had to make first (a missing or stale index), for the caller to report."""
        self._bm25: BM25 | None = None
        self._query_idf: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def choice(self) -> BackendChoice:
        """The backend in use and why (`auto` resolved against what is installed)."""
        if self._choice is None:
            self._choice = choose_backend(self.settings)
        return self._choice

    @property
    def embedder(self) -> Embedder:
        """The embedder in use (created from the settings on first use)."""
        if self._embedder is None:
            self._embedder = create_embedder(self.settings)
        return self._embedder

    @property
    def hybrid_weight(self) -> float:
        """The weight of the vector side: the one set, else the backend's tuned weight."""
        if self._weight is not None:
            return self._weight
        return TUNED_HYBRID_WEIGHTS.get(self.choice.backend, _UNTUNED_WEIGHT)

    @hybrid_weight.setter
    def hybrid_weight(self, value: float | None) -> None:
        self._weight = value

    def build(self, *, force: bool = False) -> BuildReport:
        """Index new and changed files (all with `force`, or when the embedder changed) and load the index."""
        with self._lock:
            return self._build(force)

    def check_index(self) -> None:
        """Refuse a stored index that another embedder built (reads only its manifest: no model loads).

        Raises:
            UserError: the index holds vectors of another backend or model; the message says how to
                rebuild it.
        """
        manifest = read_manifest(self.knowledge_dir, self.choice.backend)
        if manifest is None or not manifest.files or manifest.embedder == self.embedder.identity:
            return
        built = manifest.backend or backend_of(manifest.embedder)
        raise UserError(
            f"the knowledge index {index_dir_of(self.knowledge_dir, self.choice.backend)} was built with "
            f"{manifest.embedder}, "
            f"but queries would be embedded with {self.embedder.identity} ({self.choice.reason}); vectors "
            "of two embedders cannot be compared, so it is not searched. Rebuild it: "
            f"`PSE_KB_BACKEND={self.choice.backend} pse kb build {self.task}`, or set "
            f"PSE_KB_BACKEND={built} to search it as it is"
        )

    def _build(self, force: bool) -> BuildReport:
        report = build_index(
            self.knowledge_dir,
            self.embedder,
            self.settings.kb_chunk_chars,
            self.settings.kb_chunk_overlap,
            backend=self.choice.backend,
            force=force,
        )
        report.backend_reason = self.choice.reason
        loaded = load_index(self.knowledge_dir, self.choice.backend)
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
                self.check_index()  # another embedder's index is refused, never re-embedded behind a search
                self.last_build = self._build(force=False)  # a missing or stale index is built (changes only)
            assert self._loaded is not None
            return self._loaded

    def search(self, query: str, k: int = 5) -> list[KnowledgeHit]:
        """The `k` best chunks for `query`, best first, each with its citation and scores.

        Raises:
            ValueError: the query is empty or k is out of 1..MAX_K (a role's mistake: answered as an error).
            EmbeddingBackendError: the configured embedding backend failed.
            UserError: the stored index was built with another embedder (see `check_index`).
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
