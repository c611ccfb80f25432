"""A phase, run: one role with the ToolAgent until its final message, as one immutable `PhaseResult`.

`PhaseRun` is the only place a role works: a cycle's phases (`_engine`), a step's and step mode's final
review (`_steps`). It runs the role's phase (`team.Phase`: the role's AutoGen group chat with the
ToolAgent), files and announces every message as it arrives, finds whether the phase was cut short (the
deadline, a budget, a refused call, the turn cap, the tool machinery, a model's failure), and returns what
happened: the final message, read once by its role's reader, and what PSE saw. Asked again (`ask`), it
opens the role's next phase with what its model saw and the request: the parser's own words, or what a
nudge says is owed. Whether to ask again is `decide`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from autogen_agentchat.base import ChatAgent
from autogen_agentchat.messages import BaseChatMessage, ThoughtEvent
from autogen_core.models import AssistantMessage, LLMMessage, UserMessage

from pse.engine._crew import RunControl
from pse.engine._values import CycleStop, Final, PhaseResult, Seen, read_final
from pse.events import FormatRepair, FormatRepairEvent, MessageEvent, MessageRecord
from pse.exceptions import RunCancelled, RunFailure
from pse.roles import BLOCK_ASKED, TASK_SOURCE, TOOL_AGENT
from pse.team import ContextFactory, FailureBox, Phase, RoleSetup
from pse.tokens import count_tokens
from pse.trace import CycleRecord

__all__ = ["Look", "PhaseRun", "Seat"]

Look = Callable[[str, Final], Seen]
"""What PSE sees of a role's read final (`Workspace.seen`, over the plan and the calls it is held to)."""


@dataclass(frozen=True)
class Seat:
    """Who works in a phase, beside which ToolAgent, and how far it may go.

    Attributes:
        role: the role's name (the seat its messages speak from).
        setup: the role's setup (its team is `RoleTeam.of(setup, tool_agent)`).
        tool_agent: answers the role's tool requests.
        contexts: sees every message (the run's context factory; a step's remembers nothing).
        turns: the turns the next phase may take (asked before each phase: a cycle's shrink as it goes).
        cap: why a phase that used them all was stopped (the turn cap's words).
        step: the step its messages belong to (step mode), else None.
        attempt: the step's attempt.
    """

    role: str
    setup: RoleSetup
    tool_agent: ChatAgent
    contexts: ContextFactory
    turns: Callable[[], int]
    cap: str
    step: str | None = None
    attempt: int = 0


class PhaseRun:
    """One role's phase in a cycle's record, run (`run`) and asked again (`ask`) as the decision says.

    Args:
        seat: who works.
        opening: the messages its model context opens with.
        record: the cycle's record (messages, tool records and repairs are filed there).
        run: the run's control (stop, ledger, events).
        box: the cycle's failure box.
        look: what PSE sees of a read final.
        questions: the Planner may ask a person (its reader reads a `<clarification>`).
    """

    def __init__(
        self,
        seat: Seat,
        opening: list[LLMMessage],
        record: CycleRecord,
        run: RunControl,
        box: FailureBox,
        look: Look,
        *,
        questions: bool = False,
    ) -> None:
        self.seat, self.opening, self.record, self.control, self.box = seat, opening, record, run, box
        self.look, self.questions = look, questions
        self.asked, self.asked_block = 0, False
        self._messages = self._calls = 0

    async def run(self) -> PhaseResult:
        """Run the phase to the role's final message (or until it is cut short); what happened."""
        seat, record, run, box = self.seat, self.record, self.control, self.box
        self._messages, self._calls = len(record.messages), len(record.tool_calls)
        phase = Phase(seat.setup, self.opening, seat.tool_agent, box, seat.turns())
        said, stop = await self._stream(phase)
        if stop is None and (run.stop.expired is not None or box.refused is not None):
            stop = run.stop.expired or CycleStop("TIMEOUT", str(box.refused))
        if stop is None and box.failure is None and not phase.finished.fired:
            stop = CycleStop("TIMEOUT", seat.cap)
        calls = tuple(
            c for c in record.tool_calls[self._calls :] if c.requester == seat.role and c.step == seat.step
        )
        result = PhaseResult(
            seat.role,
            said,
            calls=calls,
            asked=self.asked,
            asked_block=self.asked_block,
            step=seat.step,
            attempt=seat.attempt,
        )
        if stop is not None or box.failure is not None:
            failed = f"{type(box.failure).__name__}: {box.failure}" if box.failure is not None else None
            return dataclasses.replace(result, stopped=stop, failed=failed)
        final = read_final(seat.role, said, questions=self.questions)
        return dataclasses.replace(result, final=final, seen=self.look(seat.role, final))

    def ask(self, request: str, error: str) -> None:
        """Open the phase again: the role sees its phase as its model saw it, then `request` (a repair,
        counted against PSE_FORMAT_RETRIES, and filed as one; a question about a block is marked)."""
        seat, record = self.seat, self.record
        self.asked += 1
        self.asked_block = self.asked_block or request.startswith(BLOCK_ASKED)
        fix = FormatRepair(role=seat.role, error=error, attempt=self.asked)
        record.repairs.append(fix)
        self.control.events.emit(
            FormatRepairEvent(run_id=self.control.events.run_id, at=fix.at, cycle=record.index, repair=fix)
        )
        seat.contexts.record(TASK_SOURCE, request)
        # The role sees its phase again as its model saw it (a step's messages only: steps run at once).
        seen = [
            _as_seen_by(seat.role, m.source, m.content)
            for m in record.messages[self._messages :]
            if m.step == seat.step
        ]
        self.opening = [*self.opening, *seen, UserMessage(content=request, source=TASK_SOURCE)]

    async def _stream(self, phase: Phase) -> tuple[str, CycleStop | None]:
        """Stream the phase into the cycle's record: the role's last message (its final one), and the stop
        a message or a cancellation brought, if one did."""
        record, run, box, step = self.record, self.control, self.box, self.seat.step
        final, stop = "", None
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
                    self.seat.contexts.record(item.source, text)
                    if item.source != TOOL_AGENT:
                        final = text
                    stop = run.stop.after_message(item.source)  # a stop found here is made there
                    if stop is not None:
                        break
        except asyncio.CancelledError:
            # Our own token (a stop decided here, the deadline, or from outside) surfaces as CancelledError;
            # a cancellation of the task that runs the engine must still propagate.
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            if stop is None and run.stop.cancelled is not None:
                stop = run.stop.cancelled
            elif stop is None and box.closed is None:
                stop = CycleStop("ERROR", "cycle cancelled")
        except (RunFailure, RunCancelled):
            # A model failure the box holds (the cycle ends ERROR with it), or a call refused once the
            # box was closed (the stop already says why). Anything else is a bug and propagates.
            if box.failure is None and box.closed is None:
                raise
        return final, stop


def _as_seen_by(role: str, source: str, text: str) -> LLMMessage:
    """A message of `role`'s phase as its model saw it: its own turns as assistant, results as user."""
    return (
        AssistantMessage(content=text, source=source)
        if source == role
        else UserMessage(content=text, source=source)
    )


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
