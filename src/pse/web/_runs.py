"""Runs started by the dashboard: asyncio tasks in the server process, and the event broker of each.

The engine calls `setup.on_event` (the same typed events the CLI's live view consumes); a `LiveRun`
appends each to its log and wakes its subscribers. A subscriber first gets the whole log so far, then
live events, and its stream ends after `outcome` — so a late subscriber misses nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path

from pse.config import Settings
from pse.engine import Trace, new_run_id
from pse.events import Event, OutcomeEvent
from pse.exceptions import TooManyRuns, UserError
from pse.runner import PreparedRun, RunSummary, prepare_resume, prepare_run, run_to_end

__all__ = ["MAX_ACTIVE_RUNS", "MAX_FINISHED_KEPT", "LiveRun", "RunManager", "TooManyRuns"]

log = logging.getLogger("pse.web")

MAX_ACTIVE_RUNS = 8
"""Runs executing at once in one server; a ninth start is refused (HTTP 429) until one ends."""
MAX_FINISHED_KEPT = 64
"""Finished runs whose event log stays in memory for late subscribers; older ones replay from the trace."""
SHUTDOWN_GRACE_S = 10.0
"""How long shutdown waits for cancelled runs to record their outcome before cancelling their tasks."""


class LiveRun:
    """One run executing (or recently finished) in this server, with its event log."""

    def __init__(self, run_id: str, history: list[Event] | None = None) -> None:
        self._run_id = run_id
        self._prepared: PreparedRun | None = None
        self.events: list[Event] = list(history or [])
        self.summary: RunSummary | None = None
        self.error: str | None = None
        self.task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._ended = False

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def prepared(self) -> PreparedRun:
        """The wired run (its engine, folder, task)."""
        assert self._prepared is not None, "a LiveRun is attached to its prepared run before it starts"
        return self._prepared

    def attach(self, prepared: PreparedRun) -> None:
        """The run this live view is the event consumer of (prepared with `on_event=self.publish`)."""
        self._prepared = prepared

    @property
    def trace(self) -> Trace:
        """The engine's in-memory trace: more current than the file, which is written at cycle ends."""
        return self.prepared.engine.trace

    @property
    def ended(self) -> bool:
        """True once the run has an outcome event or its task has finished."""
        return self._ended

    def publish(self, event: Event) -> None:
        """The engine's `on_event` callback: record the event and wake every subscriber."""
        self.events.append(event)
        if isinstance(event, OutcomeEvent):
            self._ended = True
        self._wake()

    def finish(self) -> None:
        """The run's task is over (also when it died before an outcome): release every subscriber."""
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, *, skip: int = 0, heartbeat_s: float | None = None) -> AsyncIterator[Event | None]:
        """Every event so far, then live ones; returns after the outcome (or when the run's task ends).

        Args:
            skip: events the subscriber already has (SSE `Last-Event-ID`).
            heartbeat_s: yield None after this long without an event, so the caller can keep the
                connection alive (and notice a client that went away).
        """
        sent = max(0, skip)
        while True:
            changed = self._changed
            while sent < len(self.events):
                event = self.events[sent]
                sent += 1
                yield event
                if isinstance(event, OutcomeEvent):
                    return
            if self._ended:
                return
            try:
                await asyncio.wait_for(changed.wait(), heartbeat_s)
            except TimeoutError:
                yield None


class RunManager:
    """Starts runs as asyncio tasks, keeps their event logs, cancels them, and stops them all at shutdown."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runs: OrderedDict[str, LiveRun] = OrderedDict()

    def active(self) -> list[LiveRun]:
        """Runs whose task is still executing."""
        return [r for r in self.runs.values() if r.task is not None and not r.task.done()]

    def get(self, run_id: str) -> LiveRun | None:
        """A run started by this server (live or among the recently finished), or None."""
        return self.runs.get(run_id)

    def start(
        self,
        task_name: str,
        settings: Settings,
        inputs: dict[str, str],
        *,
        repo: Path | None = None,
        base: str | None = None,
    ) -> LiveRun:
        """Prepare a run and start it as a task of the running loop; returns at once. `repo`, `base`: a
        repository run's (`prepare_run`).

        Raises:
            TooManyRuns: `MAX_ACTIVE_RUNS` runs are executing.
            UserError: from `prepare_run` (no such task, bad input, bad cassette...).
        """
        self._check_capacity()
        live = LiveRun(new_run_id(task_name))
        live.attach(
            prepare_run(
                task_name,
                settings,
                inputs=inputs,
                on_event=live.publish,
                run_id=live.run_id,
                repo=repo,
                base=base,
            )
        )
        return self._launch(live)

    def resume(self, run_id: str, settings: Settings) -> LiveRun:
        """Go on with an interrupted or cancelled run (its next cycle, same counters); returns at once.

        Raises:
            TooManyRuns: `MAX_ACTIVE_RUNS` runs are executing.
            UserError: from `prepare_resume` (no such run, or it already ended).
        """
        current = self.runs.get(run_id)
        if current is not None and not current.ended:
            raise UserError(f"run {run_id} is executing; it cannot be resumed while it runs")
        self._check_capacity()
        live = LiveRun(run_id)
        live.attach(prepare_resume(run_id, settings, on_event=live.publish))
        # Subscribers first get what the run did before it stopped, then its new cycles live.
        live.events[:0] = live.prepared.engine.trace.events()
        return self._launch(live)

    def _check_capacity(self) -> None:
        if len(self.active()) >= MAX_ACTIVE_RUNS:
            raise TooManyRuns(f"{MAX_ACTIVE_RUNS} runs are executing; wait for one to end or cancel one")

    def _launch(self, live: LiveRun) -> LiveRun:
        live.task = asyncio.get_running_loop().create_task(self._execute(live), name=f"pse-run-{live.run_id}")
        self.runs[live.run_id] = live
        self._forget_old()
        return live

    async def _execute(self, live: LiveRun) -> None:
        try:
            live.summary = await run_to_end(live.prepared)
        except asyncio.CancelledError:
            live.error = "the server stopped the run"
            raise
        except Exception as exc:  # a bug must not take the server down; it is logged and shown
            log.exception("run %s failed", live.run_id)
            live.error = f"{type(exc).__name__}: {exc}"
        finally:
            live.finish()

    def cancel(self, run_id: str, reason: str = "cancelled from the dashboard") -> bool:
        """Ask a live run to stop (recorded as ERROR, reason `CANCELLED: …`). False if it is not running."""
        live = self.runs.get(run_id)
        if live is None or live.task is None or live.task.done():
            return False
        live.prepared.engine.cancel(reason)
        return True

    async def shutdown(self) -> None:
        """Cancel every live run, give each a grace period to record its outcome, then stop its task.
        A run waiting for an approval is not cancelled: it keeps waiting on disk for `pse approve`."""
        running = self.active()
        for live in running:
            live.prepared.engine.interrupt("the dashboard server stopped")
        tasks = [live.task for live in running if live.task is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _forget_old(self) -> None:
        finished = [rid for rid, r in self.runs.items() if r.task is not None and r.task.done()]
        for run_id in finished[: max(0, len(finished) - MAX_FINISHED_KEPT)]:
            del self.runs[run_id]


def runs_root(settings: Settings) -> Path:
    """The real path of the runs directory (created when missing)."""
    root = settings.runs_dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root
