"""The run's one stop (`RunStop`): the first reason wins, typed, and each stop cuts short what it owes."""

from __future__ import annotations

import asyncio
import dataclasses

from pse.config import load_settings
from pse.engine import CycleStop, LoopLimits, RunStop, StopKind
from pse.exceptions import RunCancelled, RunFailure, ToolInfrastructureError
from pse.roles import TOOL_AGENT, Role
from pse.runner._limits import loop_limits
from pse.team import FailureBox


class _Tools:
    """The tool machinery as a stop sees it, recording what it was told."""

    def __init__(self) -> None:
        self.infrastructure_error: RunFailure | None = None
        self.halts: list[str] = []
        self.deadline: float | None = None

    def stop_at(self, deadline: float | None) -> None:
        self.deadline = deadline

    def halt(self, reason: str) -> None:
        self.halts.append(reason)


def _stop(budget: list[str | None] | None = None) -> tuple[RunStop, _Tools]:
    tools = _Tools()
    left = budget if budget is not None else [None]
    return RunStop(tools, None, lambda: left[0]), tools


async def test_a_cancellation_is_kept_first_and_cancels_the_model_call_and_the_tools() -> None:
    stop, tools = _stop()
    stop.start(asyncio.get_running_loop().time() + 60)
    box = FailureBox()
    with stop.cycle(box) as token:
        stop.cancel("by the test")
        stop.cancel("a second time")  # the first reason stands, and nothing is halted twice
        stop.expire()
        assert token.is_cancelled()
        assert stop.reason is not None and stop.reason.kind is StopKind.CANCELLED
        assert stop.cancelled == CycleStop("ERROR", "CANCELLED: by the test")
        assert stop.expired is None and not stop.suspended
        assert tools.halts == ["the run was cancelled: by the test"]
        # Any message the phase files now stops the cycle with the run's first reason.
        assert stop.after_message(Role.SPECIALIST) == CycleStop("ERROR", "CANCELLED: by the test")
    assert stop.before_cycle() == CycleStop("ERROR", "CANCELLED: by the test")
    # A cycle that starts after a cancellation starts cancelled.
    with stop.cycle(FailureBox()) as token:
        assert token.is_cancelled()


async def test_the_deadline_closes_the_box_and_cancels_the_token_of_the_cycle_only() -> None:
    stop, tools = _stop()
    stop.start(asyncio.get_running_loop().time() + 0.01)
    assert tools.deadline == stop.deadline
    box = FailureBox()
    with stop.cycle(box) as token:
        await asyncio.sleep(0.05)
        assert token.is_cancelled()
        assert box.closed == "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)"
        try:
            box.check_open()
        except RunCancelled:
            pass
        else:
            raise AssertionError("a closed box must refuse a model call")
    assert stop.expired == CycleStop("TIMEOUT", "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)")
    stop.cancel("too late")  # the deadline came first and stands; the tools are halted all the same
    assert stop.reason is not None and stop.reason.kind is StopKind.DEADLINE
    assert tools.halts == ["the run was cancelled: too late"]
    assert stop.before_cycle() == stop.expired


async def test_after_a_message_the_tool_machinery_then_the_budget_stop_the_cycle() -> None:
    budget: list[str | None] = [None]
    stop, tools = _stop(budget)
    stop.start(asyncio.get_running_loop().time() + 60)
    with stop.cycle(FailureBox()) as token:
        assert stop.after_message(TOOL_AGENT) is None and not token.is_cancelled()
        tools.infrastructure_error = ToolInfrastructureError("bwrap is gone")
        # Only a ToolAgent message brings the tool machinery's failure.
        assert stop.after_message(Role.SPECIALIST) is None
        assert stop.after_message(TOOL_AGENT) == CycleStop(
            "ERROR", "tool infrastructure failed: bwrap is gone"
        )
        assert token.is_cancelled() and stop.reason is not None
        assert stop.reason.kind is StopKind.INFRASTRUCTURE
    spent, _ = _stop(["token budget exhausted: 9 of 8 (PSE_TOKEN_BUDGET)"])
    spent.start(asyncio.get_running_loop().time() + 60)
    with spent.cycle(FailureBox()) as token:
        assert spent.after_message(Role.PLANNER) == CycleStop(
            "TIMEOUT", "token budget exhausted: 9 of 8 (PSE_TOKEN_BUDGET)"
        )
        assert token.is_cancelled()


async def test_a_suspension_releases_the_held_call_and_is_not_a_cancellation() -> None:
    stop, tools = _stop()
    stop.start(asyncio.get_running_loop().time() + 60)
    with stop.cycle(FailureBox()) as token:
        stop.suspend()
        assert token.is_cancelled() and stop.suspended and stop.cancelled is None
    assert tools.halts == []  # the run waits on disk: its tools are halted when it ends (`end`)
    stop.end()
    assert tools.halts == ["the run has ended"]


def test_the_loop_limits_are_the_settings_of_the_same_names() -> None:
    settings = load_settings(turns_per_cycle=7, max_fail_retries=0, cost_budget=1.5, run_timeout_s=9.0)
    limits = loop_limits(settings)
    assert isinstance(limits, LoopLimits)
    for field in dataclasses.fields(LoopLimits):
        assert getattr(limits, field.name) == getattr(settings, field.name), field.name
    assert (limits.turns_per_cycle, limits.max_fail_retries, limits.cost_budget) == (7, 0, 1.5)
