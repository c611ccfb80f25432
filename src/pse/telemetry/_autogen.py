"""AutoGen's own spans: gathered per run, under the cycle span, and exported with the run's spans.

AutoGen's agents trace through the *global* tracer provider (`trace_create_agent_span` and
`trace_invoke_agent_span` call `trace.get_tracer`; an AutoGen runtime, where one runs, does too).
When no application has set one, PSE sets one the first time a run exports (`collector()`): a
provider whose sampler records only spans of a run being exported, and whose one processor hands
each ended span to that run (`SpanCollector`). The run takes them when it ends and sends them with
its own spans, through its own exporter, cleaned like them (`pse.telemetry._export`). Spans of no
such run are not even recorded.

When the application has set a provider of its own, PSE leaves it alone: AutoGen's spans go there,
still parented to the cycle span (the parent is the current context, which the run sets), and PSE does
not send them a second time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry import context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

__all__ = ["MAX_FOREIGN_SPANS", "SpanCollector", "collector"]

MAX_FOREIGN_SPANS = 20_000
"""Most AutoGen spans kept for one run (a phase makes one per turn and one per phase); later ones are
dropped and counted."""


class SpanCollector(SpanProcessor, Sampler):
    """Keeps the ended spans of the runs it watches, by trace id; samples only those (`should_sample`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, list[ReadableSpan]] = {}
        self.dropped: dict[int, int] = {}

    def watch(self, trace_id: int) -> None:
        """Start keeping the spans of this trace."""
        with self._lock:
            self._runs.setdefault(trace_id, [])

    def take(self, trace_id: int) -> tuple[list[ReadableSpan], int]:
        """Stop watching a trace; return its spans and how many were dropped over the limit."""
        with self._lock:
            return self._runs.pop(trace_id, []), self.dropped.pop(trace_id, 0)

    # -- Sampler
    def should_sample(
        self,
        parent_context: context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        watched = trace_id in self._runs
        return SamplingResult(Decision.RECORD_AND_SAMPLE if watched else Decision.DROP, attributes)

    def get_description(self) -> str:
        return "PseRunSampler"

    # -- SpanProcessor
    def on_end(self, span: ReadableSpan) -> None:
        if span.context is None:
            return
        with self._lock:
            kept = self._runs.get(span.context.trace_id)
            if kept is None:
                return
            if len(kept) < MAX_FOREIGN_SPANS:
                kept.append(span)
            else:
                self.dropped[span.context.trace_id] = self.dropped.get(span.context.trace_id, 0) + 1

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        return None


_lock = threading.Lock()
_installed: SpanCollector | None = None


def collector(resource: Resource) -> SpanCollector | None:
    """The collector of AutoGen's spans, set up as the global provider's on first use; None when the
    application has a tracer provider of its own (then AutoGen's spans are its business)."""
    global _installed
    with _lock:
        if _installed is not None:
            return _installed
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return None
        found = SpanCollector()
        provider = TracerProvider(sampler=found, resource=resource)
        provider.add_span_processor(found)
        trace.set_tracer_provider(provider)
        _installed = found
        return found
