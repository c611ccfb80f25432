"""The dashboard's JSON API for tasks, starting runs, the history, traces, statistics and workspace files,
all under `/api` and all behind `require_token` (`_live` has the SSE stream and what people act on).

No GET starts, changes or deletes anything. Run ids are checked against the run-id pattern and the
run folder must be a real directory directly inside the runs directory. Everything read from a run
folder (the trace, the report, the workspace listing, workspace files) goes through `read_run_file`,
`workspace_listing` and `open_workspace_file`: no symlink is followed below the runs directory, no FIFO
or device is opened, and reads are capped. Nothing outside the runs directory is ever read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from pse.config import Settings, with_overrides
from pse.exceptions import TaskNotFoundError, UserError
from pse.history import RunEntry, RunFilter
from pse.repo import PATCH_FILE
from pse.runner import registry_for
from pse.tasks import Task, offline_warnings, validate
from pse.web._catalog import (
    MAX_TEXT_SEARCHED,
    RunFacts,
    SearchHit,
    TraceCatalog,
    duration_s,
    facts_of,
    is_infrastructure_error,
)
from pse.web._deps import TRACE, history_of, manager_of, repositories_of, root_of, run_dir, settings_of
from pse.web._runs import TooManyRuns
from pse.web._schemas import (
    CASSETTE_NAME,
    OUTCOME_FILTERS,
    InputInfo,
    MetricsResponse,
    Repositories,
    RunListItem,
    RunPage,
    StartedRun,
    StartRun,
    TaskInfo,
)
from pse.web._security import open_workspace_file, read_run_file, require_token, workspace_listing

__all__ = ["MAX_LISTED_FILES", "MAX_PAGE", "MAX_REPORT_BYTES", "MAX_SEARCHED_RUNS", "router"]

MAX_LISTED_FILES = 2000
"""Most workspace files one listing returns."""
MAX_PAGE = 500
"""Largest page of the run history."""
MAX_SEARCHED_RUNS = 10_000
"""Most runs (newest first) a search looks at; their ids, tasks and reasons are all compared."""
MAX_REPORT_BYTES = 2 * 1024 * 1024
"""Largest `report.md` the dashboard serves."""
FILE_CHUNK_BYTES = 64 * 1024
"""Bytes per read when streaming a workspace file."""

router = APIRouter(prefix="/api", dependencies=[Depends(require_token)])


def _catalog(request: Request) -> TraceCatalog:
    catalog: TraceCatalog = request.app.state.catalog
    return catalog


# ---- tasks and starting runs ------------------------------------------------------------------


@router.get("/tasks")
def list_tasks(request: Request) -> list[TaskInfo]:
    """Every task this server can run, with its inputs and the cassettes in its folder."""
    settings = settings_of(request)
    registry = registry_for(settings)
    tasks = []
    for name in registry.names():
        try:
            task = registry.get(name)
        except UserError as exc:
            description = registry.description(name)
            problems = [f"{p.message} — fix: {p.fix}" for p in validate(registry, name)] or [str(exc)]
            tasks.append(
                TaskInfo(
                    name=name,
                    description=description,
                    inputs=[],
                    cassettes=[],
                    valid=False,
                    problems=problems,
                )
            )
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
                warnings=[
                    *(
                        [
                            f"{name} works on a git repository, and this server allows none: restart it "
                            f"with pse serve --repo PATH to pick one here, or run pse run {name} --repo PATH"
                        ]
                        if task.config.repository.required and not repositories_of(request)
                        else []
                    ),
                    *(
                        w.message
                        for w in offline_warnings(task, model_configured=_model_configured(settings))
                    ),
                ],
            )
        )
    return tasks


def _model_configured(settings: Settings) -> bool:
    """Whether every role of these settings has a real model (none falls back to the scripted one)."""
    speakers = settings.crew.speakers
    return all(settings.model_spec(role).provider != "scripted" for role in speakers)


def _cassettes(task: Task) -> list[str]:
    """Cassette files a browser may pick: `*cassette*.json` directly in the task folder, plus the default."""
    names = {p.name for p in task.dir.glob("*cassette*.json") if p.is_file() and CASSETTE_NAME.match(p.name)}
    if task.cassette_path is not None and task.cassette_path.is_file():
        names.add(task.cassette_path.name)
    return sorted(names)


@router.get("/repositories")
def list_repositories(request: Request) -> Repositories:
    """The git repositories the Start form may work on: those the server was started with."""
    return Repositories(repositories=list(repositories_of(request)))


def _repository(body: StartRun, request: Request) -> Path | None:
    """The repository a start asks for, if the server allows it (an allow-list: a browser never names a
    folder of its own choosing).

    Raises:
        HTTPException: 400 for a repository the server was not started with, or a base without one.
    """
    if body.repo is None:
        if body.base is not None:
            raise HTTPException(
                400, "a base ref needs a repository: pick one under Repository, or leave Base empty"
            )
        return None
    allowed = repositories_of(request)
    if body.repo not in allowed:
        listed = ", ".join(allowed) if allowed else "none"
        raise HTTPException(
            400,
            f"this server may not work on the repository {body.repo!r} (it allows: {listed}); fix: restart "
            f"the dashboard with pse serve --repo {body.repo} (repeat --repo for more), or pick an allowed "
            "one",
        )
    return Path(body.repo)


@router.post("/runs", status_code=201)
async def start_run(body: StartRun, request: Request) -> StartedRun:
    """Start a run of `body.task`; it executes in this process. Returns its id at once."""
    settings = settings_of(request)
    try:
        task = registry_for(settings).get(body.task)
    except TaskNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    except UserError as exc:
        raise HTTPException(400, str(exc)) from None
    repo = _repository(body, request)
    options = {"provider": body.provider, "model": body.model, "base_url": body.base_url}
    update: dict[str, object] = {k: v for k, v in options.items() if v}
    scripted = body.provider == "scripted" or (not body.provider and not _model_configured(settings))
    if scripted and body.cassette is None and settings.cassette is None and task.cassette_path is None:
        raise HTTPException(  # what the page can do about it, not the command line's options
            400,
            f"task {task.name!r} has no cassette to replay, and this server has no model configured: pick "
            "a Provider and a Model above (a Base URL too for a local server), or add a cassette to the "
            "task's folder",
        )
    if body.cassette is not None:
        cassette = (task.dir / body.cassette).resolve()
        if body.cassette not in _cassettes(task) or cassette.parent != task.dir.resolve():
            raise HTTPException(
                400, f"task {task.name!r} has no cassette {body.cassette!r}; GET /api/tasks lists them"
            )
        update["cassette"] = cassette
    try:
        run_settings = with_overrides(settings, "run options", **update)
        live = manager_of(request).start(body.task, run_settings, body.inputs, repo=repo, base=body.base)
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
    q: Annotated[str | None, Query(max_length=200)] = None,
) -> RunPage:
    """The run history from the run store, newest first; filter by task and outcome (RUNNING: none yet).

    `q` searches (case-insensitive) the run id, task and outcome reason of the newest
    `MAX_SEARCHED_RUNS` runs that pass the filters, and the text of the messages of the newest
    `MAX_TEXT_SEARCHED` of them; the page says how many traces were read for text (`text_searched`).
    """
    if outcome is not None and outcome not in OUTCOME_FILTERS:
        raise HTTPException(400, f"outcome must be one of {', '.join(OUTCOME_FILTERS)}")
    index = history_of(request)
    where = RunFilter(task=task or None, outcome=outcome or None)
    query = (q or "").strip()
    catalog = _catalog(request)
    page: list[tuple[RunEntry, SearchHit | None]]
    if not query:
        total = index.count(where)
        page = [(e, None) for e in index.entries(where, offset=offset, limit=limit)]
        searched = None
    else:
        hits, searched = catalog.search(index.entries(where, limit=MAX_SEARCHED_RUNS), query)
        total, page = len(hits), list(hits[offset : offset + limit])
    live_ids = {r.run_id for r in manager_of(request).active()}
    runs = [_list_item(catalog, e, live=e.run_id in live_ids, match=hit) for e, hit in page]
    return RunPage(
        total=total,
        offset=offset,
        limit=limit,
        runs=runs,
        query=query or None,
        text_searched=searched,
        text_search_limit=None if searched is None else MAX_TEXT_SEARCHED,
    )


def _list_item(
    catalog: TraceCatalog, entry: RunEntry, *, live: bool, match: SearchHit | None = None
) -> RunListItem:
    return RunListItem(
        **entry.model_dump(),
        live=live,
        duration_s=duration_s(entry.started_at, entry.ended_at),
        infrastructure_error=is_infrastructure_error(entry.outcome, entry.outcome_reason),
        facts=catalog.facts(entry),
        match=match,
    )


@router.get("/runs/{run_id}")
def get_run(run_id: str, request: Request) -> Response:
    """The run's trace (the live in-memory one while it executes here)."""
    run_dir(request, run_id)
    live = manager_of(request).get(run_id)
    if live is not None:
        return Response(live.trace.model_dump_json(by_alias=True), media_type="application/json")
    return Response(read_run_file(root_of(request), run_id, TRACE), media_type="application/json")


