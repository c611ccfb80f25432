"""The approval desk: where a held tool call waits for a person, and where the decision is recorded.

The executor asks the desk (`pse.toolagent.Approver`) about every call an approval rule holds. The desk
gives the call an id (`A<cycle>.<n>`), records it in `trace.approvals` with the rule that fired and the
preview, moves the run to AWAITING_APPROVAL, saves the trace, and waits for the first of:

- an answer in this process (`answer`): the live view's prompt, or the dashboard for a run it executes;
- a decision file in the run folder, `approvals/<id>.json`, written by `pse approve` (or by a dashboard
  for a run another process executes): `write_decision`;
- `PSE_APPROVAL_TIMEOUT_S` passing: the call is denied, `via: timeout`.

The decision is audited on the record (who, how, why, when), the run goes back to the state it was
held in, and the trace is saved again. A standing approval (a person's "approve all such calls for this
run") answers later calls of the same role, tool and rule at once, `via: standing`.

The decision files live beside the trace, outside the workspace: no tool command can reach them (under
bwrap the run folder is not mounted; under fallback as root commands run as an uid that cannot enter
it), and the dashboard takes decisions only with PSE_WEB_TOKEN. See docs/human.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pse.engine._events import RunEvents
from pse.engine._state import State, StateMachine
from pse.events import ApprovalEvent, ApprovalRecord, utc_now
from pse.exceptions import UserError
from pse.toolagent import ApprovalVerdict, HeldCall
from pse.trace import Trace

__all__ = ["APPROVALS_DIR", "ApprovalDecision", "ApprovalDesk", "read_decision", "write_decision"]

log = logging.getLogger("pse.engine")

APPROVALS_DIR = "approvals"
"""The run folder's subfolder of decision files (`<id>.json`)."""
POLL_S = 0.2
"""How often a waiting desk looks for a decision file."""
Via = Literal["terminal", "cli", "api", "timeout", "standing"]


