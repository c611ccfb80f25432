"""Run history read from the trace files on disk: listing, lookup and aggregate statistics.

Used by `pse trace`, `pse stats` and the dashboard. Reads only `<runs_dir>/<run_id>/trace.json`;
a run id must be a plain folder name, so nothing outside the runs directory is ever opened.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pse.engine import Trace, load_trace
from pse.exceptions import UserError

__all__ = ["RunEntry", "Stats", "compute_stats", "list_runs", "run_dir_of"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


class RunEntry(BaseModel):
    """One line of the run history."""

    run_id: str
    task: str
    outcome: str | None
    outcome_reason: str
    started_at: str
    ended_at: str | None
    cycles: int
    tokens: int
    cost: float
    currency: str


class Stats(BaseModel):
    """Aggregates over many runs."""

    runs: int
    outcomes: dict[str, int]
    first_cycle_pass_rate: float | None
    mean_cycles_to_pass: float | None
    tool_calls: int
    denied_tool_call_rate: float | None
    tokens_per_passed_run: float | None
    cost_per_passed_run: float | None
    currency: str


def run_dir_of(runs_dir: Path, run_id: str) -> Path:
    """The folder of `run_id`, refusing anything that is not a plain run id.

    Raises:
        UserError: the id is malformed or no such run exists.
    """
    if not _RUN_ID.match(run_id) or run_id in (".", ".."):
        raise UserError(f"{run_id!r} is not a run id; `pse trace list` shows the runs")
    path = runs_dir / run_id
    if not (path / "trace.json").is_file():
        raise UserError(f"no run {run_id!r} in {runs_dir}; `pse trace list` shows the runs")
    return path


def _entry(data: dict[str, Any]) -> RunEntry:
    tokens = data.get("tokens") or {}
    cost = data.get("cost") or {}
    return RunEntry(
        run_id=str(data.get("run_id", "")),
        task=str(data.get("task", "")),
        outcome=data.get("outcome"),
        outcome_reason=str(data.get("outcome_reason", "")),
        started_at=str(data.get("started_at", "")),
        ended_at=data.get("ended_at"),
        cycles=len(data.get("cycles") or []),
        tokens=int(tokens.get("total", 0)),
        cost=float(cost.get("amount", 0.0)),
        currency=str(cost.get("currency", "USD")),
    )


def list_runs(runs_dir: Path) -> list[RunEntry]:
    """Every run with a readable trace, newest first. Unreadable traces are skipped."""
    entries: list[RunEntry] = []
    if not runs_dir.is_dir():
        return entries
    for trace in runs_dir.glob("*/trace.json"):
        try:
            entries.append(_entry(json.loads(trace.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    entries.sort(key=lambda e: (e.started_at, e.run_id), reverse=True)
    return entries


def _traces(runs_dir: Path) -> list[Trace]:
    traces = []
    for path in runs_dir.glob("*/trace.json") if runs_dir.is_dir() else []:
        try:
            traces.append(load_trace(path))
        except (OSError, ValueError):
            continue
    return traces


def compute_stats(runs_dir: Path) -> Stats:
    """Outcomes, first-cycle pass rate, mean cycles to pass, denied-call rate, tokens and cost per pass."""
    traces = [t for t in _traces(runs_dir) if t.outcome is not None]
    outcomes: dict[str, int] = {}
    for t in traces:
        outcomes[str(t.outcome)] = outcomes.get(str(t.outcome), 0) + 1
    passed = [t for t in traces if t.outcome == "PASSED"]
    calls = [c for t in traces for cycle in t.cycles for c in cycle.tool_calls]
    denied = sum(1 for c in calls if c.decision == "denied")
    n = len(traces)
    return Stats(
        runs=n,
        outcomes=outcomes,
        first_cycle_pass_rate=round(sum(1 for t in passed if len(t.cycles) == 1) / n, 4) if n else None,
        mean_cycles_to_pass=round(sum(len(t.cycles) for t in passed) / len(passed), 3) if passed else None,
        tool_calls=len(calls),
        denied_tool_call_rate=round(denied / len(calls), 4) if calls else None,
        tokens_per_passed_run=round(sum(t.tokens.total for t in passed) / len(passed), 1) if passed else None,
        cost_per_passed_run=round(sum(t.cost.amount for t in passed) / len(passed), 6) if passed else None,
        currency=passed[0].cost.currency if passed else "USD",
    )
