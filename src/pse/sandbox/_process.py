"""A command's process: its limits, its capped output and outbox, and that none of it outlives the call."""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path
from typing import IO

from pse.sandbox._types import SandboxLimits

__all__ = [
    "GROUP_EXIT_WAIT_S",
    "OUTBOX_FILE_LIMIT",
    "STARTED",
    "kill_group",
    "limits_prefix",
    "read_capped",
    "read_outbox",
    "wait_gone",
]

GROUP_EXIT_WAIT_S = 2.0
"""After killing a command's process group, wait at most this long for its members to exit."""
OUTBOX_FILE_LIMIT = 16 * 1024 * 1024
"""Largest outbox file PSE reads back; a bigger one is dropped."""


STARTED = b"S"
"""What the launcher writes to its marker descriptor once the sandbox is set up, just before the command."""


def limits_prefix(limits: SandboxLimits, marker_fd: int | None = None) -> list[str]:
    """The launcher every command starts through: it sets the rlimits, then execs the command.

    With `marker_fd`, it writes `STARTED` there first and closes it for the command: a run that never
    wrote it did not get past the sandbox's own set-up (bwrap's mounts, setpriv's switch), which is the
    machinery failing, not the command.
    """
    # bash's ulimit units: -v in KiB, -f in 1024-byte blocks. Failing to set a limit refuses to run.
    limits_set = (
        f"ulimit -t {limits.cpu_s} -v {limits.memory_mb * 1024} -f {limits.file_size_mb * 1024} "
        f"-u {limits.max_processes} || exit 125; "
    )
    if marker_fd is None:
        script = limits_set + 'exec "$@"'
    else:
        script = limits_set + f'printf {STARTED.decode()} >&{marker_fd}; exec "$@" {marker_fd}>&-'
    return ["/bin/bash", "--noprofile", "--norc", "-c", script, "pse-sandbox"]


def read_capped(stream: IO[bytes], limit: int) -> tuple[str, bool]:
    """Read a command's output file, keeping at most about `limit` characters (head and tail)."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(0)
    if size <= limit:
        return stream.read().decode("utf-8", errors="replace"), False
    keep = max(limit - 48, 0)
    head_n, tail_n = keep * 2 // 3, keep - keep * 2 // 3
    head = stream.read(head_n).decode("utf-8", errors="replace")
    stream.seek(size - tail_n)
    tail = stream.read(tail_n).decode("utf-8", errors="replace") if tail_n else ""
    return f"{head}\n[… truncated {size - head_n - tail_n} bytes …]\n{tail}", True


def kill_group(pgid: int) -> None:
    """SIGKILL a process group, then wait (bounded) until no member still runs: none outlives the call."""
    deadline = time.monotonic() + GROUP_EXIT_WAIT_S
    delay = 0.001
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        # The group still "exists" while it holds zombies (e.g. bwrap's intermediate process, orphaned to
        # an init that may never reap it); only members that still run matter.
        if not live_members(pgid) or time.monotonic() >= deadline:
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def live_members(pgid: int) -> bool:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def wait_gone(pid: int) -> None:
    """Wait (bounded) until process `pid` has exited: gone, or a zombie."""
    deadline = time.monotonic() + GROUP_EXIT_WAIT_S
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in (b"Z", b"X"):
            return
        time.sleep(0.005)


def read_outbox(folder: Path) -> dict[str, bytes]:
    """The regular files a command left in its outbox (no symlink followed, none above the cap)."""
    found: dict[str, bytes] = {}
    for entry in sorted(os.listdir(folder)):
        try:
            fd = os.open(folder / entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size <= OUTBOX_FILE_LIMIT:
                found[entry] = handle.read(OUTBOX_FILE_LIMIT)
    return found
