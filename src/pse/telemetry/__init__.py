"""OpenTelemetry export of runs (the `otel` extra): PSE's trace as spans for Jaeger, Tempo, Langfuse, Phoenix.

With PSE_OTEL=otlp (or console) a run sends its spans when it ends, whatever its outcome: one span for
the run, one per cycle, per step attempt, per role turn (`chat`, with the GenAI semantic conventions'
model, provider and token attributes) and per tool call (`execute_tool`, with the ToolAgent's decision,
rule and status); verdicts, gates, transitions, repairs, approvals and escalations are span events.
AutoGen's own spans of a cycle are children of the cycle span and go with them. `pse trace export
RUN_ID --otlp` sends the same spans, ids included, from a trace afterwards: both are built from the
trace alone (`pse.telemetry._spans`).

No prompt, output, tool argument or tool result is exported unless PSE_OTEL_CONTENT=true; configured
secrets and key-shaped strings are scrubbed from every span. docs/observability.md lists every span
and attribute.
"""

from pse.telemetry._run import (
    OTEL_EXTRA,
    RunTelemetry,
    export_trace,
    require_otel,
    telemetry_for,
    trace_spans,
)

__all__ = ["OTEL_EXTRA", "RunTelemetry", "export_trace", "require_otel", "telemetry_for", "trace_spans"]
