"""The run store's index as a reader sees it, with the standard library only.

The run store (`pse.store`) writes its index through SQLAlchemy. The commands that only read it
(`pse trace list`, `pse stats`, `pse trace show last`) read it here instead: importing SQLAlchemy was
about 160 ms of their start-up, more than anything else they do (issue 33). Both sides share what this
module defines, so the run list has one source of truth:

- which folders are runs and a folder's row (`read_entry`: `RunEntry.of_json` of its trace);
- a row of the `runs` table as an entry (`ENTRY_FIELDS`, `entry_of_row`);
- when the index is out of step with its folder (`out_of_step`), which `RunStore.sync` acts on.

`read_runs` answers only what needs no write: a runs folder without a store is read from its traces
(as the in-memory store a reader used to build), and an embedded store in step with its folder from its
`runs` table. Anything else (a store to sync or to migrate, PSE_STORE_URL) is the store's to answer.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pse._run_entry import RunEntry
from pse._run_files import MAX_TRACE_BYTES, read_beneath

__all__ = [
    "ALL_RUNS",
    "ENTRY_FIELDS",
    "SCHEMA_VERSION",
    "STORE_FILE",
    "RunFilter",
    "entry_of_row",
    "out_of_step",
    "read_entry",
    "read_runs",
    "run_folders",
]

STORE_FILE = "runs.sqlite3"
"""The embedded store's file, in the runs directory (next to the run folders)."""

SCHEMA_VERSION = 1
"""The store's schema version this PSE writes and reads: `len(MIGRATIONS)` of `pse.store._schema`,
which refuses to load when the two differ."""

ENTRY_FIELDS = [name for name in RunEntry.model_fields if name != "tags"]
"""The `runs` columns that hold an entry's fields of the same name (the tags are a JSON column)."""

_BUSY_TIMEOUT_S = 30.0
"""How long a read waits for a writer's lock, as the store's own connections do."""


@dataclass(frozen=True)
class RunFilter:
    """Which runs a query wants: all of them by default. `outcome` "RUNNING" means "no outcome yet";
    `finished`: only runs with an outcome."""

    task: str | None = None
    outcome: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    finished: bool = False


ALL_RUNS = RunFilter()


class _Row(Protocol):
    def __getitem__(self, column: str, /) -> Any: ...


Known = Mapping[str, tuple[str | None, int, int]]
"""The index's rows of one runs folder: run id → (outcome, trace mtime in ns, trace size)."""


def entry_of_row(row: _Row) -> RunEntry:
    """The entry a `runs` row holds (SQLAlchemy's row mapping, or sqlite3's row)."""
    data = {name: row[name] for name in ENTRY_FIELDS}
    data["tags"] = json.loads(row["tags"] or "{}")
    return RunEntry(**data)


def run_folders(root: Path) -> Iterator[str]:
    """The names of the real folders (no symlinks) in `root`; none when `root` does not exist."""
    try:
        with os.scandir(root) as listing:
            for item in listing:
                if item.is_dir(follow_symlinks=False):
                    yield item.name
    except FileNotFoundError:
        return


def _trace_stat(root: Path, name: str) -> tuple[int, int] | None:
    try:
        st = os.stat(os.path.join(root, name, "trace.json"), follow_symlinks=False)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


def read_entry(root: Path, name: str) -> tuple[RunEntry, int, int] | None:
    """The row of a run folder's trace with the trace's mtime and size, or None (no trace,
    half-written, foreign, a symlink)."""
    seen = _trace_stat(root, name)
    if seen is None:
        return None
    try:
        raw = read_beneath(root, [name, "trace.json"], max_bytes=MAX_TRACE_BYTES)
        entry = RunEntry.of_json(json.loads(raw))
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    if entry.run_id != name:
        return None  # a trace copied into another run's folder is not that run
    return entry, seen[0], seen[1]


def out_of_step(root: Path, known: Known) -> tuple[list[str], list[str]]:
    """What the index of the runs folder `root` (its rows `known`) lacks, and what it has too much of.

    Returns:
        The folders to (re-)read: those without a row, and runs without an outcome whose trace changed
        since their row was written; and the run ids whose folder is gone.
    """
    names = set(run_folders(root))
    stale = [name for name in names if name not in known]
    for name, (outcome, mtime_ns, size) in known.items():
        if name in names and outcome is None and _trace_stat(root, name) not in (None, (mtime_ns, size)):
            stale.append(name)
    return stale, [name for name in known if name not in names]


def read_runs(runs_dir: Path, *, limit: int | None = None) -> list[RunEntry] | None:
    """Every run of `runs_dir` (or the `limit` newest), newest first, as the embedded store lists them,
    writing nothing; None when only the store can answer (it has rows to write, or another schema).

    A runs folder without a store file is read from its traces.
    """
    root = runs_dir.resolve()
    path = root / STORE_FILE
    if not path.is_file():
        entries = [row[0] for row in (read_entry(root, name) for name in run_folders(root)) if row]
        entries.sort(key=lambda e: (e.started_at, e.run_id), reverse=True)  # the store's ORDER BY
        return entries[:limit] if limit is not None else entries
    try:  # mode=rw: never create the file (it may be gone by now); only SELECTs are sent
        conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, timeout=_BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return None
    try:
        conn.row_factory = sqlite3.Row
        conn.isolation_level = None
        conn.execute("BEGIN")  # one snapshot for the check and the rows
        version = conn.execute("SELECT version FROM schema_version").fetchone()
        if version is None or version[0] != SCHEMA_VERSION:
            return None
        rows = conn.execute(
            "SELECT run_id, outcome, trace_mtime_ns, trace_size FROM runs WHERE runs_root = ?", (str(root),)
        )
        known = {row[0]: (row[1], row[2], row[3]) for row in rows}
        if any(out_of_step(root, known)):
            return None
        query = f"SELECT {', '.join([*ENTRY_FIELDS, 'tags'])} FROM runs ORDER BY started_at DESC, run_id DESC"
        rows = conn.execute(query + " LIMIT ?", (limit,)) if limit is not None else conn.execute(query)
        return [entry_of_row(row) for row in rows]
    except sqlite3.Error:
        return None  # the store says what is wrong
    finally:
        conn.close()
