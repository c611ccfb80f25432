"""Workspace-confined path resolution: the one place a role's path string becomes a real path."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from pse.exceptions import SandboxViolation

__all__ = ["read_inside", "resolve_in_workspace"]


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve a role-supplied relative path to a real path inside `workspace`.

    The string is checked first (no absolute path, no `..` component, no NUL), then the *real* path
    (every symlink followed, including a dangling last component) must lie inside the workspace's real
    path. So a symlinked file or directory pointing outside, and `..` reached through a symlinked
    directory, are all refused.

    Args:
        workspace: the run workspace (must exist).
        path: what the role wrote; surrounding whitespace is ignored.

    Returns:
        The resolved real path (it may not exist yet).

    Raises:
        SandboxViolation: the path is absolute, holds `..`, or resolves outside the workspace.
    """
    text = path.strip()
    if not text:
        raise SandboxViolation("empty path; give a path relative to the workspace, e.g. 'src/app.py'")
    if "\x00" in text:
        raise SandboxViolation(f"path {path!r} contains a NUL character")
    pure = PurePosixPath(text)
    if pure.is_absolute() or text.startswith("~"):
        raise SandboxViolation(f"absolute path {text!r} is not allowed; use a path relative to the workspace")
    if ".." in pure.parts:
        raise SandboxViolation(f"path {text!r} contains '..'; use a path inside the workspace")
    root = Path(os.path.realpath(workspace))
    real = Path(os.path.realpath(root / pure))
    if real != root and not real.is_relative_to(root):
        raise SandboxViolation(
            f"path {text!r} leads outside the workspace (through a symlink); it is refused"
        )
    return real


def read_inside(root: Path, relative: str, limit: int) -> bytes | None:
    """Read at most `limit` bytes of a regular file inside `root` without following any symlink.

    Host-side code (config sniffing, report extraction, gates) reads workspace files with this: a
    symlink in any component, a FIFO, a device or a directory gives None, never a read outside the
    workspace or a read that blocks.
    """
    parts = PurePosixPath(relative).parts
    if (
        not parts
        or any(p in ("..", "/") or "\x00" in p for p in parts)
        or PurePosixPath(relative).is_absolute()
    ):
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(root, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        file_fd = os.open(parts[-1], flags, dir_fd=fd)
    except OSError:
        os.close(fd)
        return None
    os.close(fd)
    with os.fdopen(file_fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit)
