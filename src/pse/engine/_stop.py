"""One owner of stopping: why the run stops (the first reason wins) and what that cuts short in flight.

A run is stopped from outside (`cancel`: Ctrl-C, the dashboard, a batch lease lost; `suspend`: an
interrupt while a call waits for a person, so the run waits on disk), by its clock (`expire`: the
wall-clock limit, a timer armed for each cycle), or by what a phase finds after a message
(`after_message`: the tool machinery failed, a cancellation, a budget used up); before a cycle,
`before_cycle` says whether one may start. `RunStop` records the first reason as a typed `StopReason`
and does what each stop owes:

- the cycle's AutoGen `CancellationToken` is cancelled: a model call in flight ends at once (the role's
  agent holds the token) and the phase stops;
- the cycle's `FailureBox` is closed (the deadline, a stop after a message): no model call starts;
- a cancellation halts the tools (running commands killed, no call run after) and releases a call held
  for a person; a suspension releases the held call only; at the deadline the sandbox ends commands by
  itself (`start` gives it the instant); after any other stop the phase waits for the ToolAgent's turn
  in flight (`team.Phase`), and the run's end (`end`) halts whatever is left.

What a stopped cycle *came to* (its `CycleStop`, TIMEOUT or ERROR with the trace's words) is the role
loop's to record, from this reason. Turn caps and unreadable plans or reports end a cycle too, but they
are the cycle's own result, not a signal anything in flight must hear; a model call the budget cannot
cover is refused by the `FailureBox` itself (the team layer, which cannot reach the engine).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from autogen_core import CancellationToken

from pse.engine._approvals import ApprovalDesk
from pse.engine._values import CycleStop
from pse.exceptions import RunFailure, ToolInfrastructureError
from pse.roles import TOOL_AGENT
from pse.team import FailureBox

__all__ = ["DEADLINE_REASON", "RunStop", "StopKind", "StopReason", "ToolStop"]

DEADLINE_REASON = "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)"


class StopKind(StrEnum):
    """What stopped the run."""

    CANCELLED = "cancelled"
    """From outside: Ctrl-C, the dashboard, a batch item taken over."""
    SUSPENDED = "suspended"
    """Interrupted while a tool call waited for a person: the run waits on disk (`pse approve`)."""
    DEADLINE = "deadline"
    """The run's wall-clock limit (PSE_RUN_TIMEOUT_S)."""
    BUDGET = "budget"
    """The token or cost budget is used up."""
    INFRASTRUCTURE = "infrastructure"
    """The tool machinery failed (or a replayed tool call differs from its recording)."""


@dataclass(frozen=True)
class StopReason:
    """Why the run stopped, typed, and how a cycle it cut records it (`stop`: the trace's words)."""

    kind: StopKind
    stop: CycleStop


class ToolStop(Protocol):
    """The part of the tool machinery a stop reaches: its clock, its halt, and its own failure."""

    @property
    def infrastructure_error(self) -> RunFailure | None:
        """Set when the sandbox itself failed; the run must end as ERROR."""
        ...

    def stop_at(self, deadline: float | None) -> None:
        """No command may run past the run's wall-clock limit (a `time.monotonic()` instant)."""
        ...

    def halt(self, reason: str) -> None:
        """The run was stopped (from outside, or it ended): kill running commands, run no call after."""
        ...


