"""Sending spans: the exporters PSE_OTEL names, and the cleaning every span passes before it leaves.

`otlp` is the official OTLP/HTTP protobuf exporter, configured by the standard variables alone
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_EXPORTER_OTLP_TIMEOUT`, ...); `console` prints each span as JSON. The resource is the standard
one (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), with `service.name` "pse" when none is given.

Cleaning (`cleaned`): every string of every span, AutoGen's included, has the configured secrets and
anything shaped like a key replaced (`pse.models.Scrubber`); without content, the attributes that hold
prompts, outputs and tool data (`CONTENT_KEYS`) are dropped from spans PSE did not build too.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import IO, Any, Literal

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult
from opentelemetry.util.types import AttributeValue

from pse.models import Scrubber
from pse.telemetry._attributes import CONTENT_KEYS

__all__ = ["EXPORT_BATCH", "Mode", "cleaned", "exporter", "pse_resource", "send", "spans_json"]

log = logging.getLogger("pse.telemetry")

Mode = Literal["otlp", "console"]
EXPORT_BATCH = 512
"""Spans per export request (the SDK's batch processor's default)."""


def pse_resource() -> Resource:
    """The resource of PSE's spans: the environment's (`OTEL_SERVICE_NAME`, ...), else service.name "pse"."""
    try:
        own = version("pse")
    except PackageNotFoundError:  # a source tree that was never installed
        own = "0"
    attributes: dict[str, AttributeValue] = {"service.version": own}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = "pse"
    return Resource.create(attributes)


def exporter(mode: Mode, out: IO[str] | None = None) -> SpanExporter:
    """A new exporter for PSE_OTEL=`mode` (console: to `out`, default stderr)."""
    if mode == "console":
        return ConsoleSpanExporter(out=out or sys.stderr)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _clean_value(value: Any, scrubber: Scrubber) -> Any:
    if isinstance(value, str):
        return scrubber.text(value)
    if isinstance(value, list | tuple):
        return [_clean_value(v, scrubber) for v in value]
    return value


def _clean(attributes: Any, scrubber: Scrubber, content: bool) -> dict[str, Any]:
    return {
        k: _clean_value(v, scrubber)
        for k, v in dict(attributes or {}).items()
        if content or k not in CONTENT_KEYS
    }


def cleaned(
    spans: Iterable[ReadableSpan], scrubber: Scrubber, *, content: bool, resource: Resource | None = None
) -> list[ReadableSpan]:
    """The spans with every secret scrubbed, without content attributes unless `content`, and (given
    `resource`) all of that resource: AutoGen's spans are sent as part of their run."""
    found = []
    for s in spans:
        found.append(
            ReadableSpan(
                name=scrubber.text(s.name),
                context=s.context,
                parent=s.parent,
                resource=resource or s.resource,
                attributes=_clean(s.attributes, scrubber, content),
                events=[
                    Event(e.name, _clean(e.attributes, scrubber, content), e.timestamp) for e in s.events
                ],
                links=s.links,
                kind=s.kind,
                status=s.status,
                start_time=s.start_time,
                end_time=s.end_time,
                instrumentation_scope=s.instrumentation_scope,
            )
        )
    return found


def send(spans: Sequence[ReadableSpan], target: SpanExporter) -> bool:
    """Export `spans` in batches, then shut the exporter down; False when a batch failed (it logs why)."""
    ok = True
    try:
        for i in range(0, len(spans), EXPORT_BATCH):
            if target.export(spans[i : i + EXPORT_BATCH]) != SpanExportResult.SUCCESS:
                ok = False
    finally:
        target.shutdown()
    return ok


def spans_json(spans: Iterable[ReadableSpan]) -> str:
    """The spans as one JSON array (each as the SDK's `to_json` writes a span)."""
    return json.dumps([json.loads(s.to_json(indent=None)) for s in spans], indent=1)
