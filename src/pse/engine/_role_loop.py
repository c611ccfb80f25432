"""One role loop: a role's phase run to its final message, with format repair and stop handling.

`run_role` is the only place a role works: task cycles (`_cycle`), a step's phases and step mode's final
review (`_steps`) all call it. It runs the role's phase (`team.Phase`: the role's AutoGen group chat
with the ToolAgent), files and announces every message as it arrives, decides whether the phase was cut
short (the deadline, a budget, a refused call, the turn cap, an infrastructure failure), reads the final
message with the caller's reader, and, while the reader finds something wrong and repairs are left,
asks the role again with the parser's own words (a `FormatRepair` in the cycle's record). What the
final message *means* stays the caller's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from autogen_agentchat.base import ChatAgent
from autogen_agentchat.messages import BaseChatMessage, ThoughtEvent
from autogen_core.models import AssistantMessage, LLMMessage, UserMessage

from pse.engine._crew import CycleOutcome, RunControl
from pse.engine._finals import repair_request
from pse.engine._stop import CycleStop
from pse.events import FormatRepair, FormatRepairEvent, MessageEvent, MessageRecord
from pse.exceptions import RunCancelled, RunFailure
from pse.roles import TASK_SOURCE, TOOL_AGENT
from pse.team import ContextFactory, FailureBox, Phase, RoleSetup
from pse.tokens import count_tokens
from pse.trace import CycleRecord

__all__ = ["Reader", "RoleResult", "RoleWork", "run_phase", "run_role"]

Reader = Callable[[str], tuple[str | None, str | None]]
"""Reads a role's final message: (the parse error, or None; what it sent too early, or None)."""


@dataclass(frozen=True)
class RoleWork:
    """Who works in a role's phase, beside which ToolAgent, and how far it may go.

    Attributes:
        role: the role's name (the seat its messages speak from).
        setup: the role's setup (its team is `RoleTeam.of(setup, tool_agent)`).
        tool_agent: answers the role's tool requests.
        contexts: sees every message (the run's context factory; a step's remembers nothing).
        turns: the turns the next phase may take (asked before each phase: a cycle's shrink as it goes).
        cap: why a phase that used them all was stopped (the turn cap's words).
        step: the step its messages belong to (step mode), else None.
    """

    role: str
    setup: RoleSetup
    tool_agent: ChatAgent
    contexts: ContextFactory
    turns: Callable[[], int]
    cap: str
    step: str | None = None


@dataclass(frozen=True)
class RoleResult:
    """How a role's phase ended when it was not cut short: its final message, and the parse error left
    once the repairs were used (None: the message holds what the role owes)."""

    final: str
    problem: str | None


async def run_role(
    work: RoleWork,
    opening: list[LLMMessage],
    read: Reader,
    *,
    retries: int,
    record: CycleRecord,
    run: RunControl,
    box: FailureBox,
    outcome: CycleOutcome,
) -> RoleResult | None:
    """Run `work.role`'s phase from `opening` until its final message reads well or `retries` repairs are
    used; None when the phase was cut short (`outcome.stop` says why, or `box.failure` holds the model's
    failure). `read` may fill `outcome` (a plan, a verdict, a `<blocked>`) and may stop the cycle."""
    repairs = 0
    while True:
        start = len(record.messages)
        phase = Phase(work.setup, opening, work.tool_agent, box, work.turns())
        final = await run_phase(phase, work.contexts, record, run, box, outcome, step=work.step)
        if outcome.stop is None and (run.stop.expired is not None or box.refused is not None):
            outcome.stop = run.stop.expired or CycleStop("TIMEOUT", str(box.refused))
        if outcome.stop is None and box.failure is None and not phase.finished.fired:
            outcome.stop = CycleStop("TIMEOUT", work.cap)
        if outcome.stop is not None or box.failure is not None:
            return None
        problem, early = read(final)
        if outcome.stop is not None:
            return None
        wrong = problem or early
        if wrong is None or repairs >= retries:
            return RoleResult(final, problem)
        repairs += 1
        if problem is None:
            outcome.verdict = None  # a verdict sent back as too early is not the answer: the next one is
        # Ask once more, with the parser's own words: the turn, not the run, was malformed.
        fix = FormatRepair(role=work.role, error=wrong, attempt=repairs)
        record.repairs.append(fix)
        run.events.emit(
            FormatRepairEvent(run_id=run.events.run_id, at=fix.at, cycle=record.index, repair=fix)
        )
        # A parse problem gets the repair frame; a nudge is sent as it is (said as what is owed, a small
        # model followed it; framed as an unreadable message, it wrote its last file again).
        request = repair_request(work.role, problem) if problem is not None else wrong
        work.contexts.record(TASK_SOURCE, request)
        # The role sees its phase again as its model saw it (a step's messages only: steps run at once).
        seen = [
            _as_seen_by(work.role, m.source, m.content)
            for m in record.messages[start:]
            if m.step == work.step
        ]
        opening = [*opening, *seen, UserMessage(content=request, source=TASK_SOURCE)]


