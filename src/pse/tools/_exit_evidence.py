"""When a command's exit status is evidence: never when code a role wrote could run inside the command.

A task's check command (`[checks]`, `[verification] commands`, a repository's `TEST_COMMAND`) runs over
the check's sealed snapshot. If the command runs delivered code, the delivered code can end the
command with any exit status it likes (`os._exit(0)` at import), so the status says nothing. PSE cannot
read a command's mind; the rule is about what is in its reach, decided from the manifest and the
command line, never from what the command reports:

* the status is evidence when **no role-written file of the snapshot is code**: every one is data by
  its name (`.md`, `.json`, `.csv`, `.txt`...) and not executable. A task's script that reads a
  Markdown report and a JSON index is judged by its exit status (incident-review);
* or when **every program the command line runs only reads its files**: `grep`, `test`, `diff`, `cmp`,
  `wc`, `cat`... joined by `&&`, `||`, `;`, `|` or `!`, with no expansion (`$`, backticks), no
  subshell, no `find -exec`. `grep -q 'a + b' calc/core.py` cannot run `calc/core.py`.

Otherwise the command ran and proved nothing: "ran, no evidence". A pytest command (`{python} -m pytest
...`) is no plain command: it runs as `run_pytest` does, each author's tests measuring the delivered
code from outside it (`pytest_targets`). What this does not see: a task's own script that evaluates a
role's data as code (`pickle.load`, `eval` of a JSON field) hands the product its exit status; that is
the task's script to avoid.
"""

from __future__ import annotations

import re
import shlex
import stat
import sys
from pathlib import Path, PurePosixPath

from pse.tools._evidence import Manifest

__all__ = ["DATA_SUFFIXES", "exit_status_problem", "pytest_targets"]

DATA_SUFFIXES = frozenset(
    {".md", ".markdown", ".txt", ".rst", ".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".yaml", ".yml",
     ".xml", ".log", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf"}
)  # fmt: skip
"""What a role-written file may be named and still be data: anything else may run as code."""
_READERS = frozenset(
    {"grep", "egrep", "fgrep", "test", "[", "true", "false", "echo", "diff", "cmp", "wc", "cat", "head",
     "tail", "ls", "stat", "sort", "uniq", "cut", "comm", "sha256sum", "sha1sum", "md5sum", "find", "jq"}
)  # fmt: skip
"""Programs that read their files and never execute them (`find` without -exec and its kin)."""
_JOINS = frozenset({"&&", "||", ";", "|", "!"})
_PLAIN_WORD = re.compile(r"[\w./:=\[\]{}+,@-]+")
"""A word of a plain pytest command: a path, a node id, an option; no shell operator or expansion."""
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fls"})
_PYTEST_QUIET = frozenset(
    {"-q", "-qq", "-v", "-vv", "-s", "-x", "-ra", "-rA", "-rf", "--no-header", "--disable-warnings",
     "--color=no", "--color=yes", "--tb=short", "--tb=line", "--tb=no", "--tb=long", "--tb=native"}
)  # fmt: skip
"""pytest options that change what it prints, or where it stops, never which tests or how they run."""


def _role_code(manifest: Manifest, workspace: Path) -> list[str]:
    """Role-written files of the snapshot that are not data by their name, or are executable."""
    found = []
    for path, entry in manifest.area("workspace").items():
        if entry.author == "task":
            continue
        if PurePosixPath(path).suffix.lower() not in DATA_SUFFIXES or _executable(workspace / path):
            found.append(f"{path} ({entry.author})")
    return found


def _executable(path: Path) -> bool:
    try:
        return bool(path.lstat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    except OSError:
        return False


def _only_readers(command: str) -> bool:
    """Every program the command line runs is one of `_READERS`, with nothing the shell expands."""
    if "$" in command or "`" in command:
        return False
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&!")
        tokens = list(lexer)
    except ValueError:
        return False
    if any(t in ("(", ")") or "(" in t or ")" in t for t in tokens):
        return False
    starts, expect = [], True
    for token in tokens:
        if token in _JOINS and (token != "!" or expect):  # `!` negates a command only where one starts
            expect = True
            continue
        if expect:
            starts.append(token)
            expect = False
        elif token in _FIND_RUNS:
            return False
    return bool(starts) and all(program in _READERS for program in starts)


def exit_status_problem(command: str, manifest: Manifest, workspace: Path) -> str | None:
    """Why the command's exit status cannot be evidence, or None when it can (module docstring)."""
    code = _role_code(manifest, workspace)
    if not code or _only_readers(command):
        return None
    shown = ", ".join(code[:6]) + (f" and {len(code) - 6} more" if len(code) > 6 else "")
    return (
        f"ran, no evidence: code a role wrote was within its reach ({shown}), and the command runs "
        "programs that could execute it, so its exit status is not evidence; a task checks code with "
        "pytest tests (run_pytest, or a `{python} -m pytest` check), which measure it from outside"
    )


def pytest_targets(command: str) -> list[str] | None:
    """The test paths of a plain pytest command (`{python} -m pytest [-q ...] [PATH ...]`; `.` for
    none), or None when the command is anything else (or asks pytest for something PSE does not do)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    python = ["{python}"] if words[:1] == ["{python}"] else [sys.executable, "-I"]  # as the task filled it in
    if words[: len(python) + 2] != [*python, "-m", "pytest"]:
        return None
    if not all(_PLAIN_WORD.fullmatch(word) for word in words[len(python) + 2 :]):
        return None  # a shell operator, an expansion: more than one plain pytest
    targets: list[str] = []
    rest = iter(words[len(python) + 2 :])
    for word in rest:
        if word == "-p" and next(rest, None) == "no:cacheprovider":
            continue  # PSE's own setting already
        if word.startswith("-"):
            if word not in _PYTEST_QUIET:
                return None
            continue
        targets.append(word)
    return targets or ["."]
