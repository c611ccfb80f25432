"""What every route of the dashboard reads from the app: settings, the run manager, the runs directory,
the run history, and the one check every per-run route starts with (`run_dir`)."""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException, Request

from pse.config import Settings
from pse.engine import is_run_id
from pse.exceptions import UserError
from pse.history import RunHistory, run_dir_of
from pse.web._runs import RunManager

__all__ = ["TRACE", "history_of", "manager_of", "repositories_of", "root_of", "run_dir", "settings_of"]

TRACE = "trace.json"


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def repositories_of(request: Request) -> tuple[str, ...]:
    """The git repositories runs started here may work on (`pse serve --repo PATH`), absolute."""
    return tuple(request.app.state.repositories)


def manager_of(request: Request) -> RunManager:
    manager: RunManager = request.app.state.manager
    return manager


def root_of(request: Request) -> Path:
    root: Path = request.app.state.runs_root
    return root


def history_of(request: Request) -> RunHistory:
    history: RunHistory = request.app.state.history
    return history


def run_dir(request: Request, run_id: str) -> Path:
    """The run's folder: a real directory directly inside the runs directory, holding a trace (or live).

    Only an existence check: every read from the folder goes through the `_security` readers. A 404
    names the run id only, never the runs directory (a server path is nobody's business in a browser).
    """
    if not is_run_id(run_id):
        raise HTTPException(400, f"{run_id[:80]!r} is not a run id")
    root = root_of(request)
    live = manager_of(request).get(run_id)
    if live is not None:
        return live.prepared.run_dir
    try:
        path = run_dir_of(root, run_id)
    except UserError:
        raise HTTPException(404, f"no run {run_id!r}") from None
    if path.is_symlink() or path.resolve().parent != root:
        raise HTTPException(404, f"no run {run_id!r}")
    return path
