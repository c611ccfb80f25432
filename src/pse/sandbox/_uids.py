"""Fallback as root: each command runs as a uid of its own, and every process of that uid dies with it.

Without bwrap there is no PID namespace to end a command's processes with it: a child that leaves the
process group (`setsid`, a double fork) outlives the command, and, sharing one uid with later commands,
could rewrite what they read or report (their outbox, their copy of the workspace). So in fallback as
root every command leases a uid of its own from a pool (the `PSE_SANDBOX_UIDS` uids after
`PSE_SANDBOX_UID`; that one stays bwrap's, whose commands a sweep must never reach), and:

* before the command starts, no process of that uid exists (any left over, by a PSE that crashed, is
  killed first);
* when the command ends (exit, timeout or halt), every process of that uid is killed, and the lease is
  given back only once none is left;
* files the command may write (its home, its outbox, its copy of the workspace) belong to that uid
  alone, mode 0700: no other command, of this run or another, can enter them.

A lease is an exclusive `flock` on a file in a root-only folder, so concurrent runs and processes on the
machine share the pool safely, and a lease dies with the process that held it.

As a normal user none of this is possible (commands run as the user: killing "every process of the uid"
would kill PSE): docs/security.md says what that mode leaves open.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from pse.exceptions import ToolInfrastructureError

__all__ = [
    "DEFAULT_UID_POOL",
    "LEASE_DIR",
    "LEASE_WAIT_S",
    "SWEEP_WAIT_S",
    "lease_uid",
    "processes_of",
    "sweep_uid",
]

DEFAULT_UID_POOL = 64
"""How many uids fallback as root leases from (`PSE_SANDBOX_UIDS`)."""
LEASE_DIR = Path("/run/pse-sandbox-uids")
"""Where leases are held (created root-only); `/tmp` is not used: a command could plant a folder there."""
LEASE_WAIT_S = 60.0
"""Longest wait for a free uid when every uid of the pool is leased."""
SWEEP_WAIT_S = 5.0
"""Longest time to kill every process of a uid; one that survives is an infrastructure error."""


def _lease_dir() -> Path:
    """The root-only lease folder, refused if anyone else could have made or changed it."""
    for folder in (LEASE_DIR, Path("/var/lock/pse-sandbox-uids"), Path("/root/.cache/pse-sandbox-uids")):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = os.lstat(folder)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o077:
            return folder
    raise ToolInfrastructureError(
        f"no root-only folder for sandbox uid leases ({LEASE_DIR} could not be made or is not root's "
        "with mode 0700): remove it, or install bubblewrap (apt-get install bubblewrap)"
    )


def processes_of(uid: int) -> list[int]:
    """Pids of the live processes (zombies aside) whose /proc entry belongs to `uid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def sweep_uid(uid: int, wait_s: float = SWEEP_WAIT_S) -> None:
    """Kill every process of `uid` and wait until none is left.

    Raises:
        ToolInfrastructureError: processes of the uid still ran after `wait_s`.
    """
    if uid == 0:
        raise ToolInfrastructureError("refusing to sweep the processes of uid 0")
    deadline = time.monotonic() + wait_s
    delay = 0.001
    while True:
        alive = processes_of(uid)
        if not alive:
            return
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            raise ToolInfrastructureError(
                f"{len(alive)} process(es) of sandbox uid {uid} survived SIGKILL for {wait_s:g} s "
                f"(pids {', '.join(map(str, alive[:5]))}); no command runs as that uid until they are gone"
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


@contextlib.contextmanager
def lease_uid(first: int, count: int, wait_s: float = LEASE_WAIT_S) -> Iterator[int]:
    """Hold a uid of `first .. first + count - 1` that no other command holds, with no process left of
    it before and after (see the module's docstring).

    Raises:
        ToolInfrastructureError: no uid came free within `wait_s`, or a uid's processes would not die.
    """
    folder = _lease_dir()
    deadline = time.monotonic() + wait_s
    while True:
        for uid in range(first, first + max(count, 1)):
            fd = os.open(
                folder / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                sweep_uid(uid)
                try:
                    yield uid
                finally:
                    sweep_uid(uid)
            finally:
                os.close(fd)  # releases the lock
            return
        if time.monotonic() >= deadline:
            raise ToolInfrastructureError(
                f"all {count} sandbox uids from {first} (PSE_SANDBOX_UID, PSE_SANDBOX_UIDS) stayed in use "
                f"for {wait_s:g} s; raise PSE_SANDBOX_UIDS or run fewer commands at once"
            )
        time.sleep(0.05)
