"""Workspace-confined path resolution: the one place a role's path string becomes a real path."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from pse._run_files import read_beneath
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
    """The bytes of a regular file inside `root` (at most `limit` of them), reached through no symlink.

    Host-side code (config sniffing, report extraction) reads workspace files with this: a symlink in
    any component, a FIFO, a device, a directory or a file over `limit` gives None, never a read
    outside the workspace or a read that blocks. (`pse._run_files` does the walking.)
    """
    pure = PurePosixPath(relative.strip())
    if pure.is_absolute() or not pure.parts:
        return None
    try:
        return read_beneath(root, pure.parts, max_bytes=limit)
    except OSError:  # FileNotFoundError, RunFileTooLarge, PermissionError
        return None
