"""Holding an allowed call for a person: whether its grant's approval rule holds it, what the person is
shown, and the wait for the run's `Approver` (run the call, or answer it denied with the person's reason).

The rules and what a person sees are `pse.toolagent._approval`'s; this is the gate the executor puts
between the policy's "allowed" and running the call. A call that does not run gives its budget back.
"""

from __future__ import annotations

from collections.abc import Callable

from pse.events import ToolCallRecord
from pse.toolagent._approval import Approver, HeldCall
from pse.toolagent._call import held_call
from pse.toolagent._decide import Allowed
from pse.toolagent._redact import Redactor

__all__ = ["ask", "held", "holds"]


def holds(step: Allowed, approver: Approver | None) -> str | None:
    """What about the call its grant's approval rule matched, if the rule holds it (the outputs the
    rule knows of are those `approver` says the plan declared)."""
    if step.approval is None:
        return None
    outputs = approver.declared_outputs() if approver is not None else ()
    return step.approval.match(step.call.name, step.call.arguments, outputs)


def held(step: Allowed, approver: Approver | None, message: str, redactor: Redactor) -> HeldCall | None:
    """The call as a person would see it, when its grant's approval rule holds it; else None."""
    fired = holds(step, approver)
    return None if fired is None else held_call(step, fired, message, redactor)


async def ask(
    step: Allowed, call: HeldCall, approver: Approver | None, give_back: Callable[[Allowed], None]
) -> tuple[ToolCallRecord | None, str | None]:
    """Wait for the decision on a held call: (None, approval id) to run it, or (its denial, id); a
    denied call's budget goes back through `give_back`."""
    if approver is None:
        give_back(step)
        why = f"this call needs a person's approval ({call.rule}: {call.fired}); nobody can be asked here"
        return ToolCallRecord.denied(**step.request, rule=call.rule, reason=why), None
    verdict = await approver.decide(call)
    if verdict.approved:
        return None, verdict.id
    give_back(step)
    why = f"denied by {verdict.by} ({call.rule}: {call.fired})"
    if verdict.reason:
        why += f": {verdict.reason}"
    record = ToolCallRecord.denied(**step.request, rule=call.rule, reason=why)
    return record.model_copy(update={"approval": verdict.id}), verdict.id
