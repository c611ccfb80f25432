"""A run's workspace as a git worktree of the user's repository, and its removal with the run folder.

`open_worktree` checks the inputs (one-line errors that name the fix), then `git worktree add --lock`
makes the run's workspace on a new branch `pse/<run_id>` at the base commit. The user's working tree,
index, current branch and stash are never read for writing: PSE only adds a worktree entry and a branch
to the repository's `.git`.

The worktree's `.git` file (a pointer to its administrative folder) is taken out of the workspace: no
role's command can then find the repository from the workspace, and PSE runs git with `--git-dir` and
never trusts a `.git` a role might write there. The worktree is locked (`git worktree lock`), so git's
own pruning does not drop it while its `.git` file is away. `remove_worktree` puts the pointer back and
removes the worktree with git; the branch stays when it holds the run's commit (it is the product), and
goes when it still points at the base commit.

What a run leaves in the repository, by how it ends (`release_worktree`, called as the run ends for good):

* it can still go on (ESCALATED, waiting for a person, cancelled, interrupted): its locked worktree and
  its branch, for `pse answer` / `pse approve` / `pse resume` to go on in; `pse clean RUN_ID` removes them;
* it ended for good (PASSED, ERROR, TIMEOUT, accepted or closed by a person): no worktree, and the branch
  only when it holds the run's commit (the product: merge it, then `git branch -D` it). The workspace's
  files stay in the run folder, with `change.patch`, until the run is cleaned.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
from pathlib import Path

from pse._run_files import read_beneath
from pse.events import RepositoryRecord
from pse.exceptions import UserError
from pse.repo._git import GitFailed, git

__all__ = [
    "RECORD_FILE",
    "branch_for",
    "held_worktrees",
    "open_worktree",
    "read_record",
    "release_worktree",
    "remove_worktree",
    "repository_folder",
    "write_record",
]

RECORD_FILE = "repo.json"
"""The run folder's record of its worktree (written by PSE; read to remove the worktree with the run)."""
_RECORD_MAX_BYTES = 64 * 1024


def branch_for(run_id: str) -> str:
    """The run's branch: `pse/<run_id>`."""
    return f"pse/{run_id}"


def _fix_repo(repo: str) -> UserError:
    return UserError(
        f"--repo {repo} is not a git repository; fix: pass the folder of a git repository, or make this "
        "one a repository (git init, git add, git commit)"
    )


def _check_repo(repo: Path) -> Path:
    """The repository's folder, absolute, after checking that it is one."""
    shown = str(repo)
    path = repo.expanduser()
    if not path.exists():
        raise UserError(f"--repo {shown}: no such folder; fix: pass the path of a git repository's folder")
    if not path.is_dir():
        raise UserError(f"--repo {shown} is a file, not a folder; fix: pass the folder of a git repository")
    path = path.resolve()
    try:
        inside = git(
            ["-C", str(path), "rev-parse", "--is-inside-work-tree", "--is-bare-repository"], cwd=path
        )
    except GitFailed as exc:
        if "dubious ownership" in exc.stderr:
            raise UserError(
                f"--repo {shown} belongs to another user, and git refuses to work in it; fix: "
                f"git config --global --add safe.directory {path}"
            ) from None
        raise _fix_repo(shown) from None
    if inside.split()[:1] != [b"true"] and inside.split()[1:2] != [b"true"]:
        raise _fix_repo(shown)
    return path


def repository_folder(repo: Path) -> Path:
    """The absolute folder of the git repository `repo` (what `pse serve --repo` allows the dashboard).

    Raises:
        UserError: no such folder, a file, no git repository, or one git refuses for its owner.
    """
    return _check_repo(repo)


def _check_outside(path: Path, shown: str, workspace: Path) -> None:
    """The run's workspace may not lie in the repository's working tree: the person's `git status` would
    list the run's files, and a `git add -A` would take them in."""
    try:
        top = git(["-C", str(path), "rev-parse", "--show-toplevel"], cwd=path).decode().strip()
    except GitFailed:
        return  # a bare repository has no working tree
    if top and workspace.resolve().is_relative_to(Path(top).resolve()):
        raise UserError(
            f"--repo {shown}: the runs folder {workspace.parent.parent} is inside the repository's working "
            "tree, where a run would show up in your git status; fix: pass --runs-dir (PSE_RUNS_DIR) outside "
            "the repository"
        )


