"""`pse stats`: the aggregate over all runs, as people read figures (`--json`: as machines do)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table

from pse.cli._common import RunsDir, out, shown
from pse.cli._reading import runs_stats
from pse.cli._trace_list import no_runs_line
from pse.history import Stats

__all__ = ["render_stats", "stats_cmd"]

_NONE = "—"


def _share(value: float | None) -> str:
    """0.3333 → 33.3%; None (nothing to divide by) → —."""
    return _NONE if value is None else f"{value:.1%}".replace(".0%", "%")


def _number(value: float | None, digits: int = 0) -> str:
    return _NONE if value is None else f"{value:,.{digits}f}"


def _cost(stats: Stats) -> str:
    """The cost per passed run; "unpriced" when those runs spent tokens and no price counted them (as the
    run list and the dashboard say it), not a free 0.0000."""
    if stats.cost_per_passed_run is None:
        return _NONE
    if not stats.cost_per_passed_run and stats.tokens_per_passed_run:
        return "unpriced (no model has a price; set PSE_PRICES)"
    return f"{stats.cost_per_passed_run:,.4f} {shown(stats.currency)}"


def render_stats(stats: Stats) -> Table:
    """The statistics as a two-column table: outcomes as counts, rates as percentages, tokens as
    whole numbers, cost in its currency (a dash where nothing was there to count)."""
    outcomes = " · ".join(f"{shown(k)} {v}" for k, v in sorted(stats.outcomes.items())) or _NONE
    rows = [
        ("finished runs", f"{stats.runs:,}"),
        ("outcomes", outcomes),
        ("passed in the first cycle", _share(stats.first_cycle_pass_rate)),
        ("cycles to pass (mean)", _number(stats.mean_cycles_to_pass, 1)),
        ("tool calls", f"{stats.tool_calls:,}"),
        ("tool calls denied", _share(stats.denied_tool_call_rate)),
        ("tokens per passed run", _number(stats.tokens_per_passed_run)),
        ("cost per passed run", _cost(stats)),
        ("handoffs", f"{stats.handoffs:,}"),
        ("handoffs that failed", _share(stats.handoff_failure_rate)),
        ("prompt tokens from a cache", _share(stats.cached_prompt_share)),
        ("prompt tokens a cache could reuse", _share(stats.reusable_prefix_share)),
    ]
    table = Table(box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    return table


def stats_cmd(
    runs_dir: RunsDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as one JSON object.")] = False,
) -> None:
    """Aggregate over all traces: outcomes, first-cycle pass rate, cycles to pass, denied calls, cost."""
    folder, stats = runs_stats(runs_dir)
    if as_json:
        print(stats.model_dump_json())
        return
    out.print(render_stats(stats))
    if not stats.runs:
        out.print(f"[dim]{no_runs_line(folder)}[/]", highlight=False)
