"""Sealed snapshots: a fresh read-only folder holding exactly the files a check may see, each one hashed.

A check never runs over the live workspace. PSE copies the files its manifest admits (read from the
workspace without following any symlink; a FIFO, socket or device is never opened) into a new folder of
its own, hashes what it wrote, and makes every entry read-only. The folder belongs to PSE, not to the
command's uid: as root, a command (run as an unprivileged uid) can read it and change nothing; under
bwrap it is also mounted read-only. Whatever else a role wrote is simply not there.

An area is a folder the command sees: `workspace` (mounted where the workspace is) and any other named
one (the Evaluator's `evaluation` area, seen as `{evaluation}`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pse._run_files import RunFileTooLarge, read_beneath

__all__ = ["MAX_SNAPSHOT_BYTES", "Snapshot", "SnapshotTooLarge", "build_snapshot", "unseal"]

MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024
"""Most bytes one snapshot may hold; evidence beyond that is the role's problem, reported to it."""


class SnapshotTooLarge(ValueError):
    """The admitted files together exceed `MAX_SNAPSHOT_BYTES` (a role's problem, not the machinery's)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A built snapshot: where each area's folder is, and the sha256 of every file, by area then path.

    `missing` lists admitted paths that could not be copied (gone, a symlink, not a regular file).
    """

    roots: Mapping[str, Path]
    hashes: Mapping[str, Mapping[str, str]]
    missing: tuple[str, ...] = field(default_factory=tuple)


def _too_large(relative: str) -> SnapshotTooLarge:
    return SnapshotTooLarge(
        f"the evidence files exceed {MAX_SNAPSHOT_BYTES // (1024 * 1024)} MiB together (at {relative}); "
        "a check copies every one of them"
    )


def _read(root: Path, relative: str, budget: int) -> bytes | None:
    pure = PurePosixPath(relative)
    if pure.is_absolute() or not pure.parts or ".." in pure.parts:
        return None
    try:
        return read_beneath(root, pure.parts, max_bytes=budget)
    except RunFileTooLarge as exc:
        raise _too_large(relative) from exc
    except OSError:  # gone, a symlink on the way, not a regular file
        return None


def build_snapshot(target: Path, areas: Mapping[str, tuple[Path, Mapping[str, str]]]) -> Snapshot:
    """Copy each area's admitted files into `target/<area>` and make the whole tree read-only.

    Args:
        target: a new, empty folder of PSE's (in the command's scratch space).
        areas: area name → (its live folder, admitted path → anything): the files to copy.

    Raises:
        SnapshotTooLarge: the files exceed `MAX_SNAPSHOT_BYTES`.
        OSError: the snapshot folder could not be written (the machinery's failure).
    """
    budget = MAX_SNAPSHOT_BYTES
    roots: dict[str, Path] = {}
    hashes: dict[str, dict[str, str]] = {}
    missing: list[str] = []
    for area, (live, files) in areas.items():
        root = target / area
        root.mkdir(mode=0o755, parents=True)
        roots[area], hashes[area] = root, {}
        for relative in sorted(files):
            data = _read(live, relative, budget)
            if data is None:
                missing.append(relative if area == "workspace" else f"{area}:{relative}")
                continue
            budget -= len(data)
            dest = root.joinpath(*PurePosixPath(relative).parts)
            dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            with open(dest, "xb") as handle:
                handle.write(data)
            hashes[area][relative] = hashlib.sha256(data).hexdigest()
    _seal(target)
    return Snapshot(roots, hashes, tuple(missing))


def _seal(target: Path) -> None:
    """Every file 0444 and every folder 0555, deepest first: nothing in it can be changed but by PSE."""
    for folder, dirs, files in os.walk(target, topdown=False):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444, follow_symlinks=False)
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o555, follow_symlinks=False)
    os.chmod(target, 0o555)


def unseal(target: Path) -> None:
    """Make a sealed snapshot removable again (its folders writable by PSE)."""
    for folder, dirs, _ in os.walk(target):
        os.chmod(folder, 0o755)
        for name in dirs:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)
