"""The run's one event sink: every engine event goes through it, and tool records are pushed into it.

The consumer (the CLI's live view, the dashboard's broker, `pse.arun(on_event=...)`) is given when the
run is prepared and receives every event of the run, in the order they happen. The ToolAgent's executor
pushes each audit record here as it is decided (`tool_call`), which files it in the current cycle's
record and announces it; a successful `search_knowledge` call is also filed as a retrieval. In strict
replay the cassette player pushes each drift of tool output from the recording here (`drift`). A
consumer that raises never breaks the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pse.events import DriftEvent, DriftRecord, Event, RetrievalEvent, ToolCallEvent, ToolCallRecord
from pse.tools import Tool
from pse.trace import CycleRecord

__all__ = ["EventSink", "RunEvents"]

log = logging.getLogger("pse.engine")

EventSink = Callable[[Event], None]
"""Receives every event of a run."""


class RunEvents:
    """Files and announces what happens in a run.

    Args:
        run_id: the run the events belong to.
        consumer: receives every event (None: nobody is watching).
    """

    def __init__(self, run_id: str, consumer: EventSink | None = None) -> None:
        self.run_id = run_id
        self._consumer = consumer
        self.cycle: CycleRecord | None = None
        """The cycle being run: tool records pushed now belong to it."""

    def emit(self, event: Event) -> None:
        """Give `event` to the consumer."""
        if self._consumer is None:
            return
        try:
            self._consumer(event)
        except Exception:  # a broken live view must not break the run
            log.exception("event consumer failed on %s", event.kind)

    def tool_call(self, record: ToolCallRecord) -> None:
        """The executor decided (and maybe ran) one request: file it in the current cycle and announce it."""
        cycle = self.cycle
        if cycle is None:  # a call outside any cycle (scripts, tests): nothing to file it in
            return
        cycle.tool_calls.append(record)
        self.emit(ToolCallEvent(run_id=self.run_id, cycle=cycle.index, call=record, at=record.at))
        if record.tool == Tool.SEARCH_KNOWLEDGE and record.status == "ok" and "citations" in record.facts:
            query = str(record.facts.get("query", record.arguments.get("query", "")))
            self.retrieval(query, list(record.facts["citations"]), at=record.at)

    def drift(self, record: DriftRecord) -> None:
        """Replayed tool output differs from the recording: file it in the current cycle and announce it."""
        cycle = self.cycle
        if cycle is None:  # a model call outside any cycle (scripts, tests): nothing to file it in
            return
        cycle.drifts.append(record)
        self.emit(DriftEvent(run_id=self.run_id, cycle=cycle.index, drift=record, at=record.at))

    def retrieval(self, query: str, results: list[dict[str, Any]], *, at: str | None = None) -> None:
        """Knowledge was retrieved for the current cycle (by a tool call, or injected before it)."""
        cycle = self.cycle
        assert cycle is not None, "retrievals belong to a cycle"
        event = RetrievalEvent(run_id=self.run_id, cycle=cycle.index, query=query, results=results)
        if at is not None:
            event = event.model_copy(update={"at": at})
        cycle.retrievals.append(event)
        self.emit(event)
