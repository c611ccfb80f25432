"""Preparing a run: its folder and workspace made and seeded (or an interrupted one reopened), then wired."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack

from autogen_agentchat.base import ChatAgent
from autogen_core.models import ChatCompletionClient

from pse.config import Settings
from pse.engine import Resume, new_run_id, prune_runs
from pse.events import Event
from pse.exceptions import UserError
from pse.models import CassettePlayer
from pse.repo import remove_worktree
from pse.runner._repository import RunRepository, load_repository, open_repository, repository_brief
from pse.runner._wiring import PreparedRun, wire
from pse.tasks import Task, TaskRegistry, write_files

__all__ = [
    "PreparedRun",
    "RunOptions",
    "prepare_resume",
    "prepare_run",
    "prepare_task",
    "registry_for",
    "user_tasks_dir",
]


def user_tasks_dir(settings: Settings) -> Path:
    """Where the user's tasks live: PSE_TASKS_DIR or --tasks-dir, else ./tasks (where `pse new` writes)."""
    return settings.tasks_dir or Path("tasks")


def registry_for(settings: Settings) -> TaskRegistry:
    """The task registry: built-in tasks plus the user's tasks directory, PSE_TASKS_DIR / --tasks-dir,
    else ./tasks when it holds tasks (registered or not: an unregistered task folder is warned about)."""
    extra = user_tasks_dir(settings).resolve()  # absolute: check commands run with the workspace as cwd
    return TaskRegistry.discover(extra, optional=settings.tasks_dir is None)


_SWEEP_EVERY_S = 3600.0
"""A process sweeps a runs folder for expired runs at most this often (retention counts in days)."""

_swept: dict[Path, float] = {}
_sweep_lock = threading.Lock()


def _sweep(runs_dir: Path, retention_days: int, run_id: str) -> None:
    """Prune the runs folder's expired runs (PSE_TRACE_RETENTION_DAYS), once an hour per process: a
    sweep reads every run folder, so sweeping before each run made a run's start grow with the folder."""
    now = time.monotonic()
    with _sweep_lock:
        last = _swept.get(runs_dir)
        if last is not None and now - last < _SWEEP_EVERY_S:
            return
        _swept[runs_dir] = now
        prune_runs(runs_dir, retention_days, keep={run_id})


class RunOptions(TypedDict, total=False):
    """What `prepare_run` and `prepare_task` take besides the task and the settings; all optional.

    Attributes:
        inputs: the task's inputs, by name.
        on_event: called with every event of the run as it happens.
        run_id: the run's id (default: a new one).
        files: workspace path → content, written after the task's seed (an evaluation instance's
            files); listed in the task message with the seed.
        tags: labels kept in the trace (`pse eval` tags its runs with the eval, arm and instance).
        limits: engine limits that win over the task's own `[limits]` (a suite's).
        agents: role name → the user's own AutoGen `ChatAgent` for that role (named as the role): it
            takes the role's seat in the role's group chat, and is policed like the built-in one.
        repo: a git repository: the workspace is a worktree of it on the new branch `pse/<run_id>`
            (the repository's working tree, index, current branch and stash are never touched); a
            PASSED run commits its change there and writes `change.patch`.
        base: the ref the worktree starts from (default HEAD); only with `repo`.
    """

    inputs: dict[str, str] | None
    on_event: Callable[[Event], None] | None
    run_id: str | None
    files: Mapping[str, str] | None
    tags: Mapping[str, str] | None
    limits: Mapping[str, Any] | None
    agents: Mapping[str, ChatAgent] | None
    repo: Path | None
    base: str | None


def prepare_run(task_name: str, settings: Settings, **options: Unpack[RunOptions]) -> PreparedRun:
    """Create the run folder and workspace, seed it, and wire the engine.

    Args:
        task_name: a task of the registry (`registry_for(settings)`).
        **options: see `RunOptions`.

    Raises:
        TaskNotFoundError: no such task.
        UserError / ConfigError / CassetteError: a bad input, setting or cassette (nothing is left behind).
        TypeError: an option that is none of `RunOptions`.
    """
    _refuse_unknown(options, "prepare_run")
    return prepare_task(registry_for(settings).get(task_name), settings, **options)


