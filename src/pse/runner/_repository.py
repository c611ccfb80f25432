"""Wiring a repository run (`--repo PATH [--base REF]`): its worktree, its protected files, its change.

At the start, `open_repository` makes the run's workspace a worktree of the repository on `pse/<run_id>`
(`pse.repo`), lists the repository's files at the base ref for the evidence rules (`RepositoryFiles`:
inputs no role wrote; the protected ones read-only to every role) and writes the record into the run
folder. At the end, `finish_repository` turns what roles wrote and the checks saw (`pse.runner._delivery`)
into the run's change: one commit on the
branch when the run PASSED (the plan's goal, then `PSE-Run`, `PSE-Outcome`, `PSE-Criteria` trailers) and
its `git format-patch` as `change.patch`; on any other outcome nothing is committed and `change.patch`
holds the diff so far, for a person to read. A run that ended for good (it cannot go on: not ESCALATED,
not cancelled) is then taken out of the repository (`pse.repo.release_worktree`): no worktree is left,
and no branch unless it holds the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pse.events import RepositoryRecord
from pse.exceptions import UserError
from pse.repo import (
    DEFAULT_AUTHOR,
    PATCH_FILE,
    GitFailed,
    base_contents,
    change_of,
    commit_change,
    commit_message,
    diff_of,
    git,
    open_worktree,
    read_record,
    release_worktree,
    write_record,
)
from pse.runner._delivery import left_out_paths
from pse.tasks import Task
from pse.tools import PROTECTED_BY_DEFAULT, RepositoryFiles, is_test_file, protecting_glob
from pse.trace import Trace

__all__ = [
    "RunRepository",
    "ended_for_good",
    "finish_repository",
    "load_repository",
    "open_repository",
    "repository_brief",
]

_TESTS_AT_BASE_BYTES = 4 * 1024 * 1024
"""Most bytes of the repository's tests kept to show how a role changed them (a task that opened them)."""


@dataclass
class RunRepository:
    """A repository run's worktree record, its files at the base ref, the commit's author, and the git
    tree of the base commit (what a cassette recorded on the repository notes)."""

    record: RepositoryRecord
    files: RepositoryFiles
    author: tuple[str, str]
    tree: str
    written: Callable[[], Mapping[str, str]] = lambda: {}
    """path → author of every workspace file a role wrote (the executor's provenance, set when wired)."""


def _author(task: Task) -> tuple[str, str]:
    spec = task.config.repository.author
    if spec is None:
        return DEFAULT_AUTHOR
    name, _, email = spec.strip().rpartition(" <")
    return name.strip(), email.rstrip(">")


def _tree(record: RepositoryRecord) -> str:
    """The git tree id of the base commit: the repository's content, whatever its history or clone."""
    found = git(
        ["--git-dir", record.worktree, "rev-parse", f"{record.base_commit}^{{tree}}"], cwd=Path(record.path)
    )
    return found.decode().strip()


def _files(task: Task, record: RepositoryRecord) -> RepositoryFiles:
    """The repository's files at the base commit, and those the task's globs protect."""
    listing = git(
        ["--git-dir", record.worktree, "ls-tree", "-r", "-z", "--name-only", record.base_commit],
        cwd=Path(record.path),
    )
    tracked = [p for p in listing.decode("utf-8", "replace").split("\0") if p]
    globs = task.config.repository.protected
    if globs is None:  # every test is protected: none can change, so none needs its base to compare with
        return RepositoryFiles.of(tracked, PROTECTED_BY_DEFAULT)
    kinds = ("tests/*", "test/*", "*/tests/*", "*/test/*", "conftest.py")  # tests, their data, fixtures
    tests = [p for p in tracked if is_test_file(p) or protecting_glob(p, kinds)]
    return RepositoryFiles.of(tracked, globs, base_contents(record, tests, _TESTS_AT_BASE_BYTES))


def open_repository(task: Task, repo: Path, base: str | None, run_id: str, run_dir: Path) -> RunRepository:
    """Make `run_dir/workspace` the run's worktree and keep its record in the run folder.

    Raises:
        UserError: a missing folder, no git repository, a bad ref (one line each, with the fix).
    """
    record = open_worktree(repo, base, run_id, run_dir / "workspace")
    write_record(run_dir, record)  # from here on, removing the run folder removes the worktree
    return RunRepository(record, _files(task, record), _author(task), _tree(record))