class ApprovalDecision(BaseModel):
    """A person's decision on one held call, as a decision file holds it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    decision: Literal["approved", "denied"]
    by: str
    via: Via = "cli"
    reason: str = Field("", max_length=2000)
    scope: Literal["call", "run"] = "call"
    at: str = Field(default_factory=utc_now)


def _decision_path(run_dir: Path, approval_id: str) -> Path:
    return run_dir / APPROVALS_DIR / f"{approval_id}.json"


def write_decision(run_dir: Path, decision: ApprovalDecision) -> Path:
    """Put a decision where the waiting desk (of any process) finds it. The first decision wins.

    Raises:
        UserError: the call was decided already (its file exists).
    """
    folder = run_dir / APPROVALS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    target = _decision_path(run_dir, decision.id)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".decision-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(decision.model_dump_json())
        os.link(temporary, target)  # atomic, and refuses to replace a decision already given
    except FileExistsError:
        raise UserError(
            f"approval {decision.id} was already decided; `pse trace show` has who and how"
        ) from None
    finally:
        os.unlink(temporary)
    return target


def read_decision(run_dir: Path, approval_id: str) -> ApprovalDecision | None:
    """The decision file of a held call, if one was written (a broken one is ignored, and logged)."""
    path = _decision_path(run_dir, approval_id)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read the decision %s: %s", path, exc)
        return None
    try:
        decision = ApprovalDecision.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        log.warning("ignored a broken decision file %s: %s", path, exc)
        return None
    return decision if decision.id == approval_id else None


class ApprovalDesk:
    """The run's `Approver`. Built by the runner (the executor needs it first); the engine attaches it.

    Args:
        run_dir: the run folder (its `approvals/` holds the decision files).
        timeout_s: how long a held call waits before it is denied (PSE_APPROVAL_TIMEOUT_S).
    """

    def __init__(self, run_dir: Path, timeout_s: float) -> None:
        self.run_dir = run_dir
        self.timeout_s = timeout_s
        self._trace: Trace | None = None
        self._machine: StateMachine | None = None
        self._events: RunEvents | None = None
        self._save: Callable[[], None] = lambda: None
        self._held: Counter[int] = Counter()
        self._waiting: dict[str, asyncio.Future[ApprovalDecision]] = {}
        self._stopped: str | None = None
        self._holding = 0
        self._back = State.RUNNING

    def attach(
        self, trace: Trace, machine: StateMachine, events: RunEvents, save: Callable[[], None]
    ) -> None:
        """Wire the desk to the run it serves (the engine calls this once)."""
        self._trace, self._machine, self._events, self._save = trace, machine, events, save

    # ---- what the executor asks ---------------------------------------------------------------

    def declared_outputs(self) -> Sequence[str]:
        """The outputs of the plan in force: the cycle's own (fixed this cycle) or the run's."""
        cycle = self._events.cycle if self._events is not None else None
        plan = (cycle.plan if cycle is not None else None) or (self._trace.plan if self._trace else None)
        return list(plan.outputs) if plan is not None else []

    async def decide(self, held: HeldCall) -> ApprovalVerdict:
        """Hold the call until it is decided; return the decision (see the module's docstring)."""
        trace, machine, events = self._trace, self._machine, self._events
        assert trace is not None and machine is not None and events is not None, "attach the desk first"
        if self._stopped is not None:
            raise asyncio.CancelledError(self._stopped)
        cycle = events.cycle.index if events.cycle is not None else 0
        record = self._recorded_for(cycle, held)
        if record is None:
            record = ApprovalRecord(
                id=self._free_id(cycle),
                cycle=cycle,
                requester=held.requester,
                tool=held.tool,
                arguments=held.arguments,
                index=held.index,
                rule=held.rule,
                fired=held.fired,
                preview=held.preview,
            )
            trace.approvals.append(record)
            standing = self._standing(record)
            if standing is not None:
                self._decided(record, standing)
        # Steps run at once may hold calls at once: the run waits until the last of them is decided.
        if self._holding == 0:
            self._back = machine.state
            why = f"{held.requester}'s {held.tool} call held ({held.fired}): {record.rule}"
            machine.move(State.AWAITING_APPROVAL, why)
        self._holding += 1
        trace.state = machine.state.value
        if record.decision is None:
            await self._recorded(held)
            self._save()
            events.emit(ApprovalEvent(run_id=trace.run_id, cycle=cycle, approval=record.model_copy()))
            decision = await self._wait(record)
            self._decided(record, decision)
        events.emit(ApprovalEvent(run_id=trace.run_id, cycle=cycle, approval=record.model_copy()))
        self._holding -= 1
        if self._holding == 0:
            machine.move(self._back, f"approval {record.id} {record.decision} by {record.by} ({record.via})")
        trace.state = machine.state.value
        self._save()
        return ApprovalVerdict(
            approved=record.decision == "approved", by=record.by or "", reason=record.reason, id=record.id
        )

    def stop(self, reason: str) -> None:
        """The run stops (cancelled, or interrupted to wait on disk): no call waits any longer here."""
        self._stopped = reason
        for waiting in self._waiting.values():
            waiting.cancel()

    def _recorded_for(self, cycle: int, held: HeldCall) -> ApprovalRecord | None:
        """The trace's record of this held call, when the cycle runs again after the run stopped in it:
        the n-th call held in the cycle, if it is the same call (its decision then stands)."""
        self._held[cycle] += 1
        trace = self._trace
        assert trace is not None
        wanted = f"A{cycle}.{self._held[cycle]}"
        record = next((a for a in trace.approvals if a.id == wanted), None)
        asked = (held.requester, held.tool, held.arguments, held.index)
        if record is None or (record.requester, record.tool, record.arguments, record.index) != asked:
            return None
        return record

    def _free_id(self, cycle: int) -> str:
        """`A<cycle>.<n>` not used yet (a cycle cancelled and run anew may have held other calls)."""
        trace = self._trace
        assert trace is not None
        taken = {a.id for a in trace.approvals}
        n = self._held[cycle]
        while f"A{cycle}.{n}" in taken:
            n += 1
        return f"A{cycle}.{n}"

    async def _recorded(self, held: HeldCall) -> None:
        """Let the message that holds the call reach the cycle's record first: a resumed run answers
        the requester's turns from that record. A phase records each message before the ToolAgent's
        turn starts, so this finds it at once; the wait guards any other driver of the ToolAgent."""
        cycle = self._events.cycle if self._events is not None else None
        for _ in range(400):
            if cycle is None or any(
                m.source == held.requester and m.content == held.message for m in cycle.messages[-4:]
            ):
                return
            await asyncio.sleep(0.005)
        log.warning("the message holding %s's %s call was not recorded in time", held.requester, held.tool)

    # ---- answers --------------------------------------------------------------------------------

    def pending(self) -> list[ApprovalRecord]:
        """Held calls waiting in this process."""
        trace = self._trace
        return [a for a in (trace.approvals if trace else []) if a.id in self._waiting and a.decision is None]

    def answer(self, decision: ApprovalDecision) -> bool:
        """Decide a call held in this process (on its event loop); False when none waits under that id."""
        waiting = self._waiting.get(decision.id)
        if waiting is None or waiting.done():
            return False
        waiting.set_result(decision)
        return True

    async def _wait(self, record: ApprovalRecord) -> ApprovalDecision:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ApprovalDecision] = loop.create_future()
        self._waiting[record.id] = future
        deadline = loop.time() + self.timeout_s
        try:
            while not future.done():
                found = read_decision(self.run_dir, record.id)
                if found is not None:
                    return found
                left = deadline - loop.time()
                if left <= 0:
                    why = f"nobody answered in {self.timeout_s:g} s (PSE_APPROVAL_TIMEOUT_S)"
                    return ApprovalDecision(
                        id=record.id, decision="denied", by="timeout", via="timeout", reason=why
                    )
                await asyncio.wait([future], timeout=min(POLL_S, left))
            return future.result()
        finally:
            self._waiting.pop(record.id, None)

    def _standing(self, record: ApprovalRecord) -> ApprovalDecision | None:
        """An earlier "approve all such calls for this run" that covers this call, as its decision."""
        trace = self._trace
        assert trace is not None
        for earlier in trace.approvals:
            same = (earlier.requester, earlier.tool, earlier.rule) == (
                record.requester,
                record.tool,
                record.rule,
            )
            if same and earlier.scope == "run" and earlier.decision == "approved" and earlier is not record:
                why = f"standing approval {earlier.id} by {earlier.by}"
                return ApprovalDecision(
                    id=record.id, decision="approved", by=earlier.by or "", via="standing", reason=why
                )
        return None

    @staticmethod
    def _decided(record: ApprovalRecord, decision: ApprovalDecision) -> None:
        record.decision, record.by, record.via = decision.decision, decision.by, decision.via
        record.reason, record.scope, record.decided_at = decision.reason, decision.scope, utc_now()