@router.get("/runs/{run_id}/facts")
def get_facts(run_id: str, request: Request) -> RunFacts:
    """How the run was made, resolved from its trace: each role's provider and model, protocol, sandbox,
    tokens per role and per cycle (what the run list shows, for one run)."""
    run_dir(request, run_id)
    live = manager_of(request).get(run_id)
    raw = (
        live.trace.model_dump_json(by_alias=True)
        if live is not None
        else read_run_file(root_of(request), run_id, TRACE)
    )
    try:
        return facts_of(json.loads(raw))
    except ValueError:
        raise HTTPException(404, f"run {run_id!r} has no readable trace") from None


@router.get("/runs/{run_id}/report")
def get_report(run_id: str, request: Request) -> Response:
    """The run's `report.md` as plain text (model-written: the page renders it through a sanitizer)."""
    return _run_text(request, run_id, "report.md")


@router.get("/runs/{run_id}/patch")
def get_patch(run_id: str, request: Request) -> Response:
    """A repository run's `change.patch` as plain text (what roles wrote: the page shows it as text)."""
    return _run_text(request, run_id, PATCH_FILE)


def _run_text(request: Request, run_id: str, name: str) -> Response:
    run_dir(request, run_id)
    body = read_run_file(root_of(request), run_id, name, max_bytes=MAX_REPORT_BYTES)
    return Response(
        body,
        media_type="text/plain; charset=utf-8",
        headers={"Content-Security-Policy": "sandbox", "Cache-Control": "no-store"},
    )


