"""`pse trace list` and `pse trace show RUN_ID`: read run traces."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from pse._run_files import MAX_TRACE_BYTES, read_beneath
from pse.cli._common import RunsDir, command_settings, out, shown
from pse.cli._live import strip_control
from pse.engine import load_trace
from pse.history import list_runs, run_dir_of

__all__ = ["trace_app"]

trace_app = typer.Typer(help="Read run traces.", no_args_is_help=True)


def _waiting(state: str) -> str:
    return {"AWAITING_ANSWER": "waiting for answers", "AWAITING_APPROVAL": "waiting for approval"}.get(
        state, "running/interrupted"
    )


@trace_app.command("list")
def trace_list(
    runs_dir: RunsDir = None,
    limit: Annotated[int, typer.Option(help="Show at most this many runs.")] = 30,
) -> None:
    """List runs, newest first."""
    from pse.cli._live import outcome_style

    settings = command_settings(runs_dir=runs_dir)
    table = Table("run id", "task", "outcome", "cycles", "tokens", "cost", "started")
    for e in list_runs(settings.runs_dir, settings, limit=limit):
        style = outcome_style(e.outcome)
        table.add_row(
            shown(e.run_id),
            shown(e.task)
            + (
                f"\n[dim]{shown(e.tags['arm'])} · {shown(e.tags.get('eval', ''))}[/]"
                if "arm" in e.tags
                else ""
            ),
            f"[{style}]{shown(e.outcome or _waiting(e.state))}[/]",
            str(e.cycles),
            f"{e.tokens:,}",
            f"{e.cost:.4f} {shown(e.currency)}",
            shown(e.started_at),
        )
    out.print(table)


@trace_app.command("show")
def trace_show(
    run_id: str,
    runs_dir: RunsDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw trace JSON.")] = False,
) -> None:
    """Show one run: cycles, verdicts, gates, tool decisions and tokens."""
    from pse.cli._live import outcome_style, token_table

    settings = command_settings(runs_dir=runs_dir)
    path = run_dir_of(settings.runs_dir, run_id)
    if as_json:
        # The file holds whatever a tool wrote there. Valid JSON has no raw C0 controls, and dropping
        # C1 ones from its strings keeps it valid, so the output stays JSON for jq.
        raw = read_beneath(settings.runs_dir, [run_id, "trace.json"], max_bytes=MAX_TRACE_BYTES)
        print(strip_control(raw.decode("utf-8")))
        return
    trace = load_trace(path, beneath=settings.runs_dir)
    out.print(
        f"[bold]{shown(trace.task)}[/] {shown(trace.run_id)}: "
        f"[{outcome_style(trace.outcome)}]{trace.outcome}[/] — {shown(trace.outcome_reason)}",
        highlight=False,
    )
    for c in trace.cycles:
        verdict = (
            f"{c.verdict.status} ({c.verdict.reason_code})" if c.verdict else (c.review_error or "no verdict")
        )
        out.print(
            f"\n[bold]cycle {c.index}[/] {c.kind}: {shown(verdict)} → {shown(c.result)} "
            f"{shown(c.result_reason)}",
            highlight=False,
        )
        for crit in c.verdict.criteria if c.verdict else []:
            mark = "[green]✓[/]" if crit.met else "[red]✗[/]"
            out.print(f"  {mark} {shown(crit.id)}: {shown(crit.finding)}", highlight=False)
        for failure in c.gate.failures:
            out.print(f"  [red]gate[/] {shown(failure)}", highlight=False)
        for drift in c.drifts:
            out.print(
                f"  [yellow]drift[/] {shown(drift.role)} turn {drift.turn}, message {drift.message} "
                f"({shown(drift.speaker)}): tool output differs from the recording",
                highlight=False,
            )
        for call in c.tool_calls:
            colour = "green" if call.decision == "allowed" else "red"
            out.print(
                f"  {shown(call.requester)} → {shown(call.tool)} [{colour}]{shown(call.decision)}[/] "
                f"{shown(call.status)} ({shown(call.rule)})",
                highlight=False,
            )
    out.print(token_table(trace))
