"""`pse trace export RUN_ID`: a run's spans from its trace, to an OpenTelemetry backend or as JSON.

The spans are those the run sent live under PSE_OTEL (`pse.telemetry`), ids included, so an old run
can be sent afterwards and a run sent twice is the same trace; AutoGen's own spans exist only live.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Literal

import typer

from pse.cli._common import RunsDir, command_settings, err, resolve_run_id, shown
from pse.cli._run import EXIT_ERROR
from pse.engine import load_trace
from pse.exceptions import UserError
from pse.history import run_dir_of

__all__ = ["export_cmd"]


def _endpoint() -> str:
    """Where the OTLP/HTTP exporter sends, read as it reads it."""
    own = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if own:
        return own
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
    return base.rstrip("/") + "/v1/traces"


def export_cmd(
    run_id: Annotated[str, typer.Argument(help="A run id, the start of one, or `last` (the newest run).")],
    otlp: Annotated[
        bool, typer.Option("--otlp", help="Send to OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP protobuf).")
    ] = False,
    console: Annotated[
        bool, typer.Option("--console", help="Print each span as OpenTelemetry's console exporter does.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the spans as one JSON array.")] = False,
    content: Annotated[
        bool | None,
        typer.Option(
            "--content/--no-content",
            help="Include prompts, outputs, tool arguments and results (default: PSE_OTEL_CONTENT).",
        ),
    ] = None,
    runs_dir: RunsDir = None,
) -> None:
    """Export a run's spans (OpenTelemetry, GenAI conventions): the same spans PSE_OTEL sends live."""
    from pse.telemetry import export_trace

    flags: dict[str, Literal["otlp", "console", "json"]] = {
        "--otlp": "otlp",
        "--console": "console",
        "--json": "json",
    }
    chosen = [flag for flag, on in zip(flags, (otlp, console, as_json), strict=True) if on]
    if len(chosen) > 1:
        raise UserError(f"choose one of {', '.join(chosen)}: where the spans go")
    settings = command_settings(runs_dir=runs_dir)
    if not chosen and settings.otel == "off":
        raise UserError("say where the spans go: --otlp, --console or --json (or set PSE_OTEL)")
    target = flags[chosen[0]] if chosen else flags[f"--{settings.otel}"]
    run_id = resolve_run_id(run_id, settings)
    trace = load_trace(run_dir_of(settings.runs_dir, run_id), beneath=settings.runs_dir)
    with_content = settings.otel_content if content is None else content
    sent, ok = export_trace(trace, target, content=with_content, secrets=settings.secrets(), out=sys.stdout)
    if target == "json":
        return
    where = _endpoint() if target == "otlp" else "the console"
    if not ok:
        err.print(
            f"[bold red]error:[/] the export of run {shown(run_id)} to {shown(where)} failed (see the log "
            "above); check OTEL_EXPORTER_OTLP_ENDPOINT and that the collector runs",
            highlight=False,
        )
        raise typer.Exit(EXIT_ERROR)
    err.print(f"exported {sent} spans of run {shown(run_id)} to {shown(where)}", highlight=False)
