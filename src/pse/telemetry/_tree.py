"""The building blocks of a run's span tree: ids and times from the trace, and the span being drafted.

Every id comes from the run id: the trace id from it alone, each span id from it and the span's place
in the run (`run`, `cycle/2`, `cycle/2/tool/3`). So the same trace always gives the same spans, and a
cycle's span id is known when the cycle starts (AutoGen's live spans are parented to it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, TraceFlags
from opentelemetry.util.types import AttributeValue

__all__ = [
    "SCOPE",
    "Attributes",
    "Draft",
    "cycle_span_context",
    "finished",
    "ns",
    "span_id_of",
    "trace_id_of",
]

SCOPE = InstrumentationScope("pse")
"""The instrumentation scope of PSE's own spans."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Attributes = dict[str, AttributeValue]


def trace_id_of(run_id: str) -> int:
    """The OpenTelemetry trace id of a run: 128 bits of a digest of its run id."""
    return int.from_bytes(hashlib.sha256(f"pse/{run_id}".encode()).digest()[:16], "big") or 1


def span_id_of(run_id: str, path: str) -> int:
    """The span id of the span at `path` in a run (`run`, `cycle/2`, `cycle/2/tool/3`)."""
    return int.from_bytes(hashlib.sha256(f"pse/{run_id}/{path}".encode()).digest()[:8], "big") or 1


def _context(run_id: str, path: str) -> SpanContext:
    return SpanContext(trace_id_of(run_id), span_id_of(run_id, path), False, TraceFlags(TraceFlags.SAMPLED))


def cycle_span_context(run_id: str, cycle: int) -> SpanContext:
    """The span context of a run's cycle span: what AutoGen's spans of that cycle are parented to."""
    return _context(run_id, f"cycle/{cycle}")


def ns(at: str) -> int:
    """An ISO-8601 time of the trace as nanoseconds since the epoch (exact to the microsecond)."""
    moment = datetime.fromisoformat(at)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass
class Draft:
    """A span being drafted: made a `ReadableSpan` (`finished`) once its children are known."""

    name: str
    path: str
    parent: str | None
    start: int
    end: int
    attributes: Attributes
    kind: SpanKind = SpanKind.INTERNAL
    events: list[Event] = field(default_factory=list)
    status: Status = field(default_factory=Status)

    def event(self, name: str, at: int, attributes: Attributes) -> None:
        self.events.append(Event(name, attributes, timestamp=at))
        self.start, self.end = min(self.start, at), max(self.end, at)  # a span covers its events


def finished(spans: list[Draft], run_id: str, resource: Resource) -> list[ReadableSpan]:
    """The drafts as spans, each parent stretched to cover its children (parents come first)."""
    by_path = {s.path: s for s in spans}
    for span in reversed(spans):  # children come after their parents: each end reaches its parent
        if span.parent is not None:
            parent = by_path[span.parent]
            parent.end = max(parent.end, span.end)
            parent.start = min(parent.start, span.start)
    return [
        ReadableSpan(
            name=s.name,
            context=_context(run_id, s.path),
            parent=_context(run_id, s.parent) if s.parent is not None else None,
            resource=resource,
            attributes=s.attributes,
            events=s.events,
            kind=s.kind,
            status=s.status,
            start_time=s.start,
            end_time=s.end,
            instrumentation_scope=SCOPE,
        )
        for s in spans
    ]
