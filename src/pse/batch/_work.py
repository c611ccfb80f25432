"""One unit of many-run work, run by whoever holds it: the same code on the local executor and on a Ray
worker, for `pse batch` rows and `pse eval` (instance, arm) pairs.

A batch row is held by a lease in the store: the worker claims it, starts its run (or resumes the run an
earlier, dead holder left at its last cycle end), renews the lease while the run goes on, and marks the
row done when the run has an outcome. A run that was cancelled (Ctrl-C, the lease lost) puts the row
back to pending; the next `pse batch` of that id resumes it. An evaluation's pair has no lease (its
folder says what is done): it names the run to resume, if any.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pse.config import Settings
from pse.runner import PreparedRun, prepare_resume, prepare_run, run_to_end
from pse.store import BatchStore, StoreUnavailable, open_store

__all__ = ["ItemResult", "Stop", "WorkItem", "new_owner", "trace_of", "work_item"]


class Stop(asyncio.Event):
    """Set to stop many runs at once, with the reason their traces will give (`CANCELLED: …`)."""

    reason = "interrupted (Ctrl-C)"

    def stop(self, reason: str) -> None:
        self.reason = reason
        self.set()


def new_owner() -> str:
    """A lease holder's name: host, process and a random part (a restarted worker is a new holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class WorkItem:
    """What a worker needs to run one unit (picklable: it travels to Ray workers).

    Attributes:
        batch_id: the batch whose row `item` this is (held by a lease); None: no batch row.
        resume: without a batch row, an earlier run of this unit to resume when it was interrupted.
        files / limits: an evaluation instance's workspace files and its suite's engine limits.
    """

    batch_id: str | None
    item: int
    task: str
    inputs: dict[str, str]
    settings: Settings
    tags: dict[str, str] = field(default_factory=dict)
    lease_s: float = 60.0
    files: dict[str, str] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    resume: str | None = None
    repo: str | None = None
    """A repository run's repository (`pse batch --repo`): each unit gets a worktree and branch of its own."""
    base: str | None = None


@dataclass
class ItemResult:
    """How one unit ended, as its worker saw it."""

    item: int
    run_id: str | None
    outcome: str | None
    state: str = ""
    resumed: int = 0
    skipped: bool = False  # it was done already: nothing ran
    error: str | None = None  # the run could not even start (a bad setting, a sandbox that fails)
    archive: bytes | None = None  # the run folder, when the worker's runs folder is not the driver's
    cancelled: bool = False  # it was interrupted: no outcome, it resumes next time
    unstarted: bool = False  # the run could not be prepared (`error` says why)