def _base_commit(path: Path, shown: str, base: str) -> str:
    """The full commit id `base` names in the repository."""
    if not base.strip() or base.startswith("-") or any(c.isspace() or ord(c) < 32 for c in base):
        raise UserError(f"--base {base!r} is not a ref; fix: pass a branch, tag or commit id (default HEAD)")
    try:
        found = git(["-C", str(path), "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], cwd=path)
    except GitFailed:
        if base == "HEAD":
            raise UserError(
                f"--repo {shown} has no commit yet, so there is nothing to start from; fix: commit once "
                "(git add, git commit), or pass --base REF"
            ) from None
        raise UserError(
            f"--base {base}: no such commit in {shown}; fix: pass a branch, tag or commit that "
            f"`git -C {shown} rev-parse {base}` finds (default HEAD)"
        ) from None
    return found.decode().strip()


def _uncommitted(path: Path, shown: str, base: str, commit: str) -> str | None:
    """A warning when the repository's working tree has uncommitted changes (the run does not see them)."""
    try:
        status = git(["-C", str(path), "status", "--porcelain", "--untracked-files=no"], cwd=path)
    except GitFailed:
        return None  # a bare repository has no working tree to be dirty
    changed = [line for line in status.decode("utf-8", "replace").splitlines() if line.strip()]
    if not changed:
        return None
    return (
        f"{shown} has {len(changed)} uncommitted change(s); the run works on {base} ({commit[:12]}) without "
        "them and leaves them where they are: commit them first to include them"
    )


def open_worktree(repo: Path, base: str | None, run_id: str, workspace: Path) -> RepositoryRecord:
    """Make `workspace` a worktree of `repo` at `base` (default HEAD) on the new branch `pse/<run_id>`.

    Args:
        repo: the user's repository (any folder inside its working tree, or a bare repository).
        base: the ref to start from.
        run_id: names the branch.
        workspace: the run's workspace; must not exist yet, or be an empty folder.

    Raises:
        UserError: no such folder, not a git repository, no such commit, no commit at all, git missing.
    """
    ref = base or "HEAD"
    path = _check_repo(repo)
    _check_outside(path, str(repo), workspace)
    commit = _base_commit(path, str(repo), ref)
    warning = _uncommitted(path, str(repo), ref, commit)
    branch = branch_for(run_id)
    runs = shlex.quote(str(workspace.parent.parent))
    reason = f"PSE run {run_id}, which can go on in it; `pse clean {run_id} --runs-dir {runs}` removes it"
    try:
        git(
            ["-C", str(path), "worktree", "add", "--quiet", "--lock", "--reason", reason, "--no-track",
             "-b", branch, str(workspace), commit],
            cwd=path,
        )  # fmt: skip
    except GitFailed as exc:
        raise UserError(
            f"--repo {repo}: git could not add the run's worktree ({exc.stderr}); fix: {_hint(exc)}"
        ) from None
    pointer = workspace / ".git"
    text = pointer.read_text(encoding="utf-8").strip()
    admin = text.removeprefix("gitdir:").strip()
    if not text.startswith("gitdir:") or not Path(admin).is_dir():
        raise UserError(f"--repo {repo}: git wrote an unexpected worktree pointer {text!r}; fix: upgrade git")
    pointer.unlink()  # the workspace holds no way back into the repository
    return RepositoryRecord(
        path=str(path), base=ref, base_commit=commit, branch=branch, worktree=admin, warning=warning
    )


def _hint(exc: GitFailed) -> str:
    if "already exists" in exc.stderr:
        return "a branch or folder of that name exists already; delete it or run again (a new run id)"
    return "check that the repository is writable (PSE adds a worktree entry and a branch to its .git)"


def write_record(run_dir: Path, record: RepositoryRecord) -> None:
    """Keep the worktree's record in the run folder (read by `remove_worktree` and by a resume)."""
    (run_dir / RECORD_FILE).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")


def read_record(run_dir: Path) -> RepositoryRecord | None:
    """The run's worktree record, if it is a repository run (never through a symlink)."""
    try:
        data = read_beneath(run_dir, [RECORD_FILE], max_bytes=_RECORD_MAX_BYTES)
    except FileNotFoundError:
        return None
    return RepositoryRecord.model_validate(json.loads(data))


def held_worktrees(runs_dir: Path) -> list[tuple[str, RepositoryRecord]]:
    """The runs of `runs_dir` that still hold a worktree (and a branch) in a repository, by run id."""
    held = []
    try:
        folders = sorted(p for p in runs_dir.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    for run_dir in folders:
        try:
            record = read_record(run_dir)
        except (OSError, ValueError):
            continue
        if record is not None and not record.released:
            held.append((run_dir.name, record))
    return held


def release_worktree(run_dir: Path, record: RepositoryRecord) -> RepositoryRecord:
    """Take a run that ended for good out of its repository, keeping the workspace's files in the run folder.

    The worktree's entry goes from the repository's `.git` (what `git worktree prune` would do for this
    entry alone: its administrative folder, after checking that it points at this workspace), so the
    person's `git worktree list` no longer shows it and its branch can be checked out; the branch goes
    too while it still points at the base commit. Returns the record marked `released`, also written to
    the run folder. A git failure leaves the record as it was (the run's outcome never depends on it).
    """
    if record.released:
        return record
    repo, admin, workspace = Path(record.path), Path(record.worktree), run_dir / "workspace"
    try:
        _forget(admin, workspace)
        if admin.exists():
            return record
        with contextlib.suppress(GitFailed):  # it moved: it holds the run's commit, and stays
            git(
                ["-C", str(repo), "update-ref", "-d", f"refs/heads/{record.branch}", record.base_commit],
                cwd=repo,
            )
    except (GitFailed, OSError):
        return record
    released = record.model_copy(update={"released": True})
    write_record(run_dir, released)
    return released


def remove_worktree(run_dir: Path) -> bool:
    """Remove the worktree of a repository run (before its folder goes); True if there was one.

    The worktree removed is always the one at `run_dir/workspace`, whatever the record says; the branch
    is deleted only while it still points at the base commit (a run that committed keeps its branch).
    """
    try:
        record = read_record(run_dir)
    except (OSError, ValueError):
        return False
    if record is None:
        return False
    if record.released:  # out of the repository already; a branch left holds the run's commit
        return True
    repo, workspace = Path(record.path), run_dir / "workspace"
    if os.path.lexists(workspace) and workspace.is_dir() and not workspace.is_symlink():
        pointer = workspace / ".git"
        if pointer.is_dir() and not pointer.is_symlink():
            shutil.rmtree(pointer)
        elif os.path.lexists(pointer):
            pointer.unlink()
        pointer.write_text(f"gitdir: {record.worktree}\n", encoding="utf-8")
    try:
        git(["-C", str(repo), "worktree", "remove", "--force", "--force", str(workspace)], cwd=repo)
    except (GitFailed, OSError):
        _forget(Path(record.worktree), workspace)  # the folder is gone already
    with contextlib.suppress(GitFailed, OSError):  # a branch that holds the run's commit stays
        git(
            ["-C", str(repo), "update-ref", "-d", f"refs/heads/{record.branch}", record.base_commit], cwd=repo
        )
    return True


def _forget(admin: Path, workspace: Path) -> None:
    """Drop the administrative folder of this worktree only (what `git worktree prune` would do for it),
    after checking that it is a worktree entry that points at this workspace."""
    try:
        points_at = (admin / "gitdir").read_text(encoding="utf-8").strip()
    except OSError:
        return
    ours = Path(points_at).resolve() == (workspace / ".git").resolve()
    if admin.parent.name == "worktrees" and ours and not admin.is_symlink():
        shutil.rmtree(admin, ignore_errors=True)
