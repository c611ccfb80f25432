"""One process executes a run at a time: the engine holds the run folder's lock while it runs.

`pse approve` (and a dashboard that did not start the run) asks `run_is_live` to know whether to leave
its decision for the process that holds the run, or to resume the run itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pse.exceptions import UserError

__all__ = ["LOCK_FILE", "holding_run", "run_is_live"]

LOCK_FILE = "run.lock"
"""The run folder's lock file (empty; held with flock by the process that executes the run)."""


def _open(run_dir: Path, flags: int) -> int:
    return os.open(run_dir / LOCK_FILE, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


@contextlib.contextmanager
def holding_run(run_dir: Path) -> Iterator[None]:
    """Hold the run's lock for the block.

    Raises:
        UserError: another process executes the run now.
    """
    handle = _open(run_dir, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        raise UserError(
            f"run {run_dir.name} is executing in another process: wait for it, or stop that process first"
        ) from None
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        os.close(handle)


def run_is_live(run_dir: Path) -> bool:
    """Whether a process executes the run now (holds its lock)."""
    try:
        handle = _open(run_dir, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
    finally:
        os.close(handle)
