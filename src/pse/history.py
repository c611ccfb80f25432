"""Run history read from the trace files on disk: listing, lookup and aggregate statistics.

Used by `pse trace`, `pse stats` and the dashboard. Reads only `<runs_dir>/<run_id>/trace.json`;
a run id must be a plain folder name, and run folders are written by tools, so traces are read
through `pse._run_files`: a symlinked run folder or trace, a FIFO or an oversized trace is skipped,
and nothing outside the runs directory is ever opened.
`RunHistory` keeps one summary row per trace and re-reads a trace only when its size or mtime
changed, so a long-lived process (the dashboard) lists 10,000 runs from a directory scan.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from pse._run_files import MAX_TRACE_BYTES, read_beneath
from pse.engine import check_run_id
from pse.exceptions import UserError
from pse.trace import RunEntry

__all__ = ["RunEntry", "RunHistory", "Stats", "compute_stats", "list_runs", "run_dir_of", "stats_of"]


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
    """The run entries of one runs directory, cached per trace file (thread-safe)."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self._rows: dict[str, tuple[int, int, RunEntry | None]] = {}
        self._lock = threading.Lock()

    def entries(self) -> list[RunEntry]:
        """Every run with a readable trace, newest first. Unreadable traces are skipped."""
        with self._lock:
            seen: dict[str, tuple[int, int, RunEntry | None]] = {}
            try:
                folders = list(os.scandir(self.runs_dir))
            except FileNotFoundError:
                folders = []
            for folder in folders:
                try:
                    if not folder.is_dir(follow_symlinks=False):
                        continue
                    st = os.stat(os.path.join(folder.path, "trace.json"), follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                cached = self._rows.get(folder.name)
                if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size):
                    seen[folder.name] = cached
                    continue
                try:
                    raw = read_beneath(self.runs_dir, [folder.name, "trace.json"], max_bytes=MAX_TRACE_BYTES)
                    entry: RunEntry | None = RunEntry.of_json(json.loads(raw))
                except (OSError, ValueError, AttributeError, TypeError):
                    entry = None  # half-written, foreign, swapped for a symlink: skipped until it changes
                seen[folder.name] = (st.st_mtime_ns, st.st_size, entry)
            self._rows = seen
            rows = [row[2] for row in seen.values() if row[2] is not None]
        rows.sort(key=lambda e: (e.started_at, e.run_id), reverse=True)
        return rows


def list_runs(runs_dir: Path) -> list[RunEntry]:
    """Every run with a readable trace, newest first."""
    return RunHistory(runs_dir).entries()


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


def compute_stats(runs_dir: Path) -> Stats:
    """`stats_of` every run in `runs_dir`."""
    return stats_of(list_runs(runs_dir))
