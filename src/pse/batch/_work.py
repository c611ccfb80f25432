"""One item of a batch, run by whoever holds its lease: the same code on the local executor and on a
Ray worker.

The worker claims the item in the store, starts its run (or resumes the run an earlier, dead holder
left at its last cycle end), renews the lease while the run goes on, and marks the item done when the
run has an outcome. A run that was cancelled (Ctrl-C, the lease lost) puts the item back to pending;
the next `pse batch` of that id resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from pse.config import Settings
from pse.runner import PreparedRun, prepare_resume, prepare_run, run_to_end
from pse.store import BatchStore, StoreUnavailable, open_store

__all__ = ["ItemResult", "WorkItem", "new_owner", "work_item"]


def new_owner() -> str:
    """A lease holder's name: host, process and a random part (a restarted worker is a new holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class WorkItem:
    """What a worker needs to run one item (picklable: it travels to Ray workers)."""

    batch_id: str
    item: int
    task: str
    inputs: dict[str, str]
    settings: Settings
    tags: dict[str, str] = field(default_factory=dict)
    lease_s: float = 60.0


@dataclass
class ItemResult:
    """How one item ended, as its worker saw it."""

    item: int
    run_id: str | None
    outcome: str | None
    state: str = ""
    resumed: int = 0
    skipped: bool = False  # it was done already: nothing ran
    error: str | None = None  # the run could not even start (a bad setting, a sandbox that fails)
    archive: bytes | None = None  # the run folder, when the worker's runs folder is not the driver's


def _trace_of(settings: Settings, run_id: str | None) -> dict[str, Any] | None:
    if run_id is None:
        return None
    try:
        data = json.loads((settings.runs_dir.resolve() / run_id / "trace.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _interrupted(trace: dict[str, Any]) -> bool:
    return trace.get("outcome") is None or str(trace.get("outcome_reason", "")).startswith("CANCELLED")


async def _claim(store: BatchStore, work: WorkItem, owner: str, cancel: asyncio.Event) -> bool:
    """Wait until this owner holds the item's lease (True) or the item is done (False)."""
    while not cancel.is_set():
        held = await asyncio.to_thread(store.claim, work.batch_id, work.item, owner, work.lease_s)
        if held is not None:
            return True
        current = next((i for i in store.items(work.batch_id) if i.item == work.item), None)
        if current is None or current.status == "done":
            return False
        with contextlib.suppress(TimeoutError):  # a live lease elsewhere: wait for it to end or lapse
            await asyncio.wait_for(cancel.wait(), timeout=min(1.0, work.lease_s / 4))
    return False


async def _renew(store: BatchStore, work: WorkItem, owner: str, prepared: PreparedRun) -> None:
    while True:
        await asyncio.sleep(work.lease_s / 3)
        if not await asyncio.to_thread(store.renew, work.batch_id, work.item, owner, work.lease_s):
            prepared.engine.cancel("another worker took this batch item over (the lease lapsed)")
            return


async def work_item(
    work: WorkItem,
    owner: str,
    *,
    cancel: asyncio.Event | None = None,
    running: dict[int, PreparedRun] | None = None,
) -> ItemResult:
    """Run one batch item under its lease; return how it ended.

    Args:
        owner: this worker's lease-holder name (`new_owner`).
        cancel: set to stop: a waiting claim gives up, a running run is cancelled at its cycle boundary.
        running: the prepared run is kept here while it runs (so the caller can cancel it).
    """
    cancel = cancel or asyncio.Event()
    try:
        return await _work(work, owner, cancel, running)
    except StoreUnavailable as exc:  # the database went away: this row stays for the next invocation
        return ItemResult(work.item, None, None, error=str(exc))


async def _work(
    work: WorkItem, owner: str, cancel: asyncio.Event, running: dict[int, PreparedRun] | None
) -> ItemResult:
    settings = work.settings
    store = open_store(settings)
    if not await _claim(store, work, owner, cancel):
        current = next((i for i in store.items(work.batch_id) if i.item == work.item), None)
        run_id = current.run_id if current else None
        trace = _trace_of(settings, run_id) or {}
        return ItemResult(work.item, run_id, trace.get("outcome"), str(trace.get("state", "")), skipped=True)
    current = next(i for i in store.items(work.batch_id) if i.item == work.item)
    earlier = _trace_of(settings, current.run_id)
    try:
        if earlier is not None and not _interrupted(
            earlier
        ):  # it ended, but its holder died before saying so
            store.finish(work.batch_id, work.item, owner, done=True)
            return ItemResult(
                work.item, current.run_id, earlier.get("outcome"), str(earlier.get("state", ""))
            )
        if earlier is not None and current.run_id is not None:
            prepared = prepare_resume(current.run_id, settings)
        else:
            prepared = prepare_run(work.task, settings, inputs=work.inputs, tags=work.tags)
            store.assign_run(work.batch_id, work.item, owner, prepared.run_id)
    except Exception as exc:
        store.finish(work.batch_id, work.item, owner, done=False)
        return ItemResult(work.item, current.run_id, None, error=f"{type(exc).__name__}: {exc}")
    if running is not None:
        running[work.item] = prepared
    renewer = asyncio.create_task(_renew(store, work, owner, prepared))
    stopper = asyncio.create_task(cancel.wait())
    runner = asyncio.create_task(run_to_end(prepared))
    try:
        await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not runner.done():
            prepared.engine.cancel("the batch was interrupted (Ctrl-C)")
        summary = await runner
    except Exception as exc:  # a bug in a run is that run's ERROR (its trace says so), not the batch's end
        trace = _trace_of(settings, prepared.run_id) or {}
        store.finish(work.batch_id, work.item, owner, done=not _interrupted(trace) if trace else False)
        return ItemResult(
            work.item, prepared.run_id, trace.get("outcome"), error=f"{type(exc).__name__}: {exc}"
        )
    finally:
        for task in (renewer, stopper):
            task.cancel()
        if running is not None:
            running.pop(work.item, None)
    trace = _trace_of(settings, prepared.run_id) or {}
    done = bool(trace) and not _interrupted(trace)
    with contextlib.suppress(StoreUnavailable):  # the run is over, its trace says so: the next holder
        store.finish(work.batch_id, work.item, owner, done=done)  # of the row marks it done
    return ItemResult(
        work.item,
        prepared.run_id,
        summary.outcome if done else None,
        summary.state,
        resumed=int(trace.get("resumed", 0)),
    )