def prepare_task(
    task: Task,
    settings: Settings,
    *,
    player: CassettePlayer | None = None,
    models: Mapping[str, ChatCompletionClient] | None = None,
    **options: Unpack[RunOptions],
) -> PreparedRun:
    """`prepare_run` for a task object: a registry's, or one built in memory (`pse.testing`).

    Args:
        player: the roles' scripted turns, in memory (default: the cassette of the settings or the task).
        models: role name → a model client of the caller's for that role (`pse.testing`'s models, or any
            AutoGen `ChatCompletionClient`), used as it is; its usage counts against the run's budgets.
        **options: see `RunOptions`.

    Raises:
        UserError / ConfigError / CassetteError: a bad input, setting or cassette (nothing is left behind).
        TypeError: an option that is none of `RunOptions`.
    """
    _refuse_unknown(options, "prepare_task")
    repo, base = options.get("repo"), options.get("base")
    resolved = task.resolve_inputs(options.get("inputs"))
    task = task.for_inputs(resolved)  # a repository's own check command (code-change's TEST_COMMAND)
    run_id = options.get("run_id") or new_run_id(task.name)
    runs_dir = settings.runs_dir.resolve()
    run_dir = runs_dir / run_id
    workspace = run_dir / "workspace"
    if repo is None and task.config.repository.required:
        raise UserError(
            f"task {task.name!r} works on a git repository; fix: pass --repo PATH (in Python: repo=PATH)"
        )
    if base is not None and repo is None:
        raise UserError(
            f"--base {base} needs --repo PATH; fix: pass the repository too (--repo PATH --base REF)"
        )
    _sweep(runs_dir, settings.trace_retention_days, run_id)
    run_dir.mkdir(parents=True)
    repository: RunRepository | None = None
    try:
        if repo is not None:
            repository = open_repository(task, repo, base, run_id, run_dir)
        else:
            workspace.mkdir()
        task.seed_workspace(workspace, resolved)
        extra = write_files(workspace, options.get("files") or {})
        summary_md = workspace / "rules_summary.md"
        rules_summary = summary_md.read_text(encoding="utf-8") if summary_md.is_file() else None
        listed = [*extra, *sorted(repository.files.tracked)] if repository is not None else extra
        message = task.task_message(resolved, rules_summary, extra_files=listed)
        if repository is not None:
            message += "\n" + repository_brief(repository) + "\n"
        prepared = wire(
            task=task,
            settings=settings,
            run_id=run_id,
            run_dir=run_dir,
            workspace=workspace,
            task_message=message,
            inputs=resolved,
            on_event=options.get("on_event"),
            resume=None,
            tags=options.get("tags"),
            limits=options.get("limits"),
            agents=options.get("agents"),
            repository=repository,
            player=player,
            models=models,
        )
    except BaseException:
        import shutil

        remove_worktree(run_dir)  # nothing is left behind: no worktree, no branch
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return prepared


def _refuse_unknown(options: Mapping[str, object], caller: str) -> None:
    """A keyword that is no option is a mistake said at once, as a plain signature would say it."""
    unknown = sorted(set(options) - RunOptions.__optional_keys__)
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")


def prepare_resume(
    run_id: str,
    settings: Settings,
    *,
    on_event: Callable[[Event], None] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> PreparedRun:
    """Wire an engine that goes on with an interrupted run (same counters, same cassette position): the
    run's trace loaded, cut back to where it goes on from (`engine.Resume`).

    Raises:
        UserError: the id is malformed, the run does not exist or it already has an outcome.
    """
    runs_dir = settings.runs_dir.resolve()
    resume = Resume.load(runs_dir, run_id)
    trace, run_dir = resume.trace, runs_dir / run_id
    task = registry_for(settings).get(trace.task).for_inputs(trace.inputs)
    return wire(
        task=task,
        settings=resume.settings(settings),
        run_id=run_id,
        run_dir=run_dir,
        workspace=run_dir / "workspace",
        task_message=trace.task_message,
        inputs=trace.inputs,
        on_event=on_event,
        resume=resume,
        limits=limits,
        repository=load_repository(task, run_dir),
    )
