"""The dashboard's JSON API and SSE stream, all under `/api` and all behind `require_token`.

No GET starts, changes or deletes anything. Run ids are checked against the run-id pattern and the
run folder must be a real directory directly inside the runs directory. Everything read from a run
folder (the trace, the workspace listing, workspace files) goes through `read_run_file`,
`workspace_listing` and `open_workspace_file`: no symlink is followed below the runs directory, no FIFO
or device is opened, and reads are capped. Nothing outside the runs directory is ever read.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from pse.config import Settings, with_overrides
from pse.engine import Trace, is_run_id
from pse.events import Event
from pse.exceptions import TaskNotFoundError, UserError
from pse.history import RunFilter, RunHistory, run_dir_of
from pse.runner import answer_run, approve_call, pending_approvals, registry_for
from pse.tasks import Task
from pse.web._runs import LiveRun, RunManager, TooManyRuns
from pse.web._schemas import (
    APPROVAL_ID,
    CASSETTE_NAME,
    OUTCOME_FILTERS,
    AnswerRequest,
    ApprovalRequest,
    ApprovalResponse,
    InputInfo,
    MetricsResponse,
    PendingApproval,
    RunListItem,
    RunPage,
    StartedRun,
    StartRun,
    TaskInfo,
)
from pse.web._security import open_workspace_file, read_run_file, require_token, workspace_listing

__all__ = ["HEARTBEAT_S", "MAX_LISTED_FILES", "router"]

HEARTBEAT_S = 15.0
"""Seconds between SSE keep-alive comments while a run is quiet."""
MAX_LISTED_FILES = 2000
"""Most workspace files one listing returns."""
MAX_PAGE = 500
"""Largest page of the run history."""
FILE_CHUNK_BYTES = 64 * 1024
"""Bytes per read when streaming a workspace file."""

_TRACE = "trace.json"
_DASHBOARD = "dashboard (PSE_WEB_TOKEN holder)"
"""Who a decision taken through the API is recorded as: whoever holds the token."""

router = APIRouter(prefix="/api", dependencies=[Depends(require_token)])


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.manager
    return manager


def _root(request: Request) -> Path:
    root: Path = request.app.state.runs_root
    return root


def _run_dir(request: Request, run_id: str) -> Path:
    """The run's folder: a real directory directly inside the runs directory, holding a trace (or live).

    Only an existence check: every read from the folder goes through the `_security` readers.
    """
    if not is_run_id(run_id):
        raise HTTPException(400, f"{run_id!r} is not a run id")
    root = _root(request)
    live = _manager(request).get(run_id)
    if live is not None:
        return live.prepared.run_dir
    try:
        path = run_dir_of(root, run_id)
    except UserError as exc:
        raise HTTPException(404, str(exc)) from None
    if path.is_symlink() or path.resolve().parent != root:
        raise HTTPException(404, f"no run {run_id!r}")
    return path


# ---- tasks and starting runs ------------------------------------------------------------------


@router.get("/tasks")
def list_tasks(request: Request) -> list[TaskInfo]:
    """Every task this server can run, with its inputs and the cassettes in its folder."""
    registry = registry_for(_settings(request))
    tasks = []
    for name in registry.names():
        try:
            task = registry.get(name)
        except UserError:
            description = registry.description(name)
            tasks.append(TaskInfo(name=name, description=description, inputs=[], cassettes=[], valid=False))
            continue
        inputs = [
            InputInfo(name=key, description=spec.description, default=spec.default, required=spec.required)
            for key, spec in task.config.inputs.items()
        ]
        tasks.append(
            TaskInfo(
                name=name,
                description=task.config.description,
                inputs=inputs,
                cassettes=_cassettes(task),
                valid=True,
            )
        )
    return tasks


def _cassettes(task: Task) -> list[str]:
    """Cassette files a browser may pick: `*cassette*.json` directly in the task folder, plus the default."""
    names = {p.name for p in task.dir.glob("*cassette*.json") if p.is_file() and CASSETTE_NAME.match(p.name)}
    if task.cassette_path is not None and task.cassette_path.is_file():
        names.add(task.cassette_path.name)
    return sorted(names)


@router.post("/runs", status_code=201)
async def start_run(body: StartRun, request: Request) -> StartedRun:
    """Start a run of `body.task`; it executes in this process. Returns its id at once."""
    settings = _settings(request)
    try:
        task = registry_for(settings).get(body.task)
    except TaskNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    except UserError as exc:
        raise HTTPException(400, str(exc)) from None
    options = {"provider": body.provider, "model": body.model, "base_url": body.base_url}
    update: dict[str, object] = {k: v for k, v in options.items() if v}
    if body.cassette is not None:
        cassette = (task.dir / body.cassette).resolve()
        if body.cassette not in _cassettes(task) or cassette.parent != task.dir.resolve():
            raise HTTPException(
                400, f"task {task.name!r} has no cassette {body.cassette!r}; GET /api/tasks lists them"
            )
        update["cassette"] = cassette
    try:
        run_settings = with_overrides(settings, "run options", **update)
        live = _manager(request).start(body.task, run_settings, body.inputs)
    except TooManyRuns as exc:
        raise HTTPException(429, str(exc)) from None
    except TaskNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    except UserError as exc:
        raise HTTPException(400, str(exc)) from None
    return StartedRun(run_id=live.run_id, task=body.task, events=f"/api/runs/{live.run_id}/events")


# ---- history -------------------------------------------------------------------------------------


@router.get("/runs")
def list_runs_page(
    request: Request,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    task: Annotated[str | None, Query(max_length=64)] = None,
    outcome: Annotated[str | None, Query(max_length=16)] = None,
) -> RunPage:
    """The run history from the traces on disk, newest first; filter by task and outcome (RUNNING: none)."""
    if outcome is not None and outcome not in OUTCOME_FILTERS:
        raise HTTPException(400, f"outcome must be one of {', '.join(OUTCOME_FILTERS)}")
    index: RunHistory = request.app.state.history
    live_ids = {r.run_id for r in _manager(request).active()}
    where = RunFilter(task=task or None, outcome=outcome or None)
    total = index.count(where)
    page = [
        RunListItem(**e.model_dump(), live=e.run_id in live_ids)
        for e in index.entries(where, offset=offset, limit=limit)
    ]
    return RunPage(total=total, offset=offset, limit=limit, runs=page)


@router.get("/runs/{run_id}")
def get_run(run_id: str, request: Request) -> Response:
    """The run's trace (the live in-memory one while it executes here)."""
    _run_dir(request, run_id)
    live = _manager(request).get(run_id)
    if live is not None:
        return Response(live.trace.model_dump_json(by_alias=True), media_type="application/json")
    return Response(read_run_file(_root(request), run_id, _TRACE), media_type="application/json")


