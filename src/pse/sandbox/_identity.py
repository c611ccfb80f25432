"""Who a tool command runs as. Never root: as root, PSE runs commands as an unprivileged uid.

A process whose real uid is 0 may write host kernel settings (`/proc/sys`) without any capability,
read other root processes' environments (`/proc/<pid>/environ`) and own every root file, in or out
of a mount namespace. So when PSE itself runs as root (containers, these machines), every command
runs as `PSE_SANDBOX_UID` (default 65534, "nobody"): under bwrap through a user namespace that maps
that uid to itself, in fallback by a plain uid switch. As a normal user, commands run as that user.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pse.exceptions import ConfigError, FallbackUnusable
from pse.sandbox._reach import Reach, reach_for

__all__ = ["DEFAULT_SANDBOX_UID", "Identity", "check_fallback_identity", "closed_ancestor"]

DEFAULT_SANDBOX_UID = 65534
"""`nobody` on Debian and most distributions: owns nothing, belongs to no group."""


@dataclass(frozen=True, slots=True)
class Identity:
    """The uid and gid commands run as, and whether PSE must switch to them (it runs as root)."""

    uid: int
    gid: int
    switch: bool
    leased: bool = False
    """A uid leased for one command (fallback as root): every process of it dies with the command."""

    @classmethod
    def for_commands(cls, sandbox_uid: int = DEFAULT_SANDBOX_UID) -> Identity:
        """As root: `sandbox_uid` (its gid the same number). Otherwise the current user."""
        if os.geteuid() == 0:
            return cls(sandbox_uid, sandbox_uid, True)
        return cls(os.geteuid(), os.getegid(), False)

    def chown(self, path: Path) -> None:
        """Give `path` (not following a symlink) to the command's uid, when PSE switches uid."""
        if self.switch:
            os.chown(path, self.uid, self.gid, follow_symlinks=False)


@functools.cache
def _interpreter_runs_as(uid: int, gid: int, executable: str = sys.executable) -> str | None:
    """None when `uid` can start this interpreter (at `executable`) and find PSE's package (its pytest
    plugin runs in every check); else the error it got."""
    found = (
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('pse') is None and 'no pse package')"
    )
    try:
        done = subprocess.run(
            [executable, "-I", "-c", found],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            user=uid,
            group=gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


def closed_ancestor(path: Path, mapped: tuple[int, ...] = ()) -> Path | None:
    """The first directory above `path` that other users cannot enter, if any; one owned by a uid in
    `mapped` does not count (bwrap's set-up enters it as its owner)."""
    for parent in reversed(path.parents):
        try:
            info = os.stat(parent)
        except OSError:
            return parent
        if not info.st_mode & 0o001 and info.st_uid not in mapped:
            return parent
    return None


def check_fallback_identity(identity: Identity) -> Reach | None:
    """In fallback as root, commands run as `identity.uid` on the host: it must be able to run Python.

    When the interpreter lies in a folder other users cannot enter (a clone under /root, or in a
    `mktemp -d` folder), commands run it from a mirror PSE keeps beside that folder (`pse.sandbox._reach`);
    the returned `Reach` turns their paths to it (None: nothing to turn).

    Raises:
        ConfigError: setpriv is missing.
        FallbackUnusable: that uid cannot start the interpreter, from its place or a mirror; the message
            names the closed directory and the fixes.
    """
    if not identity.switch:
        return None
    if shutil.which("setpriv") is None:
        raise ConfigError(
            "PSE runs as root without bubblewrap and setpriv (util-linux) is missing, so tool commands "
            "cannot be made unprivileged: install util-linux, or bubblewrap (apt-get install bubblewrap)"
        )
    problem = _interpreter_runs_as(identity.uid, identity.gid)
    if problem is None:
        return None
    package = Path(__file__).resolve().parents[2]  # the folder that holds `pse` (an editable install's src)
    closed = next(
        (
            c
            for c in map(closed_ancestor, (Path(sys.prefix), package, Path(os.path.realpath(sys.executable))))
            if c is not None
        ),
        None,
    )
    mirrored = ""
    if closed is not None:
        try:
            reach = reach_for(closed)
        except OSError as exc:
            mirrored = f"; nor from a mirror beside it ({exc})"
        else:
            tried = _interpreter_runs_as(identity.uid, identity.gid, reach.text(sys.executable))
            if tried is None:
                return reach
            mirrored = f"; nor from a mirror beside it: {tried}"
    real = Path(os.path.realpath(sys.executable))
    where = f" ({closed} is closed to other users)" if closed is not None else ""
    raise FallbackUnusable(
        f"PSE runs as root without bubblewrap, so tool commands run as uid {identity.uid} (PSE_SANDBOX_UID), "
        f"and that uid cannot start the Python interpreter {real}{where}: {problem}{mirrored}. Fix one of: "
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and use PSE_SANDBOX=auto or bwrap; "
        "run PSE as a normal user; or use a Python installed where other users can read it (e.g. "
        "/usr/bin/python3)."
    )
