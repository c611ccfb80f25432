"""Retrieval quality on a labelled query set: recall@3 and MRR@10, per question type.

A query set is JSON: `{"queries": [{"query", "type", "split", "relevant": [...]}]}`. Each entry of
`relevant` is a file (relative to the knowledge folder) or `{"file", "section"}`, where a hit counts only
when its heading contains the section. `type` (e.g. paraphrase, specific, keyword) and `split` (dev:
tune on it; test: report it) are free labels. `bench/bench_knowledge.py` measures every backend this
way on `tests/data/kb-ops/`; a user can measure their own knowledge folder the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pse.knowledge._base import KnowledgeBase, KnowledgeHit

__all__ = ["LabelledQuery", "RetrievalScores", "evaluate_retrieval", "load_queries"]

DEPTH = 10
"""Results fetched per query: MRR is counted over the first ten."""


class Target(BaseModel):
    """A place that answers a query: a file, and optionally a section of it."""

    model_config = ConfigDict(frozen=True)

    file: str
    section: str = ""

    def matches(self, hit: KnowledgeHit) -> bool:
        """Whether `hit` is this target (its file, and its heading holds the section when one is given)."""
        return hit.citation.file == self.file and self.section in hit.citation.heading


class LabelledQuery(BaseModel):
    """One question with the places that answer it."""

    query: str
    type: str = "any"
    split: str = "test"
    relevant: list[Target] = Field(min_length=1)

    @field_validator("relevant", mode="before")
    @classmethod
    def _files_as_targets(cls, value: object) -> object:
        if isinstance(value, list):
            return [{"file": item} if isinstance(item, str) else item for item in value]
        return value


class RetrievalScores(BaseModel):
    """Mean scores of a group of queries.

    `recall@3` is the share of each query's targets found in its top 3, averaged; `mrr@10` the mean of
    1 / rank of the first relevant result (0 when none is in the top 10); `missed@10` counts the queries
    with no relevant result in the top 10.
    """

    model_config = ConfigDict(populate_by_name=True)

    queries: int
    recall_at_3: float = Field(alias="recall@3")
    mrr_at_10: float = Field(alias="mrr@10")
    missed_at_10: int = Field(alias="missed@10")

    def as_dict(self) -> dict[str, float | int]:
        """The scores under their usual names (`recall@3`, `mrr@10`, ...), rounded to 3 places."""
        return {
            "queries": self.queries,
            "recall@3": round(self.recall_at_3, 3),
            "mrr@10": round(self.mrr_at_10, 3),
            "missed@10": self.missed_at_10,
        }


def load_queries(path: Path) -> list[LabelledQuery]:
    """The labelled queries of a JSON file (see the module docstring for the format)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [LabelledQuery.model_validate(item) for item in raw["queries"]]


def _score(hits: Sequence[KnowledgeHit], targets: Sequence[Target]) -> tuple[float, float]:
    found = [any(t.matches(h) for h in hits[:3]) for t in targets]
    first = next((h.rank for h in hits if any(t.matches(h) for t in targets)), None)
    return sum(found) / len(targets), (1 / first if first else 0.0)


def evaluate_retrieval(
    kb: KnowledgeBase, queries: Iterable[LabelledQuery], *, group_by: str = "type"
) -> dict[str, RetrievalScores]:
    """Scores of `kb` on `queries`, per value of `group_by` (`type` or `split`) and over `all`."""
    per_group: dict[str, list[tuple[float, float]]] = {}
    for item in queries:
        pair = _score(kb.search(item.query, k=DEPTH), item.relevant)
        per_group.setdefault(str(getattr(item, group_by)), []).append(pair)
        per_group.setdefault("all", []).append(pair)
    return {
        name: RetrievalScores(
            queries=len(pairs),
            recall_at_3=sum(r for r, _ in pairs) / len(pairs),
            mrr_at_10=sum(m for _, m in pairs) / len(pairs),
            missed_at_10=sum(1 for _, m in pairs if m == 0),
        )
        for name, pairs in sorted(per_group.items())
    }
