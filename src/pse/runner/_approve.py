"""A person's decision on a tool call held for approval (`pse approve`, the dashboard).

The decision is written as a decision file in the run folder (`approvals/<id>.json`, see
`pse.engine.ApprovalDesk`). A process that executes the run picks it up and goes on; when none does
(the process ended while the call waited) the caller resumes the run (`prepare_resume`), which runs the
interrupted cycle again from its record and meets the decision at the held call.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pse.config import Settings
from pse.engine import ApprovalDecision, read_decision, run_is_live, write_decision
from pse.events import ApprovalRecord
from pse.exceptions import UserError
from pse.runner._answer import load_run
from pse.trace import Trace

__all__ = ["MAX_REASON_CHARS", "ApprovalAnswer", "approve_call", "pending_approvals"]

MAX_REASON_CHARS = 2000
"""A reason goes back to the role with a denial: kept short."""


@dataclass(frozen=True)
class ApprovalAnswer:
    """What `approve_call` did: the decision written, for which call, and whether a process has the run."""

    trace: Trace
    approval: ApprovalRecord
    decision: ApprovalDecision
    live_elsewhere: bool


def pending_approvals(trace: Trace, run_dir: Path) -> list[ApprovalRecord]:
    """The run's held calls nobody decided yet (none unless it waits in AWAITING_APPROVAL)."""
    if trace.outcome is not None or trace.state != "AWAITING_APPROVAL":
        return []
    return [a for a in trace.approvals if a.decision is None and read_decision(run_dir, a.id) is None]


def approve_call(
    run_id: str,
    settings: Settings,
    call_id: str | None = None,
    *,
    approve: bool = True,
    reason: str = "",
    scope: Literal["call", "run"] = "call",
    by: str | None = None,
    via: Literal["cli", "api"] = "cli",
) -> ApprovalAnswer:
    """Decide a held call of a run waiting in AWAITING_APPROVAL.

    Args:
        call_id: the approval's id (`A2.1`); default the run's one pending call.
        approve: run the call (False: deny it; the role reads `reason`).
        scope: run: also approve every later call of the same role, tool and rule in this run.
        by: who decides (default the OS user).

    Raises:
        UserError: no such run, a run that waits for no approval, an unknown or already decided call,
            a reason too long, or "approve all" together with a denial.
    """
    trace, run_dir = load_run(run_id, settings)
    pending = pending_approvals(trace, run_dir)
    if not pending:
        given = [d for a in trace.approvals if a.decision is None and (d := read_decision(run_dir, a.id))]
        if trace.outcome is None and given and not run_is_live(run_dir):
            raise UserError(
                f"the held call {given[0].id} of run {run_id} is decided ({given[0].decision} by "
                f"{given[0].by}) and no process has the run: go on with `pse resume {run_id}`"
            )
        state = trace.outcome or trace.state
        raise UserError(
            f"run {run_id} waits for no approval (it is {state}); `pse trace show {run_id}` shows it"
        )
    if call_id is None and len(pending) > 1:
        listed = ", ".join(a.id for a in pending)
        raise UserError(
            f"run {run_id} holds several calls ({listed}): name one, "
            f"e.g. pse approve {run_id} {pending[0].id}"
        )
    chosen = pending[0] if call_id is None else next((a for a in pending if a.id == call_id), None)
    if chosen is None:
        known = next((a for a in trace.approvals if a.id == call_id), None)
        why = (
            f"was decided already ({known.decision} by {known.by})"
            if known is not None
            else "is not one of its calls"
        )
        listed = ", ".join(a.id for a in pending)
        raise UserError(f"approval {call_id} of run {run_id} {why}; pending: {listed}")
    if len(reason) > MAX_REASON_CHARS:
        raise UserError(
            f"--reason is {len(reason)} characters; at most {MAX_REASON_CHARS} (the role reads it)"
        )
    if scope == "run" and not approve:
        raise UserError("--all approves all such calls; a denial is for one call (leave out --all)")
    decision = ApprovalDecision(
        id=chosen.id,
        decision="approved" if approve else "denied",
        by=by or getpass.getuser(),
        via=via,
        reason=reason.strip(),
        scope=scope,
    )
    write_decision(run_dir, decision)
    return ApprovalAnswer(trace, chosen, decision, live_elsewhere=run_is_live(run_dir))
