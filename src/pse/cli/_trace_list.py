"""`pse trace list`: the runs of a runs folder, newest first.

It never cuts a run id (a narrow terminal drops the columns the id already holds: task, start), and,
like every command that only reads, it creates no runs folder and no run store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from pse.cli._common import LAST_RUN, RunsDir, out, outcome_style, shown
from pse.cli._reading import runs_listed
from pse.history import RunEntry

__all__ = ["no_runs_line", "trace_list", "waiting"]


def no_runs_line(runs_dir: Path) -> str:
    """What a reading command says of a runs folder with no run in it, or none at all."""
    if not runs_dir.is_dir():
        return (
            f"no runs folder at {shown(runs_dir)} (nothing created); `pse run TASK` makes it, or pass "
            "--runs-dir (PSE_RUNS_DIR) for another one"
        )
    return f"no runs in {shown(runs_dir)} yet; `pse run TASK` makes one"


def waiting(state: str) -> str:
    """What a run without an outcome is doing, in the words of the run list."""
    return {"AWAITING_ANSWER": "waiting for answers", "AWAITING_APPROVAL": "waiting for approval"}.get(
        state, "running/interrupted"
    )


def _started(at: str) -> str:
    return at[:16].replace("T", " ") if len(at) >= 16 else at  # 2026-12-01T19:43:33.716+00:00 → minutes


def _runs_table(entries: list[RunEntry], width: int) -> Table:
    """Run id, outcome, cycles and tokens always, the id whole; cost, task and start as width allows."""
    columns: dict[str, list[str]] = {
        "run id": [shown(e.run_id) for e in entries],
        "outcome": [
            f"[{outcome_style(e.outcome)}]{shown(e.outcome or waiting(e.state))}[/]" for e in entries
        ],
        "cycles": [str(e.cycles) for e in entries],
        "tokens": [f"{e.tokens:,}" for e in entries],
        # a run whose model calls cost nothing had no price (the dashboard's "unpriced"), not a free model;
        # one that made no call spent nothing (a dash, as the dashboard shows it)
        "cost": [
            f"{e.cost:.4f} {shown(e.currency)}" if e.cost else "unpriced" if e.tokens else "—"
            for e in entries
        ],
        "task": [
            shown(e.task)
            + (
                f"\n[dim]{shown(e.tags['arm'])} · {shown(e.tags.get('eval', ''))}[/]"
                if "arm" in e.tags
                else ""
            )
            for e in entries
        ],
        "started": [shown(_started(e.started_at)) for e in entries],
    }

    def need(name: str) -> int:
        plain = [Text.from_markup(v).plain for v in columns[name]]
        return max(len(line) for text in [name, *plain] for line in text.splitlines() or [""]) + 2

    outcome_words = max([len(w) for e in entries for w in (e.outcome or waiting(e.state)).split()] + [7])
    used = need("run id") + outcome_words + 2 + need("cycles") + need("tokens")
    shown_columns = ["run id", "outcome", "cycles", "tokens"]
    for optional in ("cost", "task", "started"):
        if used + need(optional) <= width:
            shown_columns.append(optional)
            used += need(optional)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for name in shown_columns:
        numeric = name in ("cycles", "tokens", "cost")
        table.add_column(name, justify="right" if numeric else "left", no_wrap=name == "run id")
    for row in range(len(entries)):
        table.add_row(*(columns[name][row] for name in shown_columns))
    return table


def trace_list(
    runs_dir: RunsDir = None,
    limit: Annotated[int, typer.Option(help="Show at most this many runs.")] = 30,
) -> None:
    """List runs, newest first, with their whole run ids."""
    folder, entries = runs_listed(runs_dir, limit=limit)
    if not entries:
        out.print(no_runs_line(folder), highlight=False)
        return
    out.print(_runs_table(entries, out.width))
    out.print(
        f"[dim]show one: pse trace show RUN_ID (or the start of one, or `{LAST_RUN}`)[/]", highlight=False
    )
