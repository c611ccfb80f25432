"""`search_knowledge(query, k=5)`: the knowledge base as a ToolAgent tool, every result cited."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pse.knowledge._base import MAX_K, KnowledgeBase, KnowledgeHit
from pse.protocol import ParamSpec
from pse.tools import Tool, ToolContext, ToolOutcome, ToolSpec

__all__ = ["SEARCH_KNOWLEDGE", "citations_of", "render_hits", "search_knowledge_tool"]

SEARCH_KNOWLEDGE = Tool.SEARCH_KNOWLEDGE
EXCERPT_CHARS = 700
"""Characters of each result's text a role sees (the citation says where to read the rest)."""


def citations_of(hits: Sequence[KnowledgeHit]) -> list[dict[str, Any]]:
    """The citations of `hits` as plain data: what tool facts and trace retrievals carry."""
    return [
        {
            "rank": hit.rank,
            "file": hit.citation.file,
            "start_line": hit.citation.start_line,
            "end_line": hit.citation.end_line,
            "heading": hit.citation.heading,
            "score": hit.score,
        }
        for hit in hits
    ]


def render_hits(query: str, hits: Sequence[KnowledgeHit], excerpt_chars: int = EXCERPT_CHARS) -> str:
    """Results as text for a role: rank, citation `file:start-end`, score, section, and an excerpt."""
    if not hits:
        return f"no knowledge matches {query!r}; try other words"
    lines = [f"{len(hits)} result(s) for {query!r}; cite them as [file:lines]:"]
    for hit in hits:
        text = hit.text if len(hit.text) <= excerpt_chars else hit.text[:excerpt_chars].rstrip() + " […]"
        section = f" — {hit.citation.heading}" if hit.citation.heading else ""
        lines.append(f"[{hit.rank}] {hit.citation.label} (score {hit.score:.3f}){section}")
        lines.extend(f"    {line}" for line in text.splitlines())
    return "\n".join(lines)


def search_knowledge_tool(kb: KnowledgeBase) -> ToolSpec:
    """The `search_knowledge(query, k=5)` tool over `kb` (read-only; the policy decides who may call it).

    An empty query or a bad `k` is answered as an error the role sees; an unreachable embedding backend
    raises `EmbeddingBackendError`, which the ToolAgent records as an infrastructure failure (run ERROR).
    """

    def search_knowledge(ctx: ToolContext, query: str, k: str = "5") -> ToolOutcome:
        try:
            count = int(k.strip())
        except ValueError:
            raise ValueError(f"k must be a whole number from 1 to {MAX_K}, got {k!r}") from None
        hits = kb.search(query, count)
        facts = {"query": query, "k": count, "citations": citations_of(hits)}
        return ToolOutcome("ok", render_hits(query, hits), facts=facts)

    return ToolSpec(
        SEARCH_KNOWLEDGE,
        "Search the task's knowledge base (runbooks, postmortems, notes); results cite file and lines.",
        (
            ParamSpec("query", description="what you are looking for, in a few words", max_chars=300),
            ParamSpec(
                "k", required=False, default="5", description=f"how many results, 1 to {MAX_K}", max_chars=4
            ),
        ),
        search_knowledge,
    )
