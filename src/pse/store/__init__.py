"""The run store: an index of runs (SQLite embedded, PostgreSQL shared); the traces stay the truth.

`open_store(settings)` gives the process's one store of those settings (`PSE_STORE_URL`, or
`<runs_dir>/runs.sqlite3`), migrated on first open.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pse.config import Settings
from pse.store._batches import BatchItem, BatchStore
from pse.store._schema import SCHEMA_VERSION
from pse.store._store import (
    ALL_RUNS,
    STORE_FILE,
    RebuildReport,
    RunFilter,
    RunStore,
    StoreUnavailable,
    public_store_url,
)

__all__ = [
    "ALL_RUNS",
    "SCHEMA_VERSION",
    "STORE_FILE",
    "BatchItem",
    "BatchStore",
    "RebuildReport",
    "RunFilter",
    "RunStore",
    "StoreUnavailable",
    "close_stores",
    "open_store",
    "public_store_url",
    "store_url_of",
]

_open: dict[str, BatchStore] = {}
_lock = threading.Lock()


def store_url_of(settings: Settings, runs_dir: Path | None = None) -> str:
    """The store URL of these settings: PSE_STORE_URL, or the SQLite file in the runs directory."""
    if settings.store_url is not None:
        return settings.store_url.get_secret_value()
    root = (runs_dir or settings.runs_dir).resolve()
    return f"sqlite:///{root / STORE_FILE}"


def open_store(settings: Settings, runs_dir: Path | None = None) -> BatchStore:
    """The process's store for these settings (opened, and migrated, once per URL)."""
    url = store_url_of(settings, runs_dir)
    with _lock:
        store = _open.get(url)
        if store is None:
            if url.startswith("sqlite:///"):
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            store = _open[url] = BatchStore(url)
        return store


def close_stores() -> None:
    """Close every store this process opened (tests; a long-lived process that changes stores)."""
    with _lock:
        for store in _open.values():
            store.close()
        _open.clear()