def trace_of(settings: Settings, run_id: str | None) -> dict[str, Any] | None:
    """The JSON of a run's trace in the settings' runs folder, or None (no run, unreadable)."""
    if run_id is None:
        return None
    try:
        data = json.loads((settings.runs_dir.resolve() / run_id / "trace.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def interrupted(trace: Mapping[str, Any]) -> bool:
    """A trace without an outcome, or cancelled: its run resumes from its last cycle end."""
    return trace.get("outcome") is None or str(trace.get("outcome_reason", "")).startswith("CANCELLED")


class _Lease:
    """How a unit is held: a batch row's lease in the store, or nothing (an evaluation's pair)."""

    def __init__(self, work: WorkItem, owner: str) -> None:
        self.work, self.owner = work, owner
        self.store: BatchStore | None = open_store(work.settings) if work.batch_id is not None else None

    async def take(self, cancel: asyncio.Event) -> bool:
        """Wait until this owner holds the row (True), or the row is done (False)."""
        store, work = self.store, self.work
        if store is None or work.batch_id is None:
            return True
        while not cancel.is_set():
            held = await asyncio.to_thread(store.claim, work.batch_id, work.item, self.owner, work.lease_s)
            if held is not None:
                return True
            row = self._row()
            if row is None or row.status == "done":
                return False
            with contextlib.suppress(TimeoutError):  # a live lease elsewhere: wait for it to end or lapse
                await asyncio.wait_for(cancel.wait(), timeout=min(1.0, work.lease_s / 4))
        return False

    def _row(self) -> Any:
        assert self.store is not None and self.work.batch_id is not None
        return next((i for i in self.store.items(self.work.batch_id) if i.item == self.work.item), None)

    def earlier_run(self) -> str | None:
        if self.store is None:
            return self.work.resume
        row = self._row()
        return row.run_id if row is not None else None

    def assign(self, run_id: str) -> None:
        if self.store is not None and self.work.batch_id is not None:
            self.store.assign_run(self.work.batch_id, self.work.item, self.owner, run_id)

    def finish(self, *, done: bool) -> None:
        if self.store is not None and self.work.batch_id is not None:
            with contextlib.suppress(StoreUnavailable):  # the run's trace says how it ended: the next
                self.store.finish(self.work.batch_id, self.work.item, self.owner, done=done)  # holder knows

    async def keep(self, prepared: PreparedRun) -> None:
        """Renew the lease while the run goes on; cancel the run if the lease was lost."""
        store, work = self.store, self.work
        if store is None or work.batch_id is None:
            return
        while True:
            await asyncio.sleep(work.lease_s / 3)
            if not await asyncio.to_thread(store.renew, work.batch_id, work.item, self.owner, work.lease_s):
                prepared.engine.cancel("another worker took this batch item over (the lease lapsed)")
                return


async def work_item(
    work: WorkItem,
    owner: str,
    *,
    cancel: asyncio.Event | None = None,
    running: dict[int, PreparedRun] | None = None,
    on_started: Callable[[WorkItem, str], None] | None = None,
) -> ItemResult:
    """Run one unit (under its lease, for a batch row); return how it ended.

    Args:
        owner: this worker's lease-holder name (`new_owner`).
        cancel: set to stop: a waiting claim gives up, a running run is cancelled at its cycle boundary.
        running: the prepared run is kept here while it runs (so the caller can cancel it).
        on_started: told the run id as soon as the run is prepared (or resumed).
    """
    cancel = cancel or asyncio.Event()
    try:
        return await _work(_Lease(work, owner), cancel, running, on_started)
    except StoreUnavailable as exc:  # the database went away: this row stays for the next invocation
        return ItemResult(work.item, None, None, error=str(exc))


async def _work(
    lease: _Lease,
    cancel: asyncio.Event,
    running: dict[int, PreparedRun] | None,
    on_started: Callable[[WorkItem, str], None] | None,
) -> ItemResult:
    work, settings = lease.work, lease.work.settings
    if not await lease.take(cancel):
        run_id = lease.earlier_run()
        trace = trace_of(settings, run_id) or {}
        return ItemResult(work.item, run_id, trace.get("outcome"), str(trace.get("state", "")), skipped=True)
    earlier_id = lease.earlier_run()
    earlier = trace_of(settings, earlier_id)
    try:
        if earlier is not None and not interrupted(earlier):  # it ended; its holder died before saying so
            lease.finish(done=True)
            return ItemResult(work.item, earlier_id, earlier.get("outcome"), str(earlier.get("state", "")))
        if earlier is not None and earlier_id is not None:
            prepared = prepare_resume(earlier_id, settings, limits=work.limits or None)
        else:
            prepared = prepare_run(
                work.task,
                settings,
                inputs=work.inputs,
                tags=work.tags,
                files=work.files or None,
                limits=work.limits or None,
                repo=Path(work.repo) if work.repo is not None else None,
                base=work.base,
            )
            lease.assign(prepared.run_id)
    except Exception as exc:
        lease.finish(done=False)
        return ItemResult(work.item, earlier_id, None, error=f"{type(exc).__name__}: {exc}", unstarted=True)
    if on_started is not None:
        on_started(work, prepared.run_id)
    if running is not None:
        running[work.item] = prepared
    keeper = asyncio.create_task(lease.keep(prepared))
    stopper = asyncio.create_task(cancel.wait())
    runner = asyncio.create_task(run_to_end(prepared))
    crash: str | None = None
    try:
        await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not runner.done():
            prepared.engine.cancel(getattr(cancel, "reason", Stop.reason))
        await runner
    except Exception as exc:  # a bug in a run is that run's ERROR (its trace says so), not the batch's end
        crash = f"{type(exc).__name__}: {exc}"
    finally:
        for task in (keeper, stopper):
            task.cancel()
        if running is not None:
            running.pop(work.item, None)
    trace = trace_of(settings, prepared.run_id) or {}
    done = bool(trace) and not interrupted(trace)
    lease.finish(done=done)
    return ItemResult(
        work.item,
        prepared.run_id,
        trace.get("outcome") if done else None,
        str(trace.get("state", "")),
        resumed=int(trace.get("resumed", 0)),
        error=crash,
        cancelled=not done,
    )
