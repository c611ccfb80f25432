"""Repository runs (`pse run TASK --repo PATH [--base REF]`): the workspace as a git worktree on the
branch `pse/<run_id>`, the change committed on PASSED, `change.patch` in the run folder.

Git is run by this package only, with an argument list and PSE's safe options (`pse.repo._git`); no
role's tool reaches it.
"""

from pse.repo._change import (
    DEFAULT_AUTHOR,
    PATCH_FILE,
    Change,
    base_contents,
    change_of,
    commit_change,
    commit_message,
    diff_of,
)
from pse.repo._git import GitFailed, git, git_available
from pse.repo._worktree import (
    RECORD_FILE,
    branch_for,
    held_worktrees,
    open_worktree,
    read_record,
    release_worktree,
    remove_worktree,
    repository_folder,
    write_record,
)

__all__ = [
    "DEFAULT_AUTHOR",
    "PATCH_FILE",
    "RECORD_FILE",
    "Change",
    "GitFailed",
    "base_contents",
    "branch_for",
    "change_of",
    "commit_change",
    "commit_message",
    "diff_of",
    "git",
    "git_available",
    "held_worktrees",
    "open_worktree",
    "read_record",
    "release_worktree",
    "remove_worktree",
    "repository_folder",
    "write_record",
]
