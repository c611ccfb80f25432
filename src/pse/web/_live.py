"""The dashboard's routes that follow and act on runs: the SSE stream, cancel, resume, a person's answer
to an escalation and decisions on held tool calls. All under `/api`, all behind `require_token`.

No GET starts, changes or deletes anything; every POST is a person's act (the guards in `_security`
require `Content-Type: application/json` or `X-PSE-Request: 1`, and answers and decisions need
`PSE_WEB_TOKEN`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse

from pse._describe import describe_call, describe_message
from pse.engine import Trace
from pse.events import Event, MessageEvent, ToolCallEvent
from pse.exceptions import UserError
from pse.history import RunFilter, run_dir_of
from pse.runner import answer_run, approve_call, pending_approvals
from pse.web._deps import TRACE, history_of, manager_of, root_of, run_dir, settings_of
from pse.web._runs import LiveRun, TooManyRuns
from pse.web._schemas import (
    APPROVAL_ID,
    AnswerRequest,
    ApprovalRequest,
    ApprovalResponse,
    PendingApproval,
    StartedRun,
)
from pse.web._security import read_run_file, require_token

__all__ = ["HEARTBEAT_S", "router"]

HEARTBEAT_S = 15.0
"""Seconds between SSE keep-alive comments while a run is quiet."""

_DASHBOARD = "dashboard (PSE_WEB_TOKEN holder)"
"""Who a decision taken through the API is recorded as: whoever holds the token."""

router = APIRouter(prefix="/api", dependencies=[Depends(require_token)])


# ---- live runs -----------------------------------------------------------------------------------


@router.get("/runs/{run_id}/events")
async def run_events(
    run_id: str,
    request: Request,
    said: Annotated[
        bool, Query(description="add to a message and a tool call the line the CLI prints")
    ] = False,
) -> StreamingResponse:
    """Server-sent events: everything that already happened, then live events; ends after `outcome`.

    Each event is `id: <n>`, `event: <kind>`, `data: <the event's JSON>`; a final `event: end` closes
    the stream (also for a run that died or was interrupted without an outcome). With `?said=true` a
    message's and a tool call's JSON also hold `said`, what the terminal's live view prints for them
    (the dashboard asks for it, so both show the same words and never protocol XML).
    """
    run_dir(request, run_id)
    live = manager_of(request).get(run_id)
    try:
        skip = int(request.headers.get("last-event-id", "0"))
    except ValueError:
        skip = 0
    if live is not None:
        source = _live_events(live, skip, said)
    else:  # read before the stream starts, so a missing or broken trace is a 404, not a cut stream
        raw = read_run_file(root_of(request), run_id, TRACE)
        try:
            trace = Trace.model_validate(json.loads(raw))
        except ValueError:
            raise HTTPException(404, f"run {run_id!r} has no readable trace") from None
        source = _replayed_events(trace, skip, said)
    return StreamingResponse(
        source,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _sse(number: int, event: Event, said: bool = False) -> str:
    return f"id: {number}\nevent: {event.kind}\ndata: {_data(event) if said else event.model_dump_json()}\n\n"


def _data(event: Event) -> str:
    """The event's JSON; a message and a tool call also carry `said`, the line the terminal's live view
    prints for them (`Specialist ↳ wrote quicksort.py (433 B)`), so the page never shows protocol XML."""
    if isinstance(event, MessageEvent):
        said = describe_message(event.message.source, event.message.content)
    elif isinstance(event, ToolCallEvent):
        said, _ = describe_call(event.call)
    else:
        return event.model_dump_json()
    data = event.model_dump(mode="json")
    data["said"] = said
    return json.dumps(data, separators=(",", ":"))


async def _live_events(live: LiveRun, skip: int, said: bool) -> AsyncIterator[str]:
    number = skip
    async for event in live.follow(skip=skip, heartbeat_s=HEARTBEAT_S):
        if event is None:
            yield ": keep-alive\n\n"
            continue
        number += 1
        yield _sse(number, event, said)
    yield f"event: end\ndata: {json.dumps({'error': live.error})}\n\n"


async def _replayed_events(trace: Trace, skip: int, said: bool) -> AsyncIterator[str]:
    for number, event in enumerate(trace.events(), start=1):
        if number > skip:
            yield _sse(number, event, said)
    note = None if trace.outcome else "the run is not executing in this server and has no outcome"
    yield f"event: end\ndata: {json.dumps({'error': note})}\n\n"


@router.post("/runs/{run_id}/cancel", status_code=202)
def cancel_run(run_id: str, request: Request) -> dict[str, object]:
    """Ask a run executing in this server to stop; it ends ERROR with reason `CANCELLED: …`."""
    run_dir(request, run_id)
    if not manager_of(request).cancel(run_id):
        raise HTTPException(409, f"run {run_id} is not executing in this server; nothing to cancel")
    return {"run_id": run_id, "cancelling": True}


@router.post("/runs/{run_id}/resume", status_code=202)
async def resume_run(run_id: str, request: Request) -> StartedRun:
    """Go on with an interrupted or cancelled run: its next cycle, the same counters, in this server."""
    run_dir(request, run_id)
    try:
        live = manager_of(request).resume(run_id, settings_of(request))
    except TooManyRuns as exc:
        raise HTTPException(429, str(exc)) from None
    except UserError as exc:
        raise HTTPException(409, str(exc)) from None
    trace = live.trace
    return StartedRun(run_id=live.run_id, task=trace.task, events=f"/api/runs/{live.run_id}/events")


@router.post("/runs/{run_id}/answer", status_code=202)
async def answer_escalation(run_id: str, body: AnswerRequest, request: Request) -> dict[str, object]:
    """A person's answer to an ESCALATED run: take it on (it resumes in this server), accept, or close.

    Only with PSE_WEB_TOKEN set: the caller is then whoever holds the token, which no tool command can
    read. Without one the dashboard trusts every local process, so it takes no answer (`pse answer`).
    """
    run_dir(request, run_id)
    if request.app.state.web_token is None:
        raise HTTPException(
            403,
            "answering from the dashboard needs PSE_WEB_TOKEN (without it any local process could answer, "
            f"a tool command included): set it and restart `pse serve`, or run `pse answer {run_id}`",
        )
    current = manager_of(request).get(run_id)
    if current is not None and not current.ended:
        raise HTTPException(409, f"run {run_id} is executing in this server; answer it once it escalates")
    try:
        trace = answer_run(
            run_id,
            settings_of(request),
            decision=body.decision,
            note=body.note,
            text=body.text,
            grants=body.grants,
            retries=body.retries,
            replan=body.replan,
            by=_DASHBOARD,
            via="api",
        )
    except UserError as exc:
        raise HTTPException(409, str(exc)) from None
    if body.decision != "resume":
        return {"run_id": run_id, "outcome": trace.outcome, "answer": body.decision}
    answer = trace.answers[-1].decision  # "answer" when it answered a Planner's questions
    try:
        live = manager_of(request).resume(run_id, settings_of(request))
    except (TooManyRuns, UserError) as exc:
        raise HTTPException(409, f"the answer is recorded, but the run did not start: {exc}") from None
    return {
        "run_id": live.run_id,
        "outcome": None,
        "answer": answer,
        "events": f"/api/runs/{live.run_id}/events",
    }


# ---- held tool calls -----------------------------------------------------------------------------


@router.get("/approvals")
def list_approvals(request: Request) -> list[PendingApproval]:
    """Every held call nobody decided yet, of every run that waits in AWAITING_APPROVAL; newest first."""
    index = history_of(request)
    manager = manager_of(request)
    root = root_of(request)
    pending: list[PendingApproval] = []
    for entry in index.entries(RunFilter(outcome="RUNNING")):
        live = manager.get(entry.run_id)
        executing = live is not None and not live.ended
        if live is not None and executing:
            trace, run_dir = live.trace, live.prepared.run_dir
        elif entry.outcome is None and entry.state == "AWAITING_APPROVAL":
            try:
                trace = Trace.model_validate(json.loads(read_run_file(root, entry.run_id, TRACE)))
                run_dir = run_dir_of(root, entry.run_id)
            except (HTTPException, UserError, ValueError):
                continue  # the trace changed or went away since the listing: not waiting any more
        else:
            continue
        pending.extend(
            PendingApproval(**a.model_dump(), run_id=trace.run_id, task=trace.task, live=executing)
            for a in pending_approvals(trace, run_dir)
        )
    pending.sort(key=lambda p: (p.requested_at, p.run_id, p.id), reverse=True)
    return pending


@router.post("/runs/{run_id}/approvals/{approval_id}", status_code=202)
async def decide_approval(
    run_id: str,
    approval_id: Annotated[str, PathParam(pattern=APPROVAL_ID)],
    body: ApprovalRequest,
    request: Request,
) -> ApprovalResponse:
    """A person's decision on a held tool call: approve it (`all`: every such call of this run) or deny it.

    Only with PSE_WEB_TOKEN set, as for answers. The decision file is written for the process that
    executes the run (this server included) to pick up; when none does, the run resumes in this server
    and meets the decision at the held call.
    """
    run_dir(request, run_id)
    if request.app.state.web_token is None:
        raise HTTPException(
            403,
            "approving from the dashboard needs PSE_WEB_TOKEN (without it any local process could approve, "
            f"a tool command included): set it and restart `pse serve`, or run `pse approve {run_id}`",
        )
    settings = settings_of(request)
    try:
        answer = approve_call(
            run_id,
            settings,
            approval_id,
            approve=body.decision == "approve",
            reason=body.reason,
            scope="run" if body.all else "call",
            by=_DASHBOARD,
            via="api",
        )
    except UserError as exc:
        raise HTTPException(409, str(exc)) from None
    resumed = False
    if not answer.live_elsewhere:
        try:
            manager_of(request).resume(run_id, settings)
        except (TooManyRuns, UserError) as exc:
            raise HTTPException(
                409, f"the decision is recorded, but the run did not start: {exc}; `pse resume {run_id}`"
            ) from None
        resumed = True
    current = manager_of(request).get(run_id)
    executing = current is not None and not current.ended
    return ApprovalResponse(
        run_id=run_id,
        approval=answer.approval.id,
        decision=answer.decision.decision,
        resumed=resumed,
        events=f"/api/runs/{run_id}/events" if executing else None,
    )