@router.get("/stats")
def stats(request: Request) -> MetricsResponse:
    """Aggregates over every finished run, plus the per-run series and cycles-to-pass histogram."""
    index: RunHistory = request.app.state.history
    aggregate, histogram = index.stats()
    series = list(reversed(index.store.entries(RunFilter(finished=True), limit=500)))
    return MetricsResponse(**aggregate.model_dump(), cycles_to_pass=histogram, series=series)


# ---- live runs -----------------------------------------------------------------------------------


@router.get("/runs/{run_id}/events")
async def run_events(run_id: str, request: Request) -> StreamingResponse:
    """Server-sent events: everything that already happened, then live events; ends after `outcome`.

    Each event is `id: <n>`, `event: <kind>`, `data: <the event's JSON>`; a final `event: end` closes
    the stream (also for a run that died or was interrupted without an outcome).
    """
    _run_dir(request, run_id)
    live = _manager(request).get(run_id)
    try:
        skip = int(request.headers.get("last-event-id", "0"))
    except ValueError:
        skip = 0
    if live is not None:
        source = _live_events(live, skip)
    else:  # read before the stream starts, so a missing or broken trace is a 404, not a cut stream
        raw = read_run_file(_root(request), run_id, _TRACE)
        try:
            trace = Trace.model_validate(json.loads(raw))
        except ValueError:
            raise HTTPException(404, f"run {run_id!r} has no readable trace") from None
        source = _replayed_events(trace, skip)
    return StreamingResponse(
        source,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _sse(number: int, event: Event) -> str:
    return f"id: {number}\nevent: {event.kind}\ndata: {event.model_dump_json()}\n\n"


async def _live_events(live: LiveRun, skip: int) -> AsyncIterator[str]:
    number = skip
    async for event in live.follow(skip=skip, heartbeat_s=HEARTBEAT_S):
        if event is None:
            yield ": keep-alive\n\n"
            continue
        number += 1
        yield _sse(number, event)
    yield f"event: end\ndata: {json.dumps({'error': live.error})}\n\n"


async def _replayed_events(trace: Trace, skip: int) -> AsyncIterator[str]:
    for number, event in enumerate(trace.events(), start=1):
        if number > skip:
            yield _sse(number, event)
    note = None if trace.outcome else "the run is not executing in this server and has no outcome"
    yield f"event: end\ndata: {json.dumps({'error': note})}\n\n"


@router.post("/runs/{run_id}/cancel", status_code=202)
def cancel_run(run_id: str, request: Request) -> dict[str, object]:
    """Ask a run executing in this server to stop; it ends ERROR with reason `CANCELLED: …`."""
    _run_dir(request, run_id)
    if not _manager(request).cancel(run_id):
        raise HTTPException(409, f"run {run_id} is not executing in this server; nothing to cancel")
    return {"run_id": run_id, "cancelling": True}


@router.post("/runs/{run_id}/resume", status_code=202)
async def resume_run(run_id: str, request: Request) -> StartedRun:
    """Go on with an interrupted or cancelled run: its next cycle, the same counters, in this server."""
    _run_dir(request, run_id)
    try:
        live = _manager(request).resume(run_id, _settings(request))
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
    _run_dir(request, run_id)
    if request.app.state.web_token is None:
        raise HTTPException(
            403,
            "answering from the dashboard needs PSE_WEB_TOKEN (without it any local process could answer, "
            f"a tool command included): set it and restart `pse serve`, or run `pse answer {run_id}`",
        )
    current = _manager(request).get(run_id)
    if current is not None and not current.ended:
        raise HTTPException(409, f"run {run_id} is executing in this server; answer it once it escalates")
    try:
        trace = answer_run(
            run_id,
            _settings(request),
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
        live = _manager(request).resume(run_id, _settings(request))
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
    index: RunHistory = request.app.state.history
    manager = _manager(request)
    root = _root(request)
    pending: list[PendingApproval] = []
    for entry in index.entries(RunFilter(outcome="RUNNING")):
        live = manager.get(entry.run_id)
        executing = live is not None and not live.ended
        if live is not None and executing:
            trace, run_dir = live.trace, live.prepared.run_dir
        elif entry.outcome is None and entry.state == "AWAITING_APPROVAL":
            try:
                trace = Trace.model_validate(json.loads(read_run_file(root, entry.run_id, _TRACE)))
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
    _run_dir(request, run_id)
    if request.app.state.web_token is None:
        raise HTTPException(
            403,
            "approving from the dashboard needs PSE_WEB_TOKEN (without it any local process could approve, "
            f"a tool command included): set it and restart `pse serve`, or run `pse approve {run_id}`",
        )
    settings = _settings(request)
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
            _manager(request).resume(run_id, settings)
        except (TooManyRuns, UserError) as exc:
            raise HTTPException(
                409, f"the decision is recorded, but the run did not start: {exc}; `pse resume {run_id}`"
            ) from None
        resumed = True
    current = _manager(request).get(run_id)
    executing = current is not None and not current.ended
    return ApprovalResponse(
        run_id=run_id,
        approval=answer.approval.id,
        decision=answer.decision.decision,
        resumed=resumed,
        events=f"/api/runs/{run_id}/events" if executing else None,
    )


# ---- workspace files -----------------------------------------------------------------------------


@router.get("/runs/{run_id}/files")
def list_files(run_id: str, request: Request) -> list[dict[str, object]]:
    """The workspace's regular files (symlinks neither listed nor followed), as relative paths with sizes."""
    _run_dir(request, run_id)
    return workspace_listing(_root(request), run_id, max_files=MAX_LISTED_FILES)


@router.get("/runs/{run_id}/files/{path:path}")
def get_file(run_id: str, path: str, request: Request) -> StreamingResponse:
    """One workspace file, always as an attachment-safe plain download (never rendered as HTML).

    Streamed from the descriptor that was checked, so the file served is the file that was verified.
    """
    _run_dir(request, run_id)
    handle, size = open_workspace_file(_root(request), run_id, path)
    head = handle.read(min(size, 8192))
    binary = b"\x00" in head

    def chunks() -> Iterator[bytes]:
        try:
            yield head
            left = size - len(head)
            while left > 0:
                block = handle.read(min(FILE_CHUNK_BYTES, left))
                if not block:
                    return
                left -= len(block)
                yield block
        finally:
            handle.close()

    return StreamingResponse(
        chunks(),
        media_type="application/octet-stream" if binary else "text/plain; charset=utf-8",
        headers={"Content-Security-Policy": "sandbox", "Content-Disposition": "inline"},
        background=BackgroundTask(handle.close),
    )