class RunStop:
    """The run's one stop: the first reason wins; each stop cancels what it must in flight.

    Args:
        tools: the tool machinery (halted on a cancellation and when the run ends).
        approvals: where held calls wait (released on a cancellation, a suspension, the end); None: none.
        exhausted: why the run may not spend more (a budget used up), or None (`Ledger.exhausted`).
    """

    def __init__(
        self, tools: ToolStop, approvals: ApprovalDesk | None, exhausted: Callable[[], str | None]
    ) -> None:
        self._tools = tools
        self._approvals = approvals
        self._exhausted = exhausted
        self.reason: StopReason | None = None
        """The first reason the run was stopped for, or None while it runs."""
        self.deadline = float("inf")
        self.token = CancellationToken()
        """The cycle's token: every model call of the cycle's phases holds it."""
        self._box: FailureBox | None = None
        self._halted = False

    # ---- what the run is -------------------------------------------------------------------------

    @property
    def cancelled(self) -> CycleStop | None:
        """How a cycle records a cancellation from outside, when that stopped the run."""
        return self._first(StopKind.CANCELLED)

    @property
    def expired(self) -> CycleStop | None:
        """How a cycle records the wall-clock limit, when that stopped the run."""
        return self._first(StopKind.DEADLINE)

    @property
    def suspended(self) -> bool:
        """The run stopped while a tool call waited for approval: it waits on disk, its trace as held."""
        return self._first(StopKind.SUSPENDED) is not None

    def _first(self, kind: StopKind) -> CycleStop | None:
        return self.reason.stop if self.reason is not None and self.reason.kind is kind else None

    # ---- the run's clock and its cycles --------------------------------------------------------------

    def start(self, deadline: float) -> None:
        """The run starts: it must end by `deadline` (the event loop's clock, `time.monotonic()`), and no
        command may run past it."""
        self.deadline = deadline
        self._tools.stop_at(deadline)

    @contextlib.contextmanager
    def cycle(self, box: FailureBox) -> Iterator[CancellationToken]:
        """A cycle runs: a token of its own (cancelled at once if the run was stopped from outside), `box`
        closed by any stop, and the deadline's timer armed until the cycle ends."""
        self.token, self._box = CancellationToken(), box
        if self.reason is not None and self.reason.kind in (StopKind.CANCELLED, StopKind.SUSPENDED):
            self.token.cancel()
        alarm = asyncio.get_running_loop().call_at(self.deadline, self.expire)
        try:
            yield self.token
        finally:
            alarm.cancel()
            self._box = None

    # ---- stops -----------------------------------------------------------------------------------

    def cancel(self, reason: str) -> None:
        """Stop the run from outside: halt the tool calls, release a held call, cancel the model call.
        The first cancellation does that even when another reason came first (that reason stands): a
        person who cancels wants nothing to go on running."""
        self._record(StopReason(StopKind.CANCELLED, CycleStop("ERROR", f"CANCELLED: {reason}")))
        if self._halted:
            return
        self._halted = True
        self._tools.halt(f"the run was cancelled: {reason}")
        if self._approvals is not None:
            self._approvals.stop(f"the run was cancelled: {reason}")
        self.token.cancel()

    def suspend(self) -> None:
        """Stop the run where it waits for a person: the held call stops waiting here (its decision
        comes from disk when the run resumes), and the cycle's model call is cancelled."""
        if not self._record(StopReason(StopKind.SUSPENDED, CycleStop("ERROR", "cycle cancelled"))):
            return
        if self._approvals is not None:
            self._approvals.stop("interrupted: the run waits on disk")
        self.token.cancel()

    def expire(self) -> None:
        """The wall-clock limit: no model call starts, the one in flight is cancelled (the sandbox ends
        commands at the same instant by itself)."""
        if self._record(StopReason(StopKind.DEADLINE, CycleStop("TIMEOUT", DEADLINE_REASON))):
            self._cut(DEADLINE_REASON)

    def after_message(self, source: str) -> CycleStop | None:
        """After a phase filed a message from `source`: why the cycle must stop now, if it must (the tool
        machinery failed, the run was cancelled, a budget is used up). The stop is made here (`cut`);
        the first reason the run has is what the cycle records."""
        found: StopReason | None = None
        failure = self._tools.infrastructure_error if source == TOOL_AGENT else None
        if isinstance(failure, ToolInfrastructureError):
            found = self._infrastructure(f"tool infrastructure failed: {failure}")
        elif failure is not None:  # e.g. a replayed tool call that differs from its recording
            found = self._infrastructure(f"{type(failure).__name__}: {failure}")
        elif self.reason is not None and self.reason.kind is StopKind.CANCELLED:
            found = self.reason
        elif (budget := self._exhausted()) is not None:
            found = StopReason(StopKind.BUDGET, CycleStop("TIMEOUT", budget))
        if found is None:
            return None
        self._record(found)
        self._cut(found.stop.reason)
        assert self.reason is not None
        return self.reason.stop if self.reason.kind is not StopKind.SUSPENDED else found.stop

    def before_cycle(self) -> CycleStop | None:
        """Why no cycle may start, if none may: the run was cancelled, a budget is used up, or the
        deadline passed."""
        if self.reason is not None and self.reason.kind is StopKind.CANCELLED:
            return self.reason.stop
        budget = self._exhausted()
        if budget is not None:
            found = StopReason(StopKind.BUDGET, CycleStop("TIMEOUT", budget))
        elif asyncio.get_running_loop().time() >= self.deadline:
            found = StopReason(StopKind.DEADLINE, CycleStop("TIMEOUT", DEADLINE_REASON))
        else:
            return None
        self._record(found)
        return found.stop

    def end(self) -> None:
        """Nothing acts for the run once it ends: no held call waits for a decision any longer (a phase
        stopped at the deadline may leave one behind; approved after the end, it must not write into the
        workspace), and no tool call runs."""
        reason = "the run has ended"
        if self._approvals is not None:
            self._approvals.stop(reason)
        self._tools.halt(reason)

    # ---- the one place a reason is kept --------------------------------------------------------------

    def _record(self, reason: StopReason) -> bool:
        """Keep `reason` if it is the run's first; False when another came first (it stands)."""
        if self.reason is not None:
            return False
        self.reason = reason
        return True

    def _infrastructure(self, text: str) -> StopReason:
        return StopReason(StopKind.INFRASTRUCTURE, CycleStop("ERROR", text))

    def _cut(self, why: str) -> None:
        """No model call of the cycle starts any more, and the one in flight is cancelled. The box is
        closed first: the phase then winds down without starting another call."""
        if self._box is not None:
            self._box.close(why)
        self.token.cancel()
