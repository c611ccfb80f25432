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
    "IN_MEMORY_URL",
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
    "store_exists",
    "store_url_of",
]

IN_MEMORY_URL = "sqlite://"
"""The store a reader uses where no store exists yet: SQLite in memory, gone with the process."""

_open: dict[str, BatchStore] = {}
_lock = threading.Lock()


def store_url_of(settings: Settings, runs_dir: Path | None = None) -> str:
    """The store URL of these settings: PSE_STORE_URL, or the SQLite file in the runs directory."""
    if settings.store_url is not None:
        return settings.store_url.get_secret_value()
    root = (runs_dir or settings.runs_dir).resolve()
    return f"sqlite:///{root / STORE_FILE}"


def store_exists(settings: Settings, runs_dir: Path | None = None) -> bool:
    """Whether the store of these settings is there to read: always for PSE_STORE_URL; for the embedded
    store, whether its file exists (a runs folder no run has used yet has none)."""
    url = store_url_of(settings, runs_dir)
    return not url.startswith("sqlite:///") or Path(url.removeprefix("sqlite:///")).is_file()


def open_store(settings: Settings, runs_dir: Path | None = None, *, create: bool = True) -> BatchStore:
    """The process's store for these settings (opened, and migrated, once per URL).

    Args:
        settings: where the store is (PSE_STORE_URL, else the runs folder's SQLite file).
        runs_dir: the runs folder, when it is not the settings' one.
        create: False for a reader that must leave nothing behind (`pse trace list`, `pse stats`): when
            the embedded store's file does not exist, no folder and no file is created, and a new
            in-memory store stands in (empty until its reader syncs it from the runs folder).
    """
    if not create and not store_exists(settings, runs_dir):
        return BatchStore(IN_MEMORY_URL)
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
