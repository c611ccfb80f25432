"""`pse batch`: one PSE run per input row, through an executor (local asyncio or Ray), resumable.

The store holds the batch: its rows, which are done, who holds which lease, and every run's row (tagged
`batch` and `item`). Progress is read from the store, so it is the same whichever executor runs the
items and wherever they run. Running the same batch id again skips the rows that are done and resumes
the interrupted runs from their last cycle end.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, SecretStr

from pse.batch._work import ItemResult, Stop, WorkItem, new_owner, trace_of, work_item
from pse.config import Settings
from pse.exceptions import UserError
from pse.runner import PreparedRun, user_tasks_dir
from pse.store import BatchStore, RunFilter, open_store, store_url_of
from pse.tasks import Task

__all__ = [
    "BatchProgress",
    "BatchRun",
    "BatchSummary",
    "Executor",
    "LocalExecutor",
    "batch_id_of",
    "run_batch",
]

ExecutorName = Literal["local", "ray"]


def batch_id_of(task: str, rows: Sequence[dict[str, str]], tag: str | None, where: Sequence[str] = ()) -> str:
    """The batch's id: `--tag` when given, else the task and a digest of its rows (so running the same
    command again resumes the same batch) and, for `--repo`, of the repository and base (the same rows on
    another repository are another batch)."""
    if tag:
        return tag
    parts: list[Any] = [task, list(rows), *([list(where)] if where else [])]
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:10]
    return f"{task}-{digest}"


class BatchProgress(BaseModel):
    """What the batch has done so far (read from the store)."""

    batch_id: str
    rows: int
    done: int = Field(description="rows whose run has an outcome")
    running: int = Field(description="rows a worker holds now")
    failed: int = Field(description="done rows whose run ended ERROR, or could not start")
    outcomes: dict[str, int]
    tokens: int
    cost: float
    currency: str


class BatchSummary(BatchProgress):
    """The end of one `pse batch` invocation (also saved in the store)."""

    task: str
    executor: str
    skipped: int = Field(description="rows that were done before this invocation (nothing re-ran)")
    resumed: int = Field(description="runs that went on from an earlier interrupted attempt")
    interrupted: bool = False
    wall_s: float
    errors: list[str] = Field(
        default_factory=list, description="runs that could not start or crashed, and why"
    )
    runs: list[dict[str, Any]] = Field(default_factory=list, description="item, run id and outcome per row")
    branches: list[str] = Field(
        default_factory=list,
        description="`pse batch --repo`: each row's branch `pse/<run_id>` still in the repository (it holds "
        "the run's commit, or the run can go on), in row order",
    )


StartNote = Callable[[WorkItem, str], None]
"""Told (work item, run id) when a run starts; an executor whose workers are elsewhere tells it late."""


class Executor(Protocol):
    """Runs work items; reports each result as it comes."""

    name: str

    async def run(
        self,
        works: Sequence[WorkItem],
        on_result: Callable[[ItemResult], None],
        cancel: asyncio.Event,
        on_started: StartNote | None = None,
    ) -> None: ...


@dataclass
class LocalExecutor:
    """Items as asyncio tasks of this process, at most `concurrency` at a time."""

    concurrency: int
    name: str = "local"
    running: dict[int, PreparedRun] = field(default_factory=dict)

    async def run(
        self,
        works: Sequence[WorkItem],
        on_result: Callable[[ItemResult], None],
        cancel: asyncio.Event,
        on_started: StartNote | None = None,
    ) -> None:
        gate = asyncio.Semaphore(self.concurrency)
        owner = new_owner()

        async def one(work: WorkItem) -> None:
            async with gate:
                if cancel.is_set():
                    return
                result = await work_item(
                    work, owner, cancel=cancel, running=self.running, on_started=on_started
                )
                on_result(result)

        await asyncio.gather(*(one(w) for w in works))


@dataclass
class BatchRun:
    """One `pse batch` invocation.

    Attributes:
        on_progress: told the progress every `progress_every_s` and at the end.
        lease_s: how long a worker's claim on a row lasts without renewal (a dead worker's rows are
            taken over after it).
    """

    task: Task
    rows: list[dict[str, str]]
    settings: Settings
    executor: Executor
    source: str = ""
    tag: str | None = None
    lease_s: float = 60.0
    on_progress: Callable[[BatchProgress], None] | None = None
    progress_every_s: float = 0.5
    repo: Path | None = None
    """`pse batch --repo`: every row runs in a worktree and on a branch of its own of this repository."""
    base: str | None = None
    _cancel: Stop = field(default_factory=Stop, init=False, repr=False)

    @property
    def batch_id(self) -> str:
        where = [str(self.repo.expanduser().resolve()), self.base or "HEAD"] if self.repo is not None else []
        return batch_id_of(self.task.name, self.rows, self.tag, where)

    def cancel(self) -> None:
        """Start no more rows; running runs end at their cycle boundary and resume next time."""
        self._cancel.stop("the batch was interrupted (Ctrl-C)")


def portable(settings: Settings) -> Settings:
    """The settings with every path absolute (workers elsewhere have another working directory) and the
    store named explicitly (a worker with a runs folder of its own still writes to the driver's store)."""
    update: dict[str, Any] = {
        "runs_dir": settings.runs_dir.resolve(),
        "evals_dir": settings.evals_dir.resolve(),
        "store_url": SecretStr(store_url_of(settings)),
    }
    tasks = user_tasks_dir(settings)
    if settings.tasks_dir is not None or tasks.is_dir():
        update["tasks_dir"] = tasks.resolve()
    if settings.cassette is not None:
        update["cassette"] = settings.cassette.resolve()
    return settings.model_copy(update=update)


def progress_of(store: BatchStore, batch_id: str, rows: int) -> BatchProgress:
    items = store.items(batch_id)
    entries = {e.run_id: e for e in store.entries(RunFilter(tags=(("batch", batch_id),)))}
    done = [i for i in items if i.status == "done"]
    outcomes: dict[str, int] = {}
    for item in done:
        entry = entries.get(item.run_id or "")
        name = str(entry.outcome) if entry is not None and entry.outcome else "ERROR"
        outcomes[name] = outcomes.get(name, 0) + 1
    currency = next((e.currency for e in entries.values() if e.cost), "USD")
    return BatchProgress(
        batch_id=batch_id,
        rows=rows,
        done=len(done),
        running=sum(1 for i in items if i.status == "running"),
        failed=outcomes.get("ERROR", 0),
        outcomes=outcomes,
        tokens=sum(e.tokens for e in entries.values()),
        cost=round(sum(e.cost for e in entries.values()), 6),
        currency=currency,
    )


async def run_batch(plan: BatchRun) -> BatchSummary:
    """Run every row of the batch that is not done yet; return the summary (also in the store).

    Raises:
        UserError: a batch of that id exists with another task or other rows.
    """
    started = time.monotonic()
    settings = portable(plan.settings)
    store = open_store(settings)
    batch_id = plan.batch_id
    store.open_batch(batch_id, plan.task.name, plan.source, plan.rows)
    items = store.items(batch_id)
    skipped = sum(1 for i in items if i.status == "done")
    tags = {"batch": batch_id} | ({"tag": plan.tag} if plan.tag else {})
    works = [
        WorkItem(
            batch_id=batch_id,
            item=i.item,
            task=plan.task.name,
            inputs=i.inputs,
            settings=settings,
            tags=tags | {"item": str(i.item)},
            lease_s=plan.lease_s,
            repo=str(plan.repo.expanduser().resolve()) if plan.repo is not None else None,
            base=plan.base,
        )
        for i in items
        if i.status != "done"
    ]
    results: list[ItemResult] = []

    async def report() -> None:
        while True:
            if plan.on_progress is not None:
                plan.on_progress(await asyncio.to_thread(progress_of, store, batch_id, len(items)))
            await asyncio.sleep(plan.progress_every_s)

    reporter = asyncio.create_task(report())
    try:
        await plan.executor.run(works, results.append, plan._cancel)
    finally:
        reporter.cancel()
    progress = progress_of(store, batch_id, len(items))
    if plan.on_progress is not None:
        plan.on_progress(progress)
    final = {i.item: i for i in store.items(batch_id)}
    summary = BatchSummary(
        **progress.model_dump(),
        task=plan.task.name,
        executor=plan.executor.name,
        skipped=skipped,
        resumed=sum(1 for r in results if r.resumed and not r.skipped),
        interrupted=plan._cancel.is_set(),
        wall_s=round(time.monotonic() - started, 3),
        errors=[f"row {r.item}: {r.error}" for r in results if r.error],
        runs=[
            {"item": n, "run_id": i.run_id, "status": i.status, "attempts": i.attempts}
            | ({"branch": _branch(settings, i.run_id)} if plan.repo is not None else {})
            for n, i in sorted(final.items())
        ],
    )
    summary.branches = [str(r["branch"]) for r in summary.runs if r.get("branch")]
    store.save_summary(batch_id, summary.model_dump(mode="json"))
    return summary


def _branch(settings: Settings, run_id: str | None) -> str | None:
    """A repository run's branch, from its trace, while it is in the repository: it holds the run's
    commit, or the run can go on (a run that ended otherwise took its branch away)."""
    repository = (trace_of(settings, run_id) or {}).get("repository") or {}
    if not isinstance(repository, dict) or (repository.get("released") and not repository.get("commit")):
        return None
    branch = repository.get("branch")
    return str(branch) if branch else None


def check_concurrency(value: int) -> int:
    if value < 1:
        raise UserError("--concurrency must be at least 1")
    return value


def source_of(path: Path) -> str:
    return str(path.resolve())
