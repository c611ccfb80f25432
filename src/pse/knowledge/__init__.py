"""The knowledge base: a task's `knowledge/` folder, indexed in FAISS, searched by hybrid BM25 + vectors.

Usage::

    kb = KnowledgeBase(task.knowledge_dir, settings)      # PSE_KB_* settings choose the embeddings
    report = kb.build()                                   # only new and changed files are embedded
    report.backend                                        # 'minilm' with the embeddings extra, else 'offline'
    hits = kb.search("pool exhausted by a batch job", k=3)
    hits[0].citation.label                                # 'db-pool-exhaustion.md:12-20'

Roles reach it through the `search_knowledge(query, k=5)` tool (`search_knowledge_tool`); the runner
wires it with `RunKnowledge` (tool registration, optional injection into the Planner's first prompt, and
every retrieval filed in the trace). `evaluate_retrieval` scores a knowledge base on labelled queries.
"""

from pse.knowledge._base import MAX_K, TUNED_HYBRID_WEIGHTS, Citation, KnowledgeBase, KnowledgeHit
from pse.knowledge._chunks import SUPPORTED_SUFFIXES, Chunk
from pse.knowledge._embedders import (
    DEFAULT_EMBEDDING_MODELS,
    BackendChoice,
    Embedder,
    HashingEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    choose_backend,
    create_embedder,
)
from pse.knowledge._eval import LabelledQuery, RetrievalScores, evaluate_retrieval, load_queries
from pse.knowledge._index import INDEX_DIR, BuildReport
from pse.knowledge._minilm import MiniLMEmbedder, minilm_missing
from pse.knowledge._run import RunKnowledge
from pse.knowledge._tool import SEARCH_KNOWLEDGE, citations_of, render_hits, search_knowledge_tool

__all__ = [
    "DEFAULT_EMBEDDING_MODELS",
    "INDEX_DIR",
    "MAX_K",
    "SEARCH_KNOWLEDGE",
    "SUPPORTED_SUFFIXES",
    "TUNED_HYBRID_WEIGHTS",
    "BackendChoice",
    "BuildReport",
    "Chunk",
    "Citation",
    "Embedder",
    "HashingEmbedder",
    "KnowledgeBase",
    "KnowledgeHit",
    "LabelledQuery",
    "MiniLMEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "RetrievalScores",
    "RunKnowledge",
    "choose_backend",
    "citations_of",
    "create_embedder",
    "evaluate_retrieval",
    "load_queries",
    "minilm_missing",
    "render_hits",
    "search_knowledge_tool",
]
