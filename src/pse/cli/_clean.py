"""`pse clean`: prune expired runs (or all of them) and their rows in the run store."""

from __future__ import annotations

from typing import Annotated

import typer

from pse.cli._common import RunsDir, command_settings, out, shown
from pse.history import list_runs
from pse.store import open_store
from pse.trace import prune_runs, remove_run

__all__ = ["clean_cmd"]


def clean_cmd(
    runs_dir: RunsDir = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Delete every run, not only expired ones.")] = False,
) -> None:
    """Delete runs older than PSE_TRACE_RETENTION_DAYS (or all with --all), with their worktrees (--repo)."""
    settings = command_settings(runs_dir=runs_dir)
    if not settings.runs_dir.is_dir():  # nothing to prune, and no folder or store to create
        out.print(f"removed 0 run(s) (no runs folder at {shown(settings.runs_dir)})", highlight=False)
        return
    if all_runs:
        removed = [e.run_id for e in list_runs(settings.runs_dir, settings)]
        for run_id in removed:
            remove_run(settings.runs_dir / run_id)
    else:
        removed = prune_runs(settings.runs_dir, settings.trace_retention_days)
    open_store(settings).forget(removed)
    out.print(f"removed {len(removed)} run(s)")
