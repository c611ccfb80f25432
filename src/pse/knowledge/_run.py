"""`RunKnowledge`: what one run needs of the knowledge base, wired by the runner in a few lines.

- `registry`: the built-in tools plus `search_knowledge` when the task has a `knowledge/` folder.
- `brief(task_message)`: with `PSE_KB_INJECT_TOP_K > 0`, appends a "## Knowledge" section with the top
  results for the task's goal and their sources. Deterministic and free of absolute paths (citations
  are relative to the knowledge folder), so cassettes recorded with request digests replay.
- Retrievals in the trace: `on_record` (the executor's audit hook) files every `search_knowledge` call,
  and `runtime(executor)` files the injected one, each as a `RetrievalEvent` in the cycle it belongs to
  (the injected one in cycle 1). The tool calls themselves stay in `cycle.tool_calls` with their
  citations in `facts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pse.config import Settings
from pse.events import RetrievalEvent, ToolCallRecord
from pse.exceptions import RunFailure
from pse.knowledge._base import KnowledgeBase
from pse.knowledge._tool import SEARCH_KNOWLEDGE, citations_of, search_knowledge_tool
from pse.tools import ToolRegistry, builtin_tools

__all__ = ["RunKnowledge"]

INJECTED_EXCERPT_CHARS = 400
"""Characters of each injected result; the Planner can search for more."""


class _Cycle(Protocol):
    index: int
    retrievals: list[RetrievalEvent]


class _Trace(Protocol):
    run_id: str

    @property
    def cycles(self) -> Sequence[_Cycle]: ...


class _Runtime(Protocol):
    @property
    def records(self) -> Sequence[ToolCallRecord]: ...

    @property
    def infrastructure_error(self) -> RunFailure | None: ...

    def new_cycle(self) -> None: ...


class RunKnowledge:
    """The knowledge base of one run (or none, when the task has no knowledge folder: then a no-op).

    Args:
        knowledge_dir: the task's `knowledge/` folder, or None.
        settings: the run's settings (PSE_KB_*).
        query: what to retrieve for the Planner's first prompt (the task goal) on a new run; None on a
            resumed run (its task message already holds what was injected) or to inject nothing.

    Raises:
        EmbeddingBackendError: injection is on and the embedding backend is unreachable.
    """

    def __init__(self, knowledge_dir: Path | None, settings: Settings, *, query: str | None = None) -> None:
        self.kb = KnowledgeBase(knowledge_dir, settings) if knowledge_dir is not None else None
        self.registry: ToolRegistry = builtin_tools()
        if self.kb is not None:
            self.registry.register(search_knowledge_tool(self.kb))
        self._trace: _Trace | None = None
        self._injected: RetrievalEvent | None = None
        self._section = ""
        top_k = settings.kb_inject_top_k
        if self.kb is not None and query and query.strip() and top_k > 0:
            hits = self.kb.search(query.strip(), top_k)
            self._injected = RetrievalEvent(
                run_id="", cycle=1, query=query.strip(), results=citations_of(hits)
            )
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

    def bind(self, trace: _Trace) -> None:
        """File retrievals into this trace (call once the engine has it)."""
        self._trace = trace
        if self._injected is not None:
            self._injected = self._injected.model_copy(update={"run_id": trace.run_id})

    def on_record(self, record: ToolCallRecord) -> None:
        """The executor's audit hook: a successful search becomes a `RetrievalEvent` of the current cycle."""
        if record.tool != SEARCH_KNOWLEDGE or record.status != "ok" or self._trace is None:
            return
        cycles = self._trace.cycles
        if not cycles:
            return
        cycle = cycles[-1]
        cycle.retrievals.append(
            RetrievalEvent(
                run_id=self._trace.run_id,
                cycle=cycle.index,
                query=str(record.facts.get("query", record.arguments.get("query", ""))),
                results=list(record.facts.get("citations", [])),
            )
        )

    def runtime(self, tools: _Runtime) -> _Runtime:
        """The engine's view of the executor, filing the injected retrieval in cycle 1 when it starts."""
        return _FilingRuntime(tools, self) if self._injected is not None else tools

    def _file_injected(self) -> None:
        if self._injected is None or self._trace is None or not self._trace.cycles:
            return
        cycle = self._trace.cycles[-1]
        if cycle.index == 1 and not any(r.query == self._injected.query for r in cycle.retrievals):
            cycle.retrievals.insert(0, self._injected)
        self._injected = None


class _FilingRuntime:
    """Delegates to the executor; on the first cycle start, files the injected retrieval."""

    def __init__(self, tools: _Runtime, knowledge: RunKnowledge) -> None:
        self._tools = tools
        self._knowledge = knowledge

    @property
    def records(self) -> Sequence[ToolCallRecord]:
        return self._tools.records

    @property
    def infrastructure_error(self) -> RunFailure | None:
        return self._tools.infrastructure_error

    def new_cycle(self) -> None:
        self._tools.new_cycle()
        self._knowledge._file_injected()
