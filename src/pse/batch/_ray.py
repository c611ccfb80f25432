"""The Ray executor: batch items spread over Ray workers (the `ray` extra).

Each worker is an async Ray actor that runs several items at once (`per_worker`); an item is one actor
task calling the same `work_item` as the local executor. Actors restart when their process dies and
Ray retries the tasks they held, so a killed worker's items run again elsewhere: the retried task
waits for the dead holder's lease to lapse, then resumes the run from its trace's last cycle end.

The runs folder: when the workers see the driver's runs directory (one machine, or `PSE_RUNS_DIR` on
shared storage; checked with a marker file), they write in place. When they do not, each worker runs in
a folder of its own and sends the run folder back (a capped archive of regular files), which the driver
unpacks into its runs directory and indexes.

The model rate limit (PSE_MODEL_RPM, _TPM, _MAX_CONCURRENCY), when one is set, is held by one named
actor (`pse-rate-limit`, namespace `pse`) that every worker's calls wait on, so the limit holds for the
cluster, not per worker.
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pse.batch._work import ItemResult, Stop, WorkItem, new_owner, work_item
from pse.engine import check_run_id
from pse.exceptions import ConfigError
from pse.models._ratelimit import Grant, LimitKey, Limits, LocalLimiter, install_limiter_backend
from pse.store import open_store

__all__ = ["LIMIT_ACTOR", "RayExecutor", "RayLimiterBackend"]

MARKER = ".pse-batch-marker"
ARCHIVE_LIMIT = 64 * 1024 * 1024


def _ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError:
        raise ConfigError("--executor ray needs Ray: install it with `pip install 'pse[ray]'`") from None
    return ray


LIMIT_ACTOR = "pse-rate-limit"
"""The named actor that holds the model rate limit every worker of a cluster shares."""


class _LimitActor:
    """The shared model rate limit of a Ray cluster: every worker's calls wait here."""

    def __init__(self) -> None:
        self.limiter = LocalLimiter()

    async def acquire(self, key: LimitKey, limits: Limits, tokens: int) -> Grant:
        return await self.limiter.acquire(key, limits, tokens)

    async def release(self, grant: Grant, used_tokens: int | None) -> None:
        await self.limiter.release(grant, used_tokens)

    async def pause(self, key: LimitKey, seconds: float) -> None:
        await self.limiter.pause(key, seconds)


class RayLimiterBackend:
    """A worker's limiter backend: each call asks the cluster's one limit actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def acquire(self, key: LimitKey, limits: Limits, tokens: int) -> Grant:
        grant: Grant = await self.actor.acquire.remote(key, limits, tokens)
        return grant

    async def release(self, grant: Grant, used_tokens: int | None) -> None:
        await self.actor.release.remote(grant, used_tokens)

    async def pause(self, key: LimitKey, seconds: float) -> None:
        await self.actor.pause.remote(key, seconds)


class _RunWorker:
    """One Ray worker: runs batch items in its own event loop, several at a time."""

    def __init__(self, limit_actor: Any = None) -> None:
        self.owner = new_owner()
        self.cancel = Stop()
        if limit_actor is not None:  # this process's model calls wait on the cluster's limit
            install_limiter_backend(RayLimiterBackend(limit_actor))

    async def pid(self) -> int:
        return os.getpid()

    async def sees(self, marker: str, token: str) -> bool:
        try:
            return Path(marker).read_text(encoding="utf-8") == token
        except OSError:
            return False

    async def stop(self, reason: str = Stop.reason) -> None:
        self.cancel.stop(reason)

    async def run(self, work: WorkItem, shared: bool) -> ItemResult:
        if shared:
            return await work_item(work, self.owner, cancel=self.cancel)
        local = Path(tempfile.mkdtemp(prefix="pse-worker-runs-"))
        try:
            moved = replace(work, settings=work.settings.model_copy(update={"runs_dir": local}))
            result = await work_item(moved, self.owner, cancel=self.cancel)
            if result.run_id is not None and (local / result.run_id).is_dir():
                result.archive = _pack(local / result.run_id)
            return result
        finally:
            shutil.rmtree(local, ignore_errors=True)


def _pack(run_dir: Path) -> bytes:
    """The run folder as a tar.gz of its regular files and folders (no links), at most ARCHIVE_LIMIT."""
    buffer = io.BytesIO()
    size = 0
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(run_dir.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                continue
            if path.is_file():
                size += path.stat().st_size
                if size > ARCHIVE_LIMIT and path.name != "trace.json":
                    continue  # over the cap: the trace and what fits still travel
            archive.add(path, arcname=str(path.relative_to(run_dir)), recursive=False)
    return buffer.getvalue()


def _unpack(data: bytes, target: Path) -> None:
    """Unpack a worker's run folder: plain relative names, regular files and folders only."""
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
                continue
            destination = target.joinpath(*parts)
            if member.isdir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            if source is not None:
                with source, open(destination, "wb") as handle:
                    shutil.copyfileobj(source, handle)


