"""The run's row in the run store, written each time the engine writes the trace."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pse.config import Settings
from pse.store import RunStore, StoreUnavailable, open_store
from pse.trace import Trace, write_trace

__all__ = ["StoreIndexer", "save_trace"]

log = logging.getLogger("pse.store")


class StoreIndexer:
    """Writes the row of a run after each trace write (`RunStorage.index`).

    A store that is down never stops the run: the trace on disk stays the truth, the failure is logged
    once, and the next save tries again (`pse store rebuild` fills in whatever was missed).

    Raises (at construction):
        ConfigError: PSE_STORE_URL is no store URL, or its driver is not installed.
    """

    def __init__(self, settings: Settings, runs_root: Path) -> None:
        self.settings = settings
        self.runs_root = runs_root
        self.failures = 0
        self._store: RunStore | None = None
        try:
            self._store = open_store(settings, runs_root)
        except StoreUnavailable as exc:
            self._failed(exc)

    def __call__(self, trace: Trace, path: Path) -> None:
        try:
            if self._store is None:
                self._store = open_store(self.settings, self.runs_root)
            st = os.stat(path)
            self._store.record(trace.row(), self.runs_root, mtime_ns=st.st_mtime_ns, size=st.st_size)
        except (StoreUnavailable, OSError) as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        if self.failures == 1:
            log.warning(
                "%s; the run goes on and its trace is complete: `pse store rebuild` indexes it later", exc
            )


def save_trace(trace: Trace, run_dir: Path, settings: Settings) -> Path:
    """Write a trace outside a running engine (a person's answer, the report added at the end) and its
    row in the store: every trace write updates the index, whoever makes it."""
    path = write_trace(trace, run_dir)
    StoreIndexer(settings, run_dir.parent.resolve())(trace, path)
    return path
