"""`pse clean`: delete runs (expired ones, the ones named, or all), their worktrees and branches, and their
rows in the run store; then say what runs still hold in a repository.

A repository run that ended for good has left nothing in the repository but a branch holding its commit
(`pse.repo.release_worktree`); one that can still go on (ESCALATED, waiting, cancelled, interrupted) keeps
its worktree and branch until it is cleaned: `pse clean RUN_ID` is the way out for one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pse.cli._common import RunsDir, command_settings, out, resolve_run_id, shown
from pse.exceptions import UserError
from pse.history import list_runs
from pse.repo import GitFailed, git, held_worktrees, read_record
from pse.store import open_store
from pse.trace import prune_runs, remove_run

__all__ = ["clean_cmd"]


def clean_cmd(
    run_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Runs to delete now, whatever their age: ids, starts of ids, or `last`."),
    ] = None,
    runs_dir: RunsDir = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Delete every run, not only expired ones.")] = False,
) -> None:
    """Delete runs older than PSE_TRACE_RETENTION_DAYS, the runs named, or all (--all), with their
    worktrees and branches (--repo).

    A branch that holds a run's commit stays. Without run ids, it also lists the runs that still hold a
    worktree and a branch in a repository (they can go on: ESCALATED, waiting, cancelled, interrupted).
    """
    settings = command_settings(runs_dir=runs_dir)
    if run_ids and all_runs:
        raise UserError("pass run ids or --all, not both; fix: `pse clean RUN_ID…` or `pse clean --all`")
    if not settings.runs_dir.is_dir():  # nothing to prune, and no folder or store to create
        if run_ids:
            raise UserError(
                f"no runs folder at {settings.runs_dir}, so no run {run_ids[0]!r}; pass --runs-dir"
            )
        out.print(f"removed 0 run(s) (no runs folder at {shown(settings.runs_dir)})", highlight=False)
        return
    kept: list[str] = []
    if run_ids:
        named = list(dict.fromkeys(resolve_run_id(text, settings) for text in run_ids))
        missing = [run_id for run_id in named if not (settings.runs_dir / run_id / "trace.json").is_file()]
        if missing:
            raise UserError(f"no run {missing[0]!r} in {settings.runs_dir}; `pse trace list` shows the runs")
        for run_id in named:
            kept += _removed(settings.runs_dir / run_id)
        removed = named
    elif all_runs:
        removed = [e.run_id for e in list_runs(settings.runs_dir, settings)]
        for run_id in removed:
            kept += _removed(settings.runs_dir / run_id)
    else:
        removed = prune_runs(settings.runs_dir, settings.trace_retention_days)
    open_store(settings).forget(removed)
    out.print(f"removed {len(removed)} run(s)")
    for line in kept:
        out.print(line, highlight=False)
    _tell_held(settings.runs_dir)


def _removed(run_dir: Path) -> list[str]:
    """Delete one run; what of it stays in a repository (a branch that holds its commit), one line each."""
    try:
        record = read_record(run_dir)
    except (OSError, ValueError):
        record = None
    remove_run(run_dir)
    if record is None:
        return []
    repo = Path(record.path)
    try:
        tip = git(
            ["-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/heads/{record.branch}"], cwd=repo
        )
    except (GitFailed, OSError):
        return []  # gone (or the repository is): nothing left to say
    return [
        f"kept branch {shown(record.branch)} in {shown(repo)}: it holds the run's commit "
        f"{tip.decode().strip()[:12]}; merge it, then `git -C {shown(repo)} branch -D {shown(record.branch)}`"
    ]


def _tell_held(runs_dir: Path) -> None:
    """The runs left that still hold a worktree and a branch in a repository, and how to remove them."""
    held = held_worktrees(runs_dir)
    if not held:
        return
    listed = ", ".join(f"{run_id} in {record.path}" for run_id, record in held[:5])
    more = f" and {len(held) - 5} more" if len(held) > 5 else ""
    out.print(
        f"{len(held)} run(s) can still go on, so each keeps a worktree and a branch pse/<run_id> in its "
        f"repository: {shown(listed)}{more}; `pse clean RUN_ID` removes one, `pse clean --all` every run",
        highlight=False,
    )
