"""Run history: listing, lookup and aggregate statistics, read from the run store (`pse.store`).

Used by `pse trace`, `pse stats` and the dashboard. The store indexes `<runs_dir>/<run_id>/trace.json`;
a run id must be a plain folder name, and run folders are written by tools, so traces are read
through `pse._run_files`: a symlinked run folder or trace, a FIFO or an oversized trace is skipped,
and nothing outside the runs directory is ever opened.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from pse._run_entry import RunEntry
from pse._run_id import check_run_id
from pse._run_index import ALL_RUNS, RunFilter, read_runs
from pse.exceptions import UserError

if TYPE_CHECKING:
    from pse.config import Settings
    from pse.store import BatchStore

__all__ = [
    "RunEntry",
    "RunFilter",
    "RunHistory",
    "Stats",
    "compute_stats",
    "list_runs",
    "run_dir_of",
    "stats_of",
    "stats_of_totals",
]


class Stats(BaseModel):
    """Aggregates over the finished runs."""

    runs: int
    outcomes: dict[str, int]
    first_cycle_pass_rate: float | None
    mean_cycles_to_pass: float | None
    tool_calls: int
    denied_tool_call_rate: float | None
    tokens_per_passed_run: float | None
    cost_per_passed_run: float | None
    currency: str
    handoffs: int = 0
    handoff_failure_rate: float | None = None
    cached_prompt_share: float | None = Field(
        None, description="share of the prompt tokens the providers served from their prompt caches"
    )
    reusable_prefix_share: float | None = Field(
        None, description="share of the prompt tokens that repeat a prefix sent before (what a cache can hit)"
    )


def run_dir_of(runs_dir: Path, run_id: str) -> Path:
    """The folder of `run_id`, refusing anything that is not a plain run id.

    The folder must be a real directory (not a symlink) holding a regular `trace.json` (not a symlink).

    Raises:
        UserError: the id is malformed or no such run exists.
    """
    path = runs_dir / check_run_id(run_id)
    try:
        real = stat.S_ISDIR(os.lstat(path).st_mode) and stat.S_ISREG(os.lstat(path / "trace.json").st_mode)
    except OSError:
        real = False
    if not real:
        raise UserError(f"no run {run_id!r} in {runs_dir}; `pse trace list` shows the runs")
    return path


class RunHistory:
    """The runs of one runs directory, as the run store indexes them (thread-safe).

    The engine writes a run's row at every cycle end; before a read, `sync` picks up run folders the
    store has not seen (copied in, or written before the store existed), runs without an outcome whose
    trace changed, and folders that are gone, when the runs directory changed or `sync_every_s` passed.

    Args:
        runs_dir: the runs directory.
        settings: where the store is (PSE_STORE_URL); default: the environment's settings.
        sync_every_s: how stale the folder view may get between two reads (0: sync before each).
        create: False to leave no trace: with no store yet, an in-memory one is synced from the folder
            and nothing is created on disk (what `pse trace list` and `pse stats` read through).
    """

    def __init__(
        self,
        runs_dir: Path,
        settings: Settings | None = None,
        *,
        sync_every_s: float = 2.0,
        create: bool = True,
    ) -> None:
        from pse.config import load_settings
        from pse.store import open_store

        self.runs_dir = runs_dir
        settings = settings if settings is not None else load_settings(runs_dir=runs_dir)
        self.store: BatchStore = open_store(settings, runs_dir, create=create)
        self.sync_every_s = sync_every_s
        self._synced_at = -float("inf")
        self._seen_mtime: int | None = None
        self._lock = threading.Lock()

    def sync(self, *, force: bool = False) -> None:
        """Bring the store up to date with the folder, if it may be out of date."""
        with self._lock:
            try:
                mtime: int | None = os.stat(self.runs_dir).st_mtime_ns
            except OSError:
                mtime = None
            now = time.monotonic()
            if force or mtime != self._seen_mtime or now - self._synced_at >= self.sync_every_s:
                self.store.sync(self.runs_dir)
                self._seen_mtime, self._synced_at = mtime, now

    def entries(
        self, where: RunFilter = ALL_RUNS, *, offset: int = 0, limit: int | None = None
    ) -> list[RunEntry]:
        """The runs that match, newest first."""
        self.sync()
        return self.store.entries(where, offset=offset, limit=limit)

    def count(self, where: RunFilter = ALL_RUNS) -> int:
        self.sync()
        return self.store.count(where)

    def stats(self, where: RunFilter = ALL_RUNS) -> tuple[Stats, dict[str, int]]:
        """The statistics of the finished runs that match, and their cycles-to-pass histogram (computed
        by the database, equal to `stats_of` over the same entries)."""
        self.sync()
        totals = self.store.totals(where)
        return stats_of_totals(totals), totals["cycles_to_pass"]


def list_runs(
    runs_dir: Path, settings: Settings | None = None, *, limit: int | None = None
) -> list[RunEntry]:
    """Every run with a readable trace (or the `limit` newest), newest first. Creates nothing: a runs
    folder without a store is read from its traces.

    The embedded store, when it is in step with the folder, is read without SQLAlchemy (what
    `pse trace list` pays for at start-up); otherwise the store syncs and answers."""
    if _embedded(runs_dir, settings):
        entries = read_runs(runs_dir, limit=limit)
        if entries is not None:
            return entries
    return RunHistory(runs_dir, settings, sync_every_s=0, create=False).entries(limit=limit)


def _embedded(runs_dir: Path, settings: Settings | None) -> bool:
    """Whether the runs of `runs_dir` are indexed by the embedded store (no PSE_STORE_URL)."""
    if settings is None:
        from pse.config import load_settings

        settings = load_settings(runs_dir=runs_dir)
    return settings.store_url is None


def stats_of(entries: Sequence[RunEntry]) -> Stats:
    """Outcomes, first-cycle pass rate, mean cycles to pass, denied-call rate, tokens and cost per pass."""
    finished = [e for e in entries if e.outcome is not None]
    outcomes: dict[str, int] = {}
    for e in finished:
        outcomes[str(e.outcome)] = outcomes.get(str(e.outcome), 0) + 1
    passed = [e for e in finished if e.outcome == "PASSED"]
    calls = sum(e.tool_calls for e in finished)
    denied = sum(e.denied_tool_calls for e in finished)
    n = len(finished)
    return Stats(
        runs=n,
        outcomes=outcomes,
        first_cycle_pass_rate=round(sum(1 for e in passed if e.cycles == 1) / n, 4) if n else None,
        mean_cycles_to_pass=round(sum(e.cycles for e in passed) / len(passed), 3) if passed else None,
        tool_calls=calls,
        denied_tool_call_rate=round(denied / calls, 4) if calls else None,
        tokens_per_passed_run=round(sum(e.tokens for e in passed) / len(passed), 1) if passed else None,
        cost_per_passed_run=round(sum(e.cost for e in passed) / len(passed), 6) if passed else None,
        currency=passed[0].currency if passed else "USD",
        handoffs=(handoffs := sum(e.handoffs for e in finished)),
        handoff_failure_rate=round(sum(e.handoff_failures for e in finished) / handoffs, 4)
        if handoffs
        else None,
        cached_prompt_share=round(sum(e.cached_tokens for e in finished) / prompt, 4)
        if (prompt := sum(e.prompt_tokens for e in finished))
        else None,
        reusable_prefix_share=round(sum(e.prefix_reusable for e in finished) / counted, 4)
        if (counted := sum(e.prefix_counted for e in finished))
        else None,
    )


def stats_of_totals(t: dict[str, Any]) -> Stats:
    """`Stats` from the sums `RunStore.totals` computed (the same arithmetic as `stats_of`)."""
    n, passed, calls, handoffs = t["runs"], t["passed"], t["tool_calls"], t["handoffs"]
    return Stats(
        runs=n,
        outcomes=t["outcomes"],
        first_cycle_pass_rate=round(t["first_cycle"] / n, 4) if n else None,
        mean_cycles_to_pass=round(t["passed_cycles"] / passed, 3) if passed else None,
        tool_calls=calls,
        denied_tool_call_rate=round(t["denied"] / calls, 4) if calls else None,
        tokens_per_passed_run=round(t["passed_tokens"] / passed, 1) if passed else None,
        cost_per_passed_run=round(t["passed_cost"] / passed, 6) if passed else None,
        currency=t["currency"] if passed else "USD",
        handoffs=handoffs,
        handoff_failure_rate=round(t["handoff_failures"] / handoffs, 4) if handoffs else None,
        cached_prompt_share=round(t["cached_tokens"] / t["prompt_tokens"], 4) if t["prompt_tokens"] else None,
        reusable_prefix_share=round(t["prefix_reusable"] / t["prefix_counted"], 4)
        if t["prefix_counted"]
        else None,
    )


def compute_stats(runs_dir: Path, settings: Settings | None = None) -> Stats:
    """The statistics of every finished run in `runs_dir` (creating nothing, and read as `list_runs`
    reads: the database's sums when only the store can answer, `stats_of` over the entries when not)."""
    if _embedded(runs_dir, settings):
        entries = read_runs(runs_dir)
        if entries is not None:
            return stats_of(entries)
    return RunHistory(runs_dir, settings, sync_every_s=0, create=False).stats()[0]
