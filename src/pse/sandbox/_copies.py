"""Private copies of a workspace: a command writes its copy, and PSE takes back only what it accepts.

No command ever writes the real workspace. A read-write command gets a copy, owned by the uid it runs
as; when it ends, PSE compares the copy with the workspace and applies each change itself (files,
symlinks as links, deletions), asking `accept(path)` first: a change it refuses (a check-configuration
file, say) is dropped and reported. So a change is attributable and can be vetoed, and the real
workspace stays owned by PSE. A change is detected by size, mtime or ctime (ctime cannot be set back by
a command), so restoring a file's mtime does not hide an edit: it only makes PSE ignore a change it
would otherwise have kept, never keep one it did not see.

FIFOs, sockets and device files are never opened or copied; they are skipped in both directions.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pse.exceptions import SandboxViolation, ToolInfrastructureError
from pse.sandbox._identity import Identity
from pse.sandbox._paths import resolve_in_workspace

__all__ = [
    "MAX_SYNC_BYTES",
    "MAX_SYNC_CHANGES",
    "Accept",
    "Copy",
    "Synced",
    "copy_workspace",
    "refresh_copy",
    "sync_back",
]

MAX_SYNC_CHANGES = 10_000
"""Most changed paths one command may bring back; the rest are refused and reported."""
MAX_SYNC_BYTES = 512 * 1024 * 1024
"""Most bytes of changed files one command may bring back."""

Accept = Callable[[str], str | None]
"""Called with a changed workspace-relative path; returns None to keep it, or why it is refused."""

_Stamp = tuple[int, int, int, int]  # (kind, size, mtime_ns, ctime_ns); kind: 1 file, 2 dir, 3 link


@dataclass(slots=True)
class Copy:
    """A workspace copy and the stamp of every entry right after it was made."""

    root: Path
    stamps: dict[str, _Stamp] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Synced:
    """What came back from a copy: paths kept (in order) and paths refused with the reason."""

    kept: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()


def _stamp(st: os.stat_result) -> _Stamp | None:
    if stat.S_ISREG(st.st_mode):
        return (1, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if stat.S_ISDIR(st.st_mode):
        return (2, 0, 0, 0)
    if stat.S_ISLNK(st.st_mode):
        return (3, 0, 0, 0)
    return None  # FIFO, socket, device: never touched


def _walk(root: Path) -> dict[str, os.stat_result]:
    """Every entry under root (not root itself), by relative POSIX path, symlinks never followed."""
    found: dict[str, os.stat_result] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        for name in [*dirs, *files]:
            path = here / name
            try:
                found[path.relative_to(root).as_posix()] = path.lstat()
            except OSError:
                continue
    return found


def copy_workspace(workspace: Path, target: Path, identity: Identity) -> Copy:
    """Copy `workspace` into `target` (created), giving every entry to the command's uid.

    Raises:
        ToolInfrastructureError: the copy could not be made.
    """
    try:
        target.mkdir(mode=0o755)
        identity.chown(target)
    except OSError as exc:
        raise ToolInfrastructureError(f"could not copy the workspace for a command: {exc}") from exc
    return _fill(workspace, Copy(target), identity)


def refresh_copy(workspace: Path, target: Path, identity: Identity) -> Copy:
    """Make the existing copy `target` equal to `workspace` again, in place: a long-lived process (an MCP
    server) keeps its view of the workspace mounted at that directory, so it cannot be replaced.

    Raises:
        ToolInfrastructureError: the copy could not be made.
    """
    try:
        for entry in os.scandir(target):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    except OSError as exc:
        raise ToolInfrastructureError(f"could not refresh a workspace copy: {exc}") from exc
    return _fill(workspace, Copy(target), identity)


def _fill(workspace: Path, copy: Copy, identity: Identity) -> Copy:
    target = copy.root
    try:
        for rel, st in sorted(_walk(workspace).items()):
            source, dest = workspace / rel, target / rel
            if stat.S_ISDIR(st.st_mode):
                dest.mkdir(mode=0o755)
            elif stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(source), dest)
            elif stat.S_ISREG(st.st_mode):
                shutil.copy2(source, dest, follow_symlinks=False)
            else:
                copy.skipped.append(rel)
                continue
            identity.chown(dest)
        for rel, st in _walk(target).items():
            stamp = _stamp(st)
            if stamp is not None:
                copy.stamps[rel] = stamp
    except OSError as exc:
        raise ToolInfrastructureError(f"could not copy the workspace for a command: {exc}") from exc
    return copy


def _mode(st: os.stat_result) -> int:
    """Files come back readable by everyone, executable if they were: no command sets odd modes here."""
    return 0o755 if st.st_mode & 0o100 else 0o644


def sync_back(copy: Copy, workspace: Path, accept: Accept | None = None) -> Synced:
    """Apply the changes the command made in `copy` to `workspace`, each one only if `accept` keeps it."""
    after = _walk(copy.root)
    changed: list[str] = []
    for rel, entry in sorted(after.items()):
        stamp = _stamp(entry)
        if stamp is None:
            continue
        if stamp[0] == 3:
            old = workspace / rel
            if (
                copy.stamps.get(rel) != stamp
                or not old.is_symlink()
                or os.readlink(old) != os.readlink(copy.root / rel)
            ):
                changed.append(rel)
        elif copy.stamps.get(rel) != stamp:
            changed.append(rel)
    gone = [rel for rel in copy.stamps if rel not in after]
    kept: list[str] = []
    refused: list[tuple[str, str]] = []
    budget = MAX_SYNC_BYTES
    for rel in [*changed, *sorted(gone, reverse=True)]:
        st: os.stat_result | None = after.get(rel)
        if st is not None and stat.S_ISDIR(st.st_mode) and rel in copy.stamps:
            continue  # a directory that existed before: its entries speak for themselves
        reason = accept(rel) if accept is not None else None
        if reason is None and len(kept) >= MAX_SYNC_CHANGES:
            reason = f"more than {MAX_SYNC_CHANGES} changed paths in one command"
        if reason is None and st is not None and stat.S_ISREG(st.st_mode):
            if st.st_size > budget:
                reason = f"the command's changes exceed {MAX_SYNC_BYTES // (1024 * 1024)} MiB"
            else:
                budget -= st.st_size
        if reason is not None:
            refused.append((rel, reason))
            continue
        try:
            _apply(copy.root, workspace, rel, st)
        except (OSError, SandboxViolation) as exc:
            refused.append((rel, f"could not be applied: {exc}"))
            continue
        kept.append(rel)
    return Synced(tuple(kept), tuple(refused))


def _apply(copy_root: Path, workspace: Path, rel: str, st: os.stat_result | None) -> None:
    parent = resolve_in_workspace(workspace, str(Path(rel).parent) or ".")
    target = parent / Path(rel).name
    if st is None:  # deleted in the copy
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        return
    if target.is_dir() and not target.is_symlink() and not stat.S_ISDIR(st.st_mode):
        shutil.rmtree(target)
    if stat.S_ISDIR(st.st_mode):
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        target.mkdir(mode=0o755, exist_ok=True)
        return
    temp = parent / f".pse-sync-{os.getpid()}-{Path(rel).name}"
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(copy_root / rel), temp)
    else:
        fd = os.open(copy_root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as source, open(temp, "xb") as dest:
            shutil.copyfileobj(source, dest)
        os.chmod(temp, _mode(st))
        os.utime(temp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(temp, target)
