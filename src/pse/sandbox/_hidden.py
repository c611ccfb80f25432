"""Paths no command may read (`PSE_SANDBOX_HIDE`): under fallback, only file permissions keep them out."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from pse.exceptions import ToolInfrastructureError
from pse.sandbox._identity import Identity
from pse.sandbox._reach import Reach

__all__ = ["check_hidden", "readable_by"]


def check_hidden(paths: Sequence[Path], identity: Identity, reach: Reach | None = None) -> None:
    """Under fallback, refuse to start while a command could read a path it must never see.

    Fallback has no mount namespace to mask a path in, so only file permissions keep it out: each
    hidden path must be unreadable by the command's uid (as root, PSE_SANDBOX_UID; as a normal user,
    that user, who can always read what PSE itself reads) — at its own place, and at its place in the
    mirror commands run from (`reach`: a file there is the same file, a hard link).

    Raises:
        ToolInfrastructureError: a hidden path the commands could read, with the fixes.
    """
    for path in paths:
        if not path.exists():
            continue
        mirrored = Path(reach.text(str(path))) if reach is not None else path
        if (
            mirrored != path
            and mirrored.exists()
            and identity.switch
            and readable_by(mirrored, identity.uid, identity.gid)
        ):
            raise ToolInfrastructureError(
                f"{path} must be hidden from every tool command, but uid {identity.uid} (the fallback "
                f"sandbox's) can read it at {mirrored}, where PSE mirrors the interpreter's folders for it: "
                "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), which masks it, or take the "
                f"others' permissions away (chmod -R o-rwx {path}, and keep its group other than the "
                "sandbox's)"
            )
        if not identity.switch:
            raise ToolInfrastructureError(
                f"{path} must be hidden from every tool command, and the fallback sandbox cannot hide "
                "anything from commands that run as the same user as PSE: install bubblewrap "
                "(Debian/Ubuntu: apt-get install bubblewrap), or run PSE as root"
            )
        if readable_by(path, identity.uid, identity.gid):
            raise ToolInfrastructureError(
                f"{path} must be hidden from every tool command, but uid {identity.uid} (the fallback "
                f"sandbox's) can read it: install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), "
                f"which masks it, or take the others' permissions away (chmod -R o-rwx {path}, and "
                "keep its group other than the sandbox's)"
            )


def readable_by(path: Path, uid: int, gid: int) -> bool:
    """Could `uid`/`gid` (no supplementary groups) read `path`, by its mode bits and its ancestors'?

    A directory counts as readable when it can be listed or entered; ACLs are not read (a hidden path
    with an ACL granting the sandbox uid is not caught).
    """

    def allows(st: os.stat_result, bits: tuple[int, int, int]) -> bool:
        if st.st_uid == uid:
            return bool(st.st_mode & bits[0])
        if st.st_gid == gid:
            return bool(st.st_mode & bits[1])
        return bool(st.st_mode & bits[2])

    real = Path(os.path.realpath(path))
    for parent in reversed(real.parents):
        if not allows(parent.stat(), (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)):
            return False
    st = real.stat()
    read = (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
    enter = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
    if allows(st, read) or (real.is_dir() and allows(st, enter)):
        return True
    # A file readable by nobody, inside a directory: its neighbours may still be readable.
    return real.is_dir() and any(readable_by(child, uid, gid) for child in real.iterdir())
