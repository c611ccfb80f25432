"""`RunKnowledge`: what one run needs of the knowledge base, wired by the runner in a few lines.

- `registry`: the built-in tools plus `search_knowledge` when the task has a `knowledge/` folder.
- `brief(task_message)`: with `PSE_KB_INJECT_TOP_K > 0`, appends a "## Knowledge" section with the top
  results for the task's goal and their sources. Deterministic and free of absolute paths (citations
  are relative to the knowledge folder), so cassettes recorded with request digests replay.
- `injected`: the (query, citations) of that injection, which the engine files in cycle 1 of the trace as a
  retrieval event. Every `search_knowledge` call is filed by the engine too, from the tool call's facts:
  one event source for the trace, the CLI and the dashboard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pse.config import Settings
from pse.knowledge._base import KnowledgeBase
from pse.knowledge._tool import citations_of, search_knowledge_tool
from pse.tools import ToolRegistry, builtin_tools

__all__ = ["RunKnowledge"]

INJECTED_EXCERPT_CHARS = 400
"""Characters of each injected result; the Planner can search for more."""


class RunKnowledge:
    """The knowledge base of one run (or none, when the task has no knowledge folder: then a no-op).

    Args:
        knowledge_dir: the task's `knowledge/` folder, or None.
        settings: the run's settings (PSE_KB_*).
        query: what to retrieve for the Planner's first prompt (the task goal) on a new run; None on a
            resumed run (its task message already holds what was injected) or to inject nothing.

    Raises:
        EmbeddingBackendError: injection is on and the embedding backend is unreachable.
        UserError: the folder's index was built with another embedder (before the run starts, not in it).
    """

    def __init__(self, knowledge_dir: Path | None, settings: Settings, *, query: str | None = None) -> None:
        self.kb = KnowledgeBase(knowledge_dir, settings) if knowledge_dir is not None else None
        if self.kb is not None:
            self.kb.check_index()
        self.registry: ToolRegistry = builtin_tools()
        if self.kb is not None:
            self.registry.register(search_knowledge_tool(self.kb))
        self.injected: tuple[str, list[dict[str, Any]]] | None = None
        self._section = ""
        top_k = settings.kb_inject_top_k
        if self.kb is not None and query and query.strip() and top_k > 0:
            hits = self.kb.search(query.strip(), top_k)
            self.injected = (query.strip(), citations_of(hits))
            if hits:
                lines = ["## Knowledge (retrieved for this task; cite as [file:lines], search for more)"]
                for hit in hits:
                    text = " ".join(hit.text.split())
                    if len(text) > INJECTED_EXCERPT_CHARS:
                        text = text[:INJECTED_EXCERPT_CHARS].rstrip() + " […]"
                    lines.append(f"- [{hit.citation.label}] {hit.citation.heading}: {text}")
                self._section = "\n".join(lines)

    def brief(self, task_message: str) -> str:
        """The task message with the injected knowledge section appended (unchanged when none)."""
        if not self._section:
            return task_message
        return task_message.rstrip("\n") + "\n\n" + self._section + "\n"
