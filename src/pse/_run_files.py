"""Reading what untrusted tools wrote into run folders: no symlink followed, no FIFO opened, sizes capped.

A run folder and its workspace are written by model-driven tools; only the runs directory itself is
trusted. So every path below it is walked one component at a time, each directory opened with
`O_NOFOLLOW | O_DIRECTORY` relative to its parent's descriptor, and the last component is `lstat`-ed
first (a FIFO, socket or device file is refused before it is ever opened), opened with
`O_NOFOLLOW | O_NONBLOCK`, and `fstat`-ed to check that what was opened is the regular file that was
inspected. A symlink anywhere below the runs directory — the run folder, `workspace`, an intermediate
directory or the file itself — reads as "no such file".

Used by the dashboard (`pse.web._security` maps the errors to HTTP answers), the run history and
`load_trace`. The runs directory passed in is trusted as given and may itself be a symlink.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "MAX_TRACE_BYTES",
    "RunFileTooLarge",
    "open_beneath",
    "read_beneath",
    "regular_files_beneath",
]

MAX_TRACE_BYTES = 64 * 1024 * 1024
"""Largest `trace.json` any reader loads into memory; a bigger one is refused (RunFileTooLarge)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: should a FIFO be swapped in between the lstat and the open, the open does not wait for a
# writer (and the fstat check refuses it).
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_REFUSED = {errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EMLINK}  # EMLINK: O_NOFOLLOW on FreeBSD


class RunFileTooLarge(OSError):
    """A file in a run folder is bigger than the reader's cap."""


def _not_found(parts: Sequence[str], why: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, f"no {why} {'/'.join(parts)!r} below the runs directory")


def _check_names(parts: Sequence[str]) -> None:
    for name in parts:
        if not name or name in (".", "..") or "/" in name or "\x00" in name:
            raise _not_found(parts, "plain path")


def open_beneath(root: Path, parts: Sequence[str], *, directory: bool = False) -> int:
    """A descriptor of `root/parts[0]/…/parts[-1]`, walked without following any symlink below `root`.

    Args:
        root: the trusted directory (opened as given, so it may itself be a symlink).
        parts: plain names, no `/`, `.`, `..` or NUL.
        directory: open a directory (for listing) instead of a regular file.

    Returns:
        An open descriptor the caller must close: a regular file, or a directory if `directory`.

    Raises:
        FileNotFoundError: a name is malformed, missing, a symlink, or not a directory on the way, or
            the last one is not a regular file (a FIFO, socket or device is never opened).
        OSError: anything else the system refuses (e.g. PermissionError).
    """
    _check_names(parts)
    if not parts and not directory:
        raise _not_found(parts, "file name")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts if directory else parts[:-1]:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _REFUSED:
                    raise _not_found(parts, "directory") from None
                raise
            os.close(fd)
            fd = child
        if directory:
            result, fd = fd, -1
            return result
        return _open_regular(fd, parts)
    finally:
        if fd >= 0:
            os.close(fd)


def _open_regular(dir_fd: int, parts: Sequence[str]) -> int:
    name = parts[-1]
    try:
        seen = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(seen.st_mode):
            raise _not_found(parts, "regular file")
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _REFUSED:
            raise _not_found(parts, "regular file") from None
        raise
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
        os.close(fd)
        raise _not_found(parts, "regular file")  # replaced between the lstat and the open
    return fd


def read_beneath(root: Path, parts: Sequence[str], *, max_bytes: int) -> bytes:
    """The bytes of the regular file `root/parts…` (see `open_beneath`), at most `max_bytes` of them.

    Raises:
        FileNotFoundError: as `open_beneath`.
        RunFileTooLarge: the file holds more than `max_bytes` (checked before reading, and again while
            reading, for a file that grows).
    """
    with os.fdopen(open_beneath(root, parts), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise RunFileTooLarge(errno.EFBIG, f"{'/'.join(parts)} is {size} bytes, over the {max_bytes} cap")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RunFileTooLarge(errno.EFBIG, f"{'/'.join(parts)} grew past the {max_bytes} byte cap")
    return data


def regular_files_beneath(
    root: Path,
    parts: Sequence[str],
    *,
    max_files: int,
    max_depth: int,
    skip_dir: Callable[[str], bool] = lambda name: False,
) -> list[tuple[str, int]]:
    """(relative path, size) of the regular files under the directory `root/parts…`, sorted per folder.

    Symlinks (to files or directories) are neither listed nor followed, FIFOs, sockets and devices are
    skipped without being opened, and directories named by `skip_dir` or deeper than `max_depth` are
    not entered. Each folder's files come before its subfolders. Stops after `max_files`. An absent or
    symlinked top directory lists nothing.
    """
    try:
        top = open_beneath(root, parts, directory=True)
    except FileNotFoundError:
        return []
    found: list[tuple[str, int]] = []
    try:
        _walk(top, "", 0, found, max_files, max_depth, skip_dir)
    finally:
        os.close(top)
    return found


def _walk(
    fd: int,
    prefix: str,
    depth: int,
    found: list[tuple[str, int]],
    max_files: int,
    max_depth: int,
    skip_dir: Callable[[str], bool],
) -> None:
    with os.scandir(fd) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed since the scan
        if stat.S_ISREG(info.st_mode):
            found.append((prefix + entry.name, info.st_size))
            if len(found) >= max_files:
                return
    if depth >= max_depth:
        return
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False) or skip_dir(entry.name):
            continue
        try:
            child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            continue  # replaced by a symlink, removed, or unreadable since the scan
        try:
            _walk(child, f"{prefix}{entry.name}/", depth + 1, found, max_files, max_depth, skip_dir)
        finally:
            os.close(child)
        if len(found) >= max_files:
            return