@router.get("/stats")
def stats(request: Request) -> MetricsResponse:
    """Aggregates over every finished run, plus the per-run series and cycles-to-pass histogram.

    ERRORs whose cause lies outside the run (`INFRASTRUCTURE_ERRORS`: the model down, a cancel) are
    counted apart: `pass_rate` and `judged_first_cycle_pass_rate` leave them out of the denominator.
    """
    index = history_of(request)
    aggregate, histogram = index.stats()
    catalog = _catalog(request)
    entries = index.store.entries(RunFilter(finished=True), limit=MAX_PAGE)
    series = [_list_item(catalog, e, live=False) for e in reversed(entries)]
    errors = index.entries(RunFilter(outcome="ERROR"), limit=MAX_SEARCHED_RUNS)
    infrastructure = sum(1 for e in errors if is_infrastructure_error(e.outcome, e.outcome_reason))
    judged = aggregate.runs - infrastructure
    passed = aggregate.outcomes.get("PASSED", 0)
    return MetricsResponse(
        **aggregate.model_dump(),
        cycles_to_pass=histogram,
        series=series,
        infrastructure_errors=infrastructure,
        judged_runs=judged,
        pass_rate=round(passed / judged, 4) if judged else None,
        judged_first_cycle_pass_rate=round(histogram.get("1", 0) / judged, 4) if judged else None,
    )


# ---- workspace files -----------------------------------------------------------------------------


@router.get("/runs/{run_id}/files")
def list_files(run_id: str, request: Request) -> list[dict[str, object]]:
    """The workspace's regular files (symlinks neither listed nor followed), as relative paths with sizes."""
    run_dir(request, run_id)
    return workspace_listing(root_of(request), run_id, max_files=MAX_LISTED_FILES)


@router.get("/runs/{run_id}/files/{path:path}")
def get_file(run_id: str, path: str, request: Request) -> StreamingResponse:
    """One workspace file, always as an attachment-safe plain download (never rendered as HTML).

    Streamed from the descriptor that was checked, so the file served is the file that was verified.
    """
    run_dir(request, run_id)
    handle, size = open_workspace_file(root_of(request), run_id, path)
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
