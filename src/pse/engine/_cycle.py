"""Run one cycle: stream the team's messages, account for them, move the state as roles speak.

The engine decides what a cycle's result means; this module only runs it and records what
happened: messages with their tokens, the ToolAgent's decisions, the plan, the verdict or the
review error, a `<blocked>`, or why the cycle was stopped (budget, cancellation, infrastructure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import BaseChatMessage
from autogen_agentchat.teams import SelectorGroupChat
from autogen_core import CancellationToken

from pse.engine._state import State
from pse.engine._trace import CycleRecord
from pse.events import MessageRecord, TokenCount
from pse.exceptions import ProtocolError, RunFailure
from pse.protocol import find_blocked, has_tool_calls, parse_plan, parse_verdict
from pse.roles import Role
from pse.team import TASK_SOURCE, TOOL_AGENT, FailureBox

__all__ = ["CycleStop", "run_cycle"]

log = logging.getLogger("pse.engine")


@dataclass
class CycleStop:
    """Why a cycle was stopped before its natural end: TIMEOUT or ERROR, with a reason."""

    outcome: str
    reason: str


class CycleHooks:
    """Callbacks from the cycle into the engine (kept narrow so the cycle cannot steer the run)."""

    def __init__(
        self,
        *,
        transition: Callable[[State, str], None],
        state: Callable[[], State],
        message: Callable[[CycleRecord, MessageRecord, str], None],
        tool_calls: Callable[[CycleRecord], None],
        budget_exceeded: Callable[[], str | None],
        infrastructure_error: Callable[[], RunFailure | None],
    ) -> None:
        self.transition = transition
        self.state = state
        self.message = message
        self.tool_calls = tool_calls
        self.budget_exceeded = budget_exceeded
        self.infrastructure_error = infrastructure_error


def _usage(message: BaseChatMessage) -> tuple[int, int]:
    usage = message.models_usage
    return (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)


def _on_role_message(cycle: CycleRecord, message: BaseChatMessage, hooks: CycleHooks) -> CycleStop | None:
    """Move the state machine as roles speak; parse the plan as soon as the Planner delivers it."""
    source, text = message.source, message.to_text()
    state = hooks.state()
    if source == Role.SPECIALIST and state in (State.PLANNED, State.REVISING):
        hooks.transition(State.RUNNING, "Specialist started")
    elif source == Role.EVALUATOR and state == State.RUNNING:
        hooks.transition(State.REVIEWING, "Specialist reported; Evaluator started")
    if has_tool_calls(text):
        return None
    if source in (Role.PLANNER, Role.SPECIALIST):
        blocked = find_blocked(text, source)
        if blocked is not None:
            cycle.blocked = blocked
            return None
    if source == Role.PLANNER:
        try:
            cycle.plan = parse_plan(text)
        except ProtocolError as exc:
            cycle.review_error = f"PLAN_ERROR: {exc}"
            return CycleStop("ERROR", cycle.review_error)
        hooks.transition(State.PLANNED, f"plan fixed with {len(cycle.plan.criteria)} criteria")
    elif source == Role.EVALUATOR:
        try:
            cycle.verdict = parse_verdict(text)
        except ProtocolError as exc:
            cycle.review_error = f"REVIEW_ERROR: {exc}"
    return None


async def run_cycle(
    team: SelectorGroupChat,
    cycle: CycleRecord,
    packet: str,
    hooks: CycleHooks,
    box: FailureBox,
    token: CancellationToken,
    deadline: float,
    external_stop: Callable[[], CycleStop | None],
) -> CycleStop | None:
    """Run the team on `packet` until the cycle ends; fill `cycle`; return why it was stopped early, if so."""
    stop: CycleStop | None = None
    expired = False

    def expire() -> None:
        # Cancel first, close after: AutoGen's stream waits for its runtime to go idle when it is closed,
        # and only the cancelled token (and the closed box) makes the team stop instead of going on.
        nonlocal expired
        expired = True
        box.close("run wall-clock limit reached (PSE_RUN_TIMEOUT_S)")
        token.cancel()

    alarm = asyncio.get_running_loop().call_at(deadline, expire)
    try:
        # aclosing: a cycle stopped early (break) must close AutoGen's stream now, not at garbage collection.
        async with contextlib.aclosing(team.run_stream(task=packet, cancellation_token=token)) as stream:
            async for item in stream:
                if isinstance(item, TaskResult):
                    cycle.turns = sum(
                        1 for m in item.messages if isinstance(m, BaseChatMessage) and m.source != TASK_SOURCE
                    )
                    if item.stop_reason and "Maximum number of turns" in item.stop_reason:
                        stop = stop or CycleStop("TIMEOUT", f"turn cap: {item.stop_reason}")
                    continue
                if not isinstance(item, BaseChatMessage) or item.source == TASK_SOURCE:
                    continue
                prompt, completion = _usage(item)
                record = MessageRecord(
                    source=item.source,
                    content=item.to_text(),
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                )
                cycle.messages.append(record)
                if item.source != TOOL_AGENT:
                    cycle.tokens.setdefault(item.source, TokenCount()).add(prompt, completion)
                hooks.message(cycle, record, item.source)
                if item.source == TOOL_AGENT:
                    hooks.tool_calls(cycle)
                    failure = hooks.infrastructure_error()
                    if failure is not None:
                        stop = CycleStop("ERROR", f"tool infrastructure failed: {failure}")
                else:
                    stop = _on_role_message(cycle, item, hooks) or stop
                stop = stop or external_stop()
                budget = hooks.budget_exceeded()
                if stop is None and budget is not None:
                    stop = CycleStop("TIMEOUT", budget)
                if stop is not None:
                    box.close(stop.reason)
                    token.cancel()
                    break
    except asyncio.CancelledError:
        # Our own cancellation token (a stop decided above, the deadline, or from outside) surfaces here;
        # a cancellation of the task that runs the engine must still propagate.
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        stop = stop or external_stop() or _deadline_stop(expired) or CycleStop("ERROR", "cycle cancelled")
    except RuntimeError:
        # AutoGen re-raises an agent's exception as a bare RuntimeError; the box has the typed failure,
        # or the box was closed and the error is a call refused after the stop.
        if box.failure is None and box.closed is None:
            raise
    finally:
        alarm.cancel()
    stop = stop or _deadline_stop(expired)
    if box.failure is not None:
        stop = CycleStop("ERROR", f"{type(box.failure).__name__}: {box.failure}")
    return stop


def _deadline_stop(expired: bool) -> CycleStop | None:
    return CycleStop("TIMEOUT", "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)") if expired else None
