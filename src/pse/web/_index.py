"""A cached run history: `pse.history.list_runs`, re-read only when some trace file changed.

A listing costs one `stat` per run folder; the traces are parsed again only when a trace file was
added, removed or rewritten since the last listing (its name, size or mtime changed).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pse.history import RunEntry, list_runs

__all__ = ["HistoryIndex"]


class HistoryIndex:
    """`entries()` returns `list_runs(runs_dir)`, cached against the trace files' stat signature."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self._signature: frozenset[tuple[str, int, int]] | None = None
        self._entries: list[RunEntry] = []
        self._lock = threading.Lock()

    def _stat_signature(self) -> frozenset[tuple[str, int, int]]:
        found: set[tuple[str, int, int]] = set()
        try:
            folders = list(os.scandir(self.runs_dir))
        except FileNotFoundError:
            return frozenset()
        for folder in folders:
            try:
                st = os.stat(os.path.join(folder.path, "trace.json"))
            except OSError:
                continue
            found.add((folder.name, st.st_mtime_ns, st.st_size))
        return frozenset(found)

    def entries(self) -> list[RunEntry]:
        """Every run with a readable trace, newest first (the cached list when nothing changed)."""
        with self._lock:
            signature = self._stat_signature()
            if signature != self._signature:
                self._entries = list_runs(self.runs_dir)
                self._signature = signature
            return self._entries
