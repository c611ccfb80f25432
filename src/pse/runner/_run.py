"""Running a prepared run to its end, and the Python API (`pse.run` / `pse.arun`) over it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from autogen_agentchat.base import ChatAgent
from pydantic import BaseModel, Field

from pse.config import Settings, load_settings, with_overrides
from pse.engine import (
    RunTokens,
    Trace,
)
from pse.events import Cost, Event
from pse.runner._prepare import prepare_run
from pse.runner._wiring import PreparedRun

__all__ = ["RunSummary", "arun", "run", "run_to_end", "summarize"]


class RunSummary(BaseModel):
    """What `pse run --json` prints: the public summary of a finished run (paths absolute)."""

    run_id: str
    task: str
    outcome: str | None
    outcome_reason: str
    cycles: int
    trace: str
    report: str | None
    escalation: str | None
    tokens: RunTokens
    cost: Cost
    state: str = Field(
        "",
        description="its state: an outcome's, or AWAITING_ANSWER / AWAITING_APPROVAL (waiting for a person)",
    )
    branch: str | None = Field(None, description="a repository run's branch, `pse/<run_id>` (else None)")
    commit: str | None = Field(None, description="the run's commit on `branch` (PASSED with a change only)")
    patch: str | None = Field(
        None, description="`change.patch` in the run folder, when the run changed files"
    )


async def run_to_end(prepared: PreparedRun) -> RunSummary:
    """Run the engine (its end writes the report and the trace), then close the clients, save a recording
    and export the spans (PSE_OTEL)."""
    try:
        trace = await prepared.engine.run()
    finally:
        if prepared.mcp is not None:  # joins each server's thread: off the event loop
            await asyncio.to_thread(prepared.mcp.servers.stop)
        for client in prepared.clients.values():
            await client.close()
        if prepared.recorder is not None:
            prepared.recorder.save()
        if prepared.telemetry is not None:  # whatever the outcome; a failed export is logged, never raised
            await prepared.telemetry.export(prepared.engine.trace)
    return summarize(trace, prepared.run_dir)


async def arun(
    task: str,
    *,
    inputs: dict[str, str] | None = None,
    settings: Settings | None = None,
    on_event: Callable[[Event], None] | None = None,
    agents: Mapping[str, ChatAgent] | None = None,
    repo: str | Path | None = None,
    base: str | None = None,
    **overrides: Any,
) -> RunSummary:
    """Run a task to its outcome from Python (async). The programmatic twin of `pse run`.

    Args:
        task: the task name.
        inputs: the task's inputs (`--input KEY=VALUE`).
        settings: settings to use; default: read from the environment and `.env`.
        on_event: called with every engine event (the same events the live view and dashboard get).
        agents: role name → your own AutoGen `ChatAgent` for that role, named as the role (e.g.
            `{"Specialist": my_agent}`): it works in the role's group chat beside the ToolAgent, gets
            the role's opening as its task, and is policed like the built-in agent (its tool requests
            go through the role's policy, its final message through the parser and the gates).
        repo: work on this git repository (`--repo`): the workspace is a worktree of it on the branch
            `pse/<run_id>`; a PASSED run commits its change there (`summary.branch`, `summary.commit`,
            `summary.patch`).
        base: the ref the worktree starts from (`--base`, default HEAD).
        **overrides: settings fields to override, e.g. `provider="openai"`, `max_partial_retries=1`.

    Returns:
        The run's summary; `summary.trace` is the path of its trace.

    Raises:
        UserError: unknown task, bad input or configuration (nothing is left behind).
    """
    settings_ = load_settings(**overrides) if settings is None else with_overrides(settings, **overrides)
    prepared = prepare_run(
        task,
        settings_,
        inputs=inputs,
        on_event=on_event,
        agents=agents,
        repo=Path(repo) if repo is not None else None,
        base=base,
    )
    return await run_to_end(prepared)


def run(
    task: str,
    *,
    inputs: dict[str, str] | None = None,
    settings: Settings | None = None,
    on_event: Callable[[Event], None] | None = None,
    agents: Mapping[str, ChatAgent] | None = None,
    repo: str | Path | None = None,
    base: str | None = None,
    **overrides: Any,
) -> RunSummary:
    """Run a task to its outcome from Python (blocking). See `arun`.

    Example:
        >>> import pse
        >>> summary = pse.run("code-delivery", runs_dir="/tmp/pse-runs")  # doctest: +SKIP
        >>> summary.outcome  # doctest: +SKIP
        'PASSED'
    """
    return asyncio.run(
        arun(
            task,
            inputs=inputs,
            settings=settings,
            on_event=on_event,
            agents=agents,
            repo=repo,
            base=base,
            **overrides,
        )
    )


def summarize(trace: Trace, run_dir: Path) -> RunSummary:
    """The public summary of a trace."""
    return RunSummary(
        run_id=trace.run_id,
        task=trace.task,
        outcome=trace.outcome,
        state=trace.state,
        outcome_reason=trace.outcome_reason,
        cycles=len(trace.cycles),
        trace=str((run_dir / "trace.json").resolve()),
        report=trace.report,
        escalation=trace.escalation,
        tokens=trace.tokens.model_copy(deep=True),
        cost=trace.cost.model_copy(deep=True),
        branch=trace.repository.branch if trace.repository is not None else None,
        commit=trace.repository.commit if trace.repository is not None else None,
        patch=trace.repository.patch if trace.repository is not None else None,
    )
