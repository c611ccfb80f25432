"""The engine harness: one whole run of a task object (in memory or a registry's), to its end, in process."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from autogen_agentchat.base import ChatAgent
from autogen_core.models import ChatCompletionClient
from pydantic import ValidationError

from pse.config import Settings, load_settings, with_overrides
from pse.engine import Trace, load_trace
from pse.events import Event
from pse.exceptions import CassetteError
from pse.models import Cassette, CassettePlayer, CassetteTurn
from pse.runner import PreparedRun, RunSummary, prepare_task, run_to_end
from pse.tasks import Task, TaskConfig

__all__ = ["TaskRun", "in_memory_task", "run_task"]

DEFAULT_NAME = "test-task"
"""The name of a task built in memory when none is given."""


class TaskRun(NamedTuple):
    """What `run_task` gives back: `summary, trace, prepared = await run_task(...)`."""

    summary: RunSummary
    """The run's public summary, as `pse.arun` returns it."""
    trace: Trace
    """The trace as the run recorded it (read back from its `trace.json`)."""
    prepared: PreparedRun
    """The wired run: its workspace, its clients, the cassette player of its turns (`player`)."""


def in_memory_task(
    config: TaskConfig | Mapping[str, Any],
    *,
    name: str = DEFAULT_NAME,
    prompts: Mapping[str, str] | None = None,
) -> Task:
    """A task with no folder: its config (the keys of `task.toml`) and the roles' own prompts.

    Args:
        config: a `TaskConfig`, or its keys (`goal`, `expected_outputs`, `required_checks`, `checks`,
            `limits`, ...); `description` defaults to the goal's first line.
        name: the task's name (the trace's `task`, the run id's prefix).
        prompts: role name → what this task tells that role, after the role's base prompt (a role
            without one reads its base prompt only).

    Raises:
        UserError: the config needs a folder (`seed`, `cassette`, a check using `{task_dir}`) or a
            prompt is for no role. pydantic.ValidationError: the config is not a valid `task.toml`.
    """
    if not isinstance(config, TaskConfig):
        fields = dict(config)
        fields.setdefault("description", str(fields.get("goal", name)).strip().splitlines()[0])
        config = TaskConfig.model_validate(fields)
    return Task(name, config, prompts)


async def run_task(
    task: Task | TaskConfig | Mapping[str, Any],
    *,
    turns: Sequence[tuple[str, str]] = (),
    models: Mapping[str, ChatCompletionClient] | None = None,
    agents: Mapping[str, ChatAgent] | None = None,
    workspace_files: Mapping[str, str] | None = None,
    prompts: Mapping[str, str] | None = None,
    inputs: dict[str, str] | None = None,
    settings: Settings | None = None,
    on_event: Callable[[Event], None] | None = None,
    **overrides: Any,
) -> TaskRun:
    """Run `task` to its end with the roles' replies given in process: no task folder, no cassette file.

    The run is wired as `pse run` wires one (`pse.runner.prepare_task`): the same policy, ToolAgent,
    sandbox, gates and trace; only the task and the models come from memory.

    Args:
        task: a task (`in_memory_task(...)`, or a registry's, e.g. `TaskRegistry.discover(None).get(name)`),
            or a task's config (`TaskConfig` or its keys), built in memory with `prompts`.
        turns: `(role, text)` in the order spoken: each role's replies, played by PSE's cassette player
            as a cassette file's would be (`prepared.player` keeps every request and position).
        models: role name → a model client for that role (`FunctionModel`, `ScriptedModel`, any AutoGen
            `ChatCompletionClient`); a role without one answers from `turns`.
        agents: role name → your own AutoGen `ChatAgent` for that role (as `pse.arun`'s `agents`).
        workspace_files: workspace path → text, written before the run (listed in the task message).
        prompts: with a config for `task`: role name → that role's task prompt.
        inputs: the task's inputs.
        settings: the settings to start from; default: read from the environment, as `pse.arun` does.
        on_event: called with every engine event.
        **overrides: settings fields, e.g. `max_partial_retries=0`, `sandbox="fallback"`. Without
            `runs_dir` (here or in `settings`), the run folder goes to a new temporary directory.

    Returns:
        The summary, the recorded trace and the prepared run.

    Raises:
        UserError / ConfigError / CassetteError: as `pse.arun` (a bad input, setting or turn).
    """
    if not isinstance(task, Task):
        task = in_memory_task(task, prompts=prompts)
    elif prompts is not None:
        raise TypeError("prompts are for a task built from a config; a Task object has its own")
    if settings is None and "runs_dir" not in overrides:
        overrides["runs_dir"] = Path(tempfile.mkdtemp(prefix="pse-testing-"))
    settings = load_settings(**overrides) if settings is None else with_overrides(settings, **overrides)
    given = models or {}
    scripted = [
        r for r in settings.crew.speakers if r not in given and settings.model_spec(r).provider == "scripted"
    ]
    player = None
    if turns or scripted:
        player = CassettePlayer(_cassette(turns), source="<pse.testing turns>")
    prepared = prepare_task(
        task,
        settings,
        inputs=inputs,
        on_event=on_event,
        files=workspace_files,
        agents=agents,
        player=player,
        models=models,
    )
    summary = await run_to_end(prepared)
    return TaskRun(summary, load_trace(Path(summary.trace)), prepared)


def _cassette(turns: Sequence[tuple[str, str]]) -> Cassette:
    """The turns as a cassette in memory; a key `ROLE@STEP` is one step's turn of a steps plan.

    Raises:
        CassetteError: a turn of no role.
    """
    spoken = [(key.partition("@"), text) for key, text in turns]
    try:
        return Cassette(
            turns=[
                CassetteTurn(role=role, step=step or None, content=text) for (role, _, step), text in spoken
            ]
        )
    except ValidationError as exc:
        raise CassetteError(f"turns: {exc.errors()[0]['msg']}") from None