def load_repository(task: Task, run_dir: Path) -> RunRepository | None:
    """A resumed run's repository (None: it is no repository run)."""
    try:
        record = read_record(run_dir)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the repository record of {run_dir}: {exc}") from None
    if record is None:
        return None
    return RunRepository(record, _files(task, record), _author(task), _tree(record))


def repository_brief(repository: RunRepository) -> str:
    """The task message's section on the repository: where the workspace came from, what is read-only.

    Free of absolute paths, commit ids and run ids, so a cassette replays against any later run."""
    protected = sorted(repository.files.protected)
    shown = ", ".join(protected[:12]) + (f" and {len(protected) - 12} more" if len(protected) > 12 else "")
    lines = [
        "## Repository",
        f"The workspace is a checkout of a git repository at `{repository.record.base}`. Change its files to "
        "do the work; PSE commits what you changed when the run passes.",
    ]
    if protected:
        lines.append(f"Read-only (the repository's tests and test configuration, the evidence): {shown}.")
    return "\n".join(lines)


def finish_repository(repository: RunRepository, trace: Trace, run_dir: Path) -> RepositoryRecord:
    """After the run's outcome: commit the change on PASSED, write `change.patch`; record both in `trace`.

    A failure of git here never changes the outcome: the record's note says what could not be done.
    """
    record = repository.record.model_copy()
    outcome = trace.outcome
    unchecked = left_out_paths(trace.delivery)  # what no check saw is never part of the change
    written = [path for path in repository.written() if path not in unchecked]
    try:
        change = change_of(record, run_dir / "workspace", written)
        commit = None
        if outcome == "PASSED" and not change.empty:
            plan = trace.plan
            message = commit_message(
                plan.goal if plan is not None else "",
                trace.run_id,
                [c.id for c in plan.criteria] if plan is not None else [],
            )
            commit = commit_change(record, change, message, repository.author)
        if not change.empty:
            patch = run_dir / PATCH_FILE
            patch.write_bytes(diff_of(record, change, commit))
            record.patch = str(patch.resolve())
        record.commit = commit
        if ended_for_good(trace):
            record = release_worktree(run_dir, record)
        record.note = _note(outcome, record, change.empty, commit, trace.run_id)
        if change.skipped:
            left = ", ".join(f"{path} ({why})" for path, why in change.skipped[:8])
            record.note += f"; not in the change: {left}"
    except (GitFailed, OSError) as exc:
        record.note = f"the change could not be recorded: {exc}"
    trace.repository = record
    if outcome == "ESCALATED" and trace.escalation is not None:
        _tell_escalation(run_dir, record)
    return record


def ended_for_good(trace: Trace) -> bool:
    """The run cannot go on: an outcome, and not ESCALATED (a person may answer) nor cancelled (resumable)."""
    outcome = trace.outcome
    return outcome is not None and outcome != "ESCALATED" and not trace.outcome_reason.startswith("CANCELLED")


def _note(outcome: str | None, record: RepositoryRecord, empty: bool, commit: str | None, run_id: str) -> str:
    """What became of the change, and what of the run is left in the person's repository."""
    if commit is not None:
        said = f"committed {commit[:12]} on {record.branch}; change.patch is its git format-patch"
        return said + ("; the branch is all the run left in your repository" if record.released else "")
    said = (
        f"{outcome}: no file changed"
        if empty
        else f"{outcome}: nothing committed; change.patch holds the diff so far"
    )
    if record.released:
        return said + "; nothing of the run is left in your repository"
    return (
        f"{said}; the run can go on, so its worktree and branch {record.branch} stay in your repository "
        f"(`pse clean {run_id}` removes them)"
    )


def _tell_escalation(run_dir: Path, record: RepositoryRecord) -> None:
    """ESCALATED says what happened to the change: a section at the end of escalation.md."""
    path = run_dir / "escalation.md"
    if path.is_file() and not path.is_symlink():
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"\n## The change\n\n{record.note}.\n")