@dataclass
class RayExecutor:
    """Items as Ray actor tasks on `workers` actors, `per_worker` at a time on each.

    Args:
        address: a cluster to join (`auto`: the one `ray start` made here); None starts a local Ray
            for the batch, with `workers` CPUs, and stops it after.
        shared: whether the workers write into the driver's runs folder; None: find out.
    """

    workers: int = 2
    per_worker: int = 8
    address: str | None = None
    shared: bool | None = None
    name: str = "ray"
    actors: list[Any] = field(default_factory=list)

    async def run(
        self,
        works: Sequence[WorkItem],
        on_result: Callable[[ItemResult], None],
        cancel: asyncio.Event,
        on_started: Callable[[WorkItem, str], None] | None = None,
    ) -> None:
        ray = _ray()
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(
                address=self.address,
                num_cpus=None if self.address else self.workers,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        try:
            await self._run(ray, works, on_result, cancel, on_started)
        finally:
            self.actors = []
            if started_here:
                ray.shutdown()

    async def _run(
        self,
        ray: Any,
        works: Sequence[WorkItem],
        on_result: Callable[[ItemResult], None],
        cancel: asyncio.Event,
        on_started: Callable[[WorkItem, str], None] | None,
    ) -> None:
        if not works:
            return
        limit_actor = None
        if Limits.of(works[0].settings).active:
            limit_actor = (
                ray.remote(_LimitActor)
                .options(
                    name=LIMIT_ACTOR, namespace="pse", get_if_exists=True, max_concurrency=10_000, num_cpus=0
                )
                .remote()
            )
        worker_class = ray.remote(max_restarts=-1, max_task_retries=-1)(_RunWorker)
        self.actors = [
            worker_class.options(max_concurrency=self.per_worker + 2, num_cpus=0).remote(limit_actor)
            for _ in range(self.workers)
        ]
        runs_dir = works[0].settings.runs_dir
        shared = self.shared
        if shared is None:
            token = secrets.token_hex(16)
            marker = runs_dir / MARKER
            runs_dir.mkdir(parents=True, exist_ok=True)
            marker.write_text(token, encoding="utf-8")
            try:
                shared = all(await asyncio.gather(*(a.sees.remote(str(marker), token) for a in self.actors)))
            finally:
                marker.unlink(missing_ok=True)
        settings = works[0].settings
        if (
            not shared
            and settings.store_url is not None
            and settings.store_url.get_secret_value().startswith("sqlite")
        ):
            raise ConfigError(
                "the Ray workers do not see this runs folder, so they cannot share its SQLite store: set "
                "PSE_STORE_URL=postgresql://… (a store every machine reaches), or put PSE_RUNS_DIR on "
                "storage every worker mounts"
            )
        store = open_store(settings)
        slots = asyncio.Semaphore(self.workers * self.per_worker)

        async def one(index: int, work: WorkItem) -> None:
            async with slots:
                if cancel.is_set():
                    return
                actor = self.actors[index % len(self.actors)]
                result: ItemResult = await actor.run.remote(work, shared)
                if result.archive is not None and result.run_id is not None:
                    _unpack(result.archive, runs_dir / check_run_id(result.run_id))
                    result.archive = None
                    await asyncio.to_thread(store.index_folder, runs_dir, result.run_id)
                if on_started is not None and result.run_id is not None and not result.skipped:
                    on_started(work, result.run_id)  # late: the worker is elsewhere
                on_result(result)

        async def stop_on_cancel() -> None:
            await cancel.wait()
            reason = getattr(cancel, "reason", Stop.reason)
            await asyncio.gather(*(a.stop.remote(reason) for a in self.actors), return_exceptions=True)

        stopper = asyncio.create_task(stop_on_cancel())
        try:
            await asyncio.gather(*(one(i, w) for i, w in enumerate(works)))
        finally:
            stopper.cancel()

    async def worker_pids(self) -> list[int]:
        """The process ids of the workers (tests kill one)."""
        return list(await asyncio.gather(*(a.pid.remote() for a in self.actors)))
