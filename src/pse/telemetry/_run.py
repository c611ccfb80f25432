"""A run's OpenTelemetry export (PSE_OTEL), and the same spans sent afterwards from a trace.

Importable without the `otel` extra: OpenTelemetry is imported only once a run or a caller asks for it,
and then its absence is a `ConfigError` that names `pip install 'pse[otel]'`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any, Literal

from pse.config import Settings
from pse.events import CycleStarted, Event, OutcomeEvent, VerdictEvent
from pse.exceptions import ConfigError
from pse.models import Scrubber
from pse.trace import Trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["OTEL_EXTRA", "RunTelemetry", "export_trace", "require_otel", "telemetry_for", "trace_spans"]

log = logging.getLogger("pse.telemetry")

OTEL_EXTRA = "pip install 'pse[otel]'"
"""What installs what the export needs: the OpenTelemetry SDK and its OTLP/HTTP exporter."""


def require_otel(asked_by: str = "PSE_OTEL") -> None:
    """Check that the `otel` extra is installed.

    Raises:
        ConfigError: it is not; the message says what asked for it and how to install it.
    """
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"{asked_by} exports OpenTelemetry spans, and the OpenTelemetry SDK or its OTLP exporter is not "
            f"installed ({exc}): {OTEL_EXTRA}, or set PSE_OTEL=off"
        ) from exc


class RunTelemetry:
    """One run's export: AutoGen's spans parented to the cycle span while a cycle runs, and at the run's
    end its spans, built from its trace, sent with AutoGen's through the exporter PSE_OTEL names.

    Args:
        settings: PSE_OTEL (otlp or console), PSE_OTEL_CONTENT, and the secrets to scrub.
        run_id: the run (its trace id and cycle span ids follow from it).

    Raises:
        ConfigError: the `otel` extra is not installed.
    """

    def __init__(self, settings: Settings, run_id: str) -> None:
        require_otel()
        from pse.telemetry._autogen import collector
        from pse.telemetry._export import pse_resource
        from pse.telemetry._tree import trace_id_of

        assert settings.otel != "off", "a run with PSE_OTEL=off has no telemetry"
        self.mode: Literal["otlp", "console"] = settings.otel
        self.content = settings.otel_content
        self.run_id = run_id
        self._scrubber = Scrubber(settings.secrets())
        self._resource = pse_resource()
        self._collector = collector(self._resource)
        self._trace_id = trace_id_of(run_id)
        self._token: Any = None

    def watch(self, consumer: Callable[[Event], None] | None) -> Callable[[Event], None]:
        """The run's event sink: the cycle span made current as each cycle begins, then `consumer`."""

        def sink(event: Event) -> None:
            try:
                if isinstance(event, CycleStarted):
                    self._enter(event.cycle)
                elif isinstance(event, VerdictEvent | OutcomeEvent):
                    self._leave()
            except Exception:  # the export is an observer: it never stops the consumer or the run
                log.exception("OpenTelemetry context of run %s", self.run_id)
            if consumer is not None:
                consumer(event)

        return sink

    def _enter(self, cycle: int) -> None:
        """Make the cycle span the current span of the engine's task: AutoGen's spans become its children
        (the cycle's phases, and their runtimes' tasks, start in this context)."""
        from opentelemetry import context, trace

        from pse.telemetry._tree import cycle_span_context

        self._leave()
        if self._collector is not None:
            self._collector.watch(self._trace_id)
        parent = trace.NonRecordingSpan(cycle_span_context(self.run_id, cycle))
        self._token = context.attach(trace.set_span_in_context(parent))

    def _leave(self) -> None:
        if self._token is not None:
            from opentelemetry import context

            token, self._token = self._token, None
            context.detach(token)

    async def export(self, trace: Trace) -> bool:
        """Send the run's spans (off the event loop). Never raises: a failed export is logged."""
        self._leave()
        return await asyncio.to_thread(self._export, trace)

    def _export(self, trace: Trace) -> bool:
        from pse.telemetry._export import cleaned, exporter, send
        from pse.telemetry._spans import build_spans

        try:
            foreign, dropped = self._collector.take(self._trace_id) if self._collector else ([], 0)
            if dropped:
                log.warning("run %s: %d AutoGen spans over the limit were not exported", self.run_id, dropped)
            spans = build_spans(trace, content=self.content, resource=self._resource) + foreign
            clean = cleaned(spans, self._scrubber, content=self.content, resource=self._resource)
            ok = send(clean, exporter(self.mode))
        except Exception:
            log.exception("OpenTelemetry export of run %s failed", self.run_id)
            return False
        if not ok:
            log.warning(
                "OpenTelemetry export of run %s failed (PSE_OTEL=%s): see the log above",
                self.run_id,
                self.mode,
            )
        return ok


def telemetry_for(settings: Settings, run_id: str) -> RunTelemetry | None:
    """The run's telemetry under PSE_OTEL, or None when it is off.

    Raises:
        ConfigError: PSE_OTEL is on and the `otel` extra is not installed.
    """
    return None if settings.otel == "off" else RunTelemetry(settings, run_id)


def trace_spans(
    trace: Trace, *, content: bool = False, secrets: Iterable[tuple[str, str]] = ()
) -> list[ReadableSpan]:
    """The spans of a run, built from its trace and cleaned as a run's export cleans them.

    Args:
        trace: the run's trace (finished or not).
        content: also prompts, outputs, tool arguments and results (PSE_OTEL_CONTENT).
        secrets: NAME → value pairs to scrub besides key-shaped text (`Settings.secrets()`).

    Raises:
        ConfigError: the `otel` extra is not installed.
    """
    require_otel("exporting spans")
    from pse.telemetry._export import cleaned, pse_resource
    from pse.telemetry._spans import build_spans

    spans = build_spans(trace, content=content, resource=pse_resource())
    return cleaned(spans, Scrubber(secrets), content=content)


def export_trace(
    trace: Trace,
    mode: Literal["otlp", "console", "json"],
    *,
    content: bool = False,
    secrets: Iterable[tuple[str, str]] = (),
    out: IO[str] | None = None,
) -> tuple[int, bool]:
    """Send a run's spans now, from its trace: what `pse trace export` does (old runs included).

    Args:
        mode: otlp (configured by the standard OTEL_EXPORTER_OTLP_* variables), console (each span as
            the SDK's console exporter prints it, to `out`) or json (one JSON array, to `out`).
        content / secrets: as `trace_spans`.
        out: where console and json write (default: standard output).

    Returns:
        How many spans there were, and whether the exporter took them all.

    Raises:
        ConfigError: the `otel` extra is not installed.
    """
    from pse.telemetry._export import exporter, send, spans_json

    spans = trace_spans(trace, content=content, secrets=secrets)
    if mode == "json":
        (out or sys.stdout).write(spans_json(spans) + "\n")
        return len(spans), True
    return len(spans), send(spans, exporter(mode, out or sys.stdout))