def _as_seen_by(role: str, source: str, text: str) -> LLMMessage:
    """A message of `role`'s phase as its model saw it: its own turns as assistant, results as user."""
    return (
        AssistantMessage(content=text, source=source)
        if source == role
        else UserMessage(content=text, source=source)
    )


async def run_phase(
    phase: Phase,
    contexts: ContextFactory,
    record: CycleRecord,
    run: RunControl,
    box: FailureBox,
    outcome: CycleOutcome,
    step: str | None = None,
) -> str:
    """Stream one phase into the cycle's record; return the role's last message (its final one)."""
    final = ""
    thoughts: dict[str, str] = {}
    try:
        # aclosing: a phase stopped early (break) must close its stream now, not at garbage collection.
        async with contextlib.aclosing(phase.run_stream(run.stop.token)) as stream:
            async for item in stream:
                if isinstance(item, ThoughtEvent):
                    thoughts[item.source] = item.content  # it comes just before its message
                    continue
                if not isinstance(item, BaseChatMessage):
                    continue  # the TaskResult, and AutoGen's other events
                text = _record(item, record, run, thoughts.pop(item.source, None), step)
                contexts.record(item.source, text)
                if item.source != TOOL_AGENT:
                    final = text
                stop = run.stop.after_message(item.source)  # a stop found here is made there
                if stop is not None:
                    outcome.stop = stop
                    break
    except asyncio.CancelledError:
        # Our own token (a stop decided here, the deadline, or from outside) surfaces as CancelledError;
        # a cancellation of the task that runs the engine must still propagate.
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        if outcome.stop is None and run.stop.cancelled is not None:
            outcome.stop = run.stop.cancelled
        elif outcome.stop is None and box.closed is None:
            outcome.stop = CycleStop("ERROR", "cycle cancelled")
    except (RunFailure, RunCancelled):
        # A model failure the box holds (the cycle ends ERROR with it), or a call refused once the
        # box was closed (the stop already says why). Anything else is a bug and propagates.
        if box.failure is None and box.closed is None:
            raise
    return final


def _record(
    item: BaseChatMessage, record: CycleRecord, run: RunControl, thought: str | None, step: str | None = None
) -> str:
    """File and announce one message (with the reasoning that came with it); return its text."""
    usage = item.models_usage
    prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)
    text = item.to_text()
    finish, model_ms = (
        run.ledger.claim_reply(item.source, text) if item.source != TOOL_AGENT else (None, None)
    )
    message = MessageRecord(
        source=item.source,
        content=text,
        prompt_tokens=prompt,
        completion_tokens=completion,
        thought=thought,
        thought_tokens=count_tokens(thought) if thought else 0,
        step=step,
        finish_reason=finish,
        model_ms=model_ms,
    )
    record.messages.append(message)
    record.turns += 1
    run.events.emit(
        MessageEvent(run_id=run.events.run_id, cycle=record.index, message=message, at=message.at)
    )
    return text
