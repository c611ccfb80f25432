"""Running git for PSE: an argument list (no shell), a bounded time, and nothing a workspace can steer.

Only PSE's own code runs git; no role's tool can. Every call:

* passes `-c core.hooksPath=/dev/null` (no hook of any repository runs), `-c core.fsmonitor=false` (no
  file-system monitor command) and `-c protocol.allow=never` (no transport: PSE never fetches);
* gets an environment without any `GIT_*` variable of PSE's own process (a `GIT_DIR`, `GIT_WORK_TREE` or
  `GIT_CONFIG_*` there would point git elsewhere), plus the few PSE sets on purpose;
* names the repository explicitly (`-C PATH` for the user's repository, `--git-dir` for a run's
  worktree) and runs from a folder PSE chose, never from the workspace, so no `.git` file, attributes
  file or configuration written into a workspace is read.

What a run's files may still reach is the user's own configuration (their repository's `.git/config`,
their global and system files): the person running PSE is trusted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from pse.exceptions import UserError

__all__ = ["GIT_TIMEOUT_S", "GitFailed", "git", "git_available"]

GIT_TIMEOUT_S = 60.0
"""Longest one git command may take (a worktree of a large repository is written in this time)."""

_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.allow=never")


class GitFailed(Exception):
    """A git command exited non-zero; `stderr` holds git's own words."""

    def __init__(self, argv: Sequence[str], code: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(argv)} exited {code}: {stderr.strip()}")
        self.code = code
        self.stderr = stderr.strip()


def git_available() -> bool:
    """Whether a `git` executable is on PATH."""
    return shutil.which("git") is not None


def _environment(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    env.update(extra)
    return env


def git(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> bytes:
    """Run `git ARGS` with PSE's safe options; return its stdout.

    Args:
        args: the arguments after `git` (name the repository in them: `-C`, `--git-dir`).
        cwd: a folder PSE chose (never a workspace).
        env: variables to add (e.g. `GIT_INDEX_FILE`, author and committer).
        stdin: bytes for its standard input.

    Raises:
        UserError: git is not installed.
        GitFailed: git exited non-zero, or took longer than `timeout`.
    """
    executable = shutil.which("git")
    if executable is None:
        raise UserError("git is not installed, and --repo needs it; fix: install git (e.g. apt install git)")
    argv = [*_SAFE, *args]
    try:
        done = subprocess.run(
            [executable, *argv],
            cwd=cwd,
            env=_environment(env or {}),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitFailed(args, -1, f"timed out after {timeout:.0f} s") from None
    if done.returncode != 0:
        raise GitFailed(args, done.returncode, done.stderr.decode("utf-8", "replace"))
    return done.stdout
