"""The run's change, as git objects: the tree of what roles wrote, a commit on PASSED, `change.patch`.

Nothing in the workspace decides what is committed or how: the change is the base commit's tree with
every path a role wrote (PSE's audit records, not a scan of the workspace) set to its current content,
read from the workspace without following a symlink, hashed with `--no-filters` (no attribute, filter or
ignore file of the workspace applies). A path a role wrote that is now a symlink, a folder or a device
is left out and named; a path with a `.git` component is never committed. `commit-tree` runs no hook
and signs nothing; the branch moves only from the base commit (`update-ref` with the old value).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pse._run_files import open_beneath
from pse.events import RepositoryRecord
from pse.repo._git import git

__all__ = [
    "DEFAULT_AUTHOR",
    "PATCH_FILE",
    "Change",
    "change_of",
    "commit_change",
    "commit_message",
    "diff_of",
]

PATCH_FILE = "change.patch"
DEFAULT_AUTHOR = ("PSE", "pse@localhost")
_MAX_FILE_BYTES = 64 * 1024 * 1024
_NEVER_DIRS = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"})


@dataclass(frozen=True, slots=True)
class Change:
    """The tree of a run's change, the paths it changed, and the role-written paths it left out (why)."""

    tree: str
    base_tree: str
    changed: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]

    @property
    def empty(self) -> bool:
        return self.tree == self.base_tree


class _Scratch:
    """An empty folder of PSE's to run git in (its work tree has nothing a role wrote)."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="pse-git-")
        self.path = Path(self._dir.name)

    def __enter__(self) -> _Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._dir.cleanup()


def _args(record: RepositoryRecord, scratch: Path) -> list[str]:
    return [
        "--git-dir", record.worktree, "--work-tree", str(scratch / "empty"),
        "-c", "core.attributesFile=/dev/null", "-c", "commit.gpgSign=false",
    ]  # fmt: skip


def _refused(path: str) -> str | None:
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or ".." in parts or "\\" in path:
        return "not a plain relative path"
    if any(p.lower() == ".git" for p in parts):
        return "git keeps .git paths for itself"
    if any(p in _NEVER_DIRS for p in parts) or path.endswith((".pyc", ".pyo")):
        return "a cache file"
    return None


def _read(workspace: Path, path: str) -> tuple[bytes, bool] | str | None:
    """(content, executable) of a regular file; None when absent; why, when it is something else."""
    parts = PurePosixPath(path).parts
    try:
        fd = open_beneath(workspace, list(parts))
    except FileNotFoundError:
        return (
            "not a regular file (a symlink, a folder or a device)"
            if os.path.lexists(workspace / path)
            else None
        )
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        data = handle.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        return f"over {_MAX_FILE_BYTES // (1024 * 1024)} MiB"
    return data, bool(mode & stat.S_IXUSR)


def change_of(record: RepositoryRecord, workspace: Path, written: Iterable[str]) -> Change:
    """The tree of the run's change: the base commit's, with each path roles wrote as it is now."""
    with _Scratch() as scratch:
        base = _args(record, scratch.path)
        env = {"GIT_INDEX_FILE": str(scratch.path / "index")}
        git([*base, "read-tree", record.base_commit], cwd=scratch.path, env=env)
        entries: list[str] = []
        skipped: list[tuple[str, str]] = []
        for path in sorted(set(written)):
            why = _refused(path)
            found = _read(workspace, path) if why is None else why
            if isinstance(found, str):
                skipped.append((path, found))
            elif found is None:  # gone: a deletion (nothing, if the base never had it)
                entries.append(f"0 {'0' * 40}\t{path}")
            else:
                data, executable = found
                sha = git(
                    [*base, "hash-object", "-w", "--no-filters", "--stdin"], cwd=scratch.path, stdin=data
                )
                entries.append(f"{'100755' if executable else '100644'} {sha.decode().strip()}\t{path}")
        if entries:
            feed = "".join(f"{e}\0" for e in entries).encode()
            git([*base, "update-index", "-z", "--index-info"], cwd=scratch.path, env=env, stdin=feed)
        tree = git([*base, "write-tree"], cwd=scratch.path, env=env).decode().strip()
        base_tree = git([*base, "rev-parse", f"{record.base_commit}^{{tree}}"], cwd=scratch.path)
        listing = ["diff-tree", "-r", "-z", "--name-only", "--no-renames", base_tree.decode().strip(), tree]
        names = git([*base, *listing], cwd=scratch.path)
    changed = tuple(n for n in names.decode("utf-8", "replace").split("\0") if n)
    return Change(tree, base_tree.decode().strip(), changed, tuple(skipped))


def commit_message(goal: str, run_id: str, criteria: Iterable[str]) -> str:
    """The plan's goal, then the trailers `PSE-Run`, `PSE-Outcome` and `PSE-Criteria`."""
    head = goal.strip() or f"PSE run {run_id}"
    trailers = [f"PSE-Run: {run_id}", "PSE-Outcome: PASSED", f"PSE-Criteria: {','.join(criteria)}"]
    return f"{head}\n\n" + "\n".join(trailers) + "\n"


def commit_change(record: RepositoryRecord, change: Change, message: str, author: tuple[str, str]) -> str:
    """Commit the change on the run's branch (from the base commit only); return the commit id."""
    name, email = author
    who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
           "GIT_COMMITTER_EMAIL": email}  # fmt: skip
    with _Scratch() as scratch:
        base = _args(record, scratch.path)
        commit = git(
            [*base, "commit-tree", "--no-gpg-sign", change.tree, "-p", record.base_commit, "-F", "-"],
            cwd=scratch.path, env=who, stdin=message.encode(),
        ).decode().strip()  # fmt: skip
        ref = f"refs/heads/{record.branch}"
        git(
            [*base, "update-ref", "-m", "PSE: the run passed", ref, commit, record.base_commit],
            cwd=scratch.path,
        )
        git([*base, "read-tree", commit], cwd=scratch.path)  # the worktree's index follows its branch
    return commit


def diff_of(record: RepositoryRecord, change: Change, commit: str | None) -> bytes:
    """`git format-patch` of the commit, or (no commit) the diff from the base to the change's tree."""
    with _Scratch() as scratch:
        base = _args(record, scratch.path)
        plain = ["--no-ext-diff", "--no-textconv", "--binary", "--no-color"]
        if commit is not None:
            return git([*base, "format-patch", "-1", "--stdout", *plain, commit], cwd=scratch.path)
        return git([*base, "diff", *plain, record.base_commit, change.tree], cwd=scratch.path)


def base_contents(record: RepositoryRecord, paths: Iterable[str], max_bytes: int) -> dict[str, bytes]:
    """The bytes of `paths` at the base commit (one `git cat-file --batch`), up to `max_bytes` in all;
    a path beyond the budget, missing, or not a plain file is left out."""
    wanted = [p for p in paths if "\n" not in p and _refused(p) is None]
    if not wanted:
        return {}
    with _Scratch() as scratch:
        feed = "".join(f"{record.base_commit}:{p}\n" for p in wanted).encode()
        raw = git([*_args(record, scratch.path), "cat-file", "--batch"], cwd=scratch.path, stdin=feed)
    found: dict[str, bytes] = {}
    pos, budget = 0, max_bytes
    for path in wanted:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].split()
        pos = end + 1
        if len(header) != 3:  # "<name> missing"
            continue
        size = int(header[2])
        if header[1] == b"blob" and size <= budget:
            found[path] = raw[pos : pos + size]
            budget -= size
        pos += size + 1
    return found
