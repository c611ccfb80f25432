"""File tools: read_file, list_files, write_file. Every path goes through `resolve_path`.

A path names a file of the run workspace, or, with the prefix `@evaluation/`, of the Evaluator's
evaluation area: a folder outside the workspace where the Evaluator writes its own acceptance tests.
Only a grant that reaches the area (the Evaluator's, on a task with independent tests) may name it;
for everyone else such a path is denied like any path outside the workspace.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from pse.exceptions import SandboxViolation
from pse.sandbox import resolve_in_workspace
from pse.tools._bind import missing_imports
from pse.tools._evidence import is_test_file, test_side
from pse.tools._own_tests import borrowed_tests
from pse.tools._protected import check_config_reason
from pse.tools._pyhints import WITHHELD, python_hints
from pse.tools._registry import ToolContext, ToolOutcome
from pse.tools._ruff import safe_fixes

__all__ = [
    "EVALUATION_PREFIX",
    "OWN_TEST_FILE",
    "UNCHANGED",
    "list_files",
    "read_file",
    "resolve_path",
    "write_file",
]

EVALUATION_PREFIX = "@evaluation"
"""Paths under this prefix name the evaluation area, e.g. `@evaluation/test_criteria.py`."""
OWN_TEST_FILE = f"{EVALUATION_PREFIX}/test_criteria.py"
"""The one file an Evaluator that owes tests of its own writes them in (its prompt names it; under a
grammar, the only path its file blocks may take)."""
UNCHANGED = "this write changed nothing"
"""What a `write_file` of the very bytes its file held says (in its `hints`)."""
_SAME_CHECK_BYTES = 1 << 20
"""Largest file a write compares with what it replaces (to say it changed nothing)."""
MAX_READ_BYTES = 4_000_000
"""read_file reads at most this much of a file; the executor then caps what the role sees."""
MAX_LIST_ENTRIES = 1000
"""list_files stops after this many entries and says so."""
_SKIP_DIRS = frozenset(
    {".git", "__pycache__", ".venv", "venv", "node_modules", ".pytest_cache", ".ruff_cache"}
)


def resolve_path(ctx: ToolContext, path: str) -> tuple[str, Path, Path]:
    """(area, real path, area root) of a role's path: `workspace`, or `evaluation` for `@evaluation/...`.

    Raises:
        SandboxViolation: the path leaves its area, or names the evaluation area without a grant to it.
    """
    text = path.strip()
    if text == EVALUATION_PREFIX or text.startswith(EVALUATION_PREFIX + "/"):
        if ctx.evaluation is None:
            raise SandboxViolation(
                f"path {text!r} names the evaluation area, which only the Evaluator of a task with "
                "independent tests may use"
            )
        rest = text[len(EVALUATION_PREFIX) :].lstrip("/") or "."
        return (
            "evaluation",
            resolve_in_workspace(ctx.evaluation, rest),
            Path(os.path.realpath(ctx.evaluation)),
        )
    return "workspace", resolve_in_workspace(ctx.workspace, text), Path(os.path.realpath(ctx.workspace))


def _shown(area: str, root: Path, real: Path) -> str:
    rel = real.relative_to(root).as_posix()
    if area == "evaluation":
        return EVALUATION_PREFIX if rel == "." else f"{EVALUATION_PREFIX}/{rel}"
    return rel or "."


def read_file(ctx: ToolContext, path: str) -> ToolOutcome:
    """Return a text file's content (UTF-8; undecodable bytes replaced).

    A path that names no file but one of the run's inputs gives that input's text, raw (facts: `input`):
    a small model reads the input it is told to use by its name (the 1.5B model read `PROBLEM`, then
    blocked on the missing file, in every HumanEval run), and a JSON copy of it, with its escapes, is
    what it would otherwise find and copy. A file a role wrote under an input's name does not hide the
    input: read by that name, the input is what a role gets (a Specialist's own `PROBLEM` file cannot
    stand in for the task's); only a file the task seeded wins."""
    area, real, root = resolve_path(ctx, path)
    if real.is_dir():
        raise ValueError(f"{path.strip()!r} is a directory; use list_files to see what it holds")
    name = real.relative_to(root).as_posix()
    seeded = real.is_file() and ctx.author(area, name) == "task"
    if area == "workspace" and name in ctx.inputs and not seeded:
        value = ctx.inputs[name]  # the input itself, raw: what the model meant by reading it
        return ToolOutcome("ok", value, facts={"bytes": len(value.encode("utf-8")), "input": name})
    if not real.is_file():
        raise ValueError(f"no file {path.strip()!r} in the workspace; list_files shows what exists")
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(MAX_READ_BYTES)
    if b"\x00" in data[:8192]:
        raise ValueError(f"{path.strip()!r} is a binary file ({size} bytes); read_file shows text files only")
    text = data.decode("utf-8", errors="replace")
    if size > MAX_READ_BYTES:
        text += f"\n[… file continues: {size - MAX_READ_BYTES} more bytes not read …]"
    return ToolOutcome("ok", text, facts={"bytes": size})


def list_files(ctx: ToolContext, path: str = ".") -> ToolOutcome:
    """List a folder recursively: `dir/`, `file (N bytes)`, and `link@` for symlinks (never followed). A
    file's path lists that file, as `ls` does: the 1.5B model listed the file it had just written, was
    told it was "not a directory", and blocked on MISSING_PERMISSION (held-out top-words, csv-mean)."""
    area, real, root = resolve_path(ctx, path or ".")
    if not real.is_dir():
        if real.is_symlink() or not real.is_file():
            raise ValueError(
                f"no file or folder {path.strip()!r} in the workspace; list_files lists '.' whole"
            )
        return ToolOutcome(
            "ok", f"{_shown(area, root, real)} ({real.lstat().st_size} bytes)", facts={"entries": 1}
        )
    lines: list[str] = []
    for current, dirs, files in os.walk(real):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        here = Path(current)
        for name in [*dirs, *sorted(files)]:
            entry = here / name
            rel = _shown(area, root, entry)
            if entry.is_symlink():
                lines.append(f"{rel}@")
                if name in dirs:
                    dirs.remove(name)  # os.walk does not follow it anyway; keep the listing honest
            elif name in dirs:
                lines.append(f"{rel}/")
            else:
                lines.append(f"{rel} ({entry.lstat().st_size} bytes)")
            if len(lines) >= MAX_LIST_ENTRIES:
                lines.append(f"[… listing stopped at {MAX_LIST_ENTRIES} entries; list a subdirectory …]")
                return ToolOutcome(
                    "ok", "\n".join(lines), facts={"entries": MAX_LIST_ENTRIES}, truncated=True
                )
    count = len(lines)
    return ToolOutcome("ok", "\n".join(lines) if lines else "(empty directory)", facts={"entries": count})


def write_file(ctx: ToolContext, path: str, content: str) -> ToolOutcome:
    """Create or replace a file inside the workspace or the evaluation area (parent folders are created).

    Facts: `bytes`, and `area` and `path` (relative to the area) of the file written: the executor
    files the requester as its author. Where the context says so (`ruff_fixes`), a Python file of the
    workspace gets ruff's safe fixes; `ruff_fixed` lists their codes. A Python file gets the names it reads
    and never binds bound where one reading is certain (an import, a misspelt name: `missing_imports`);
    `names_bound` lists what was done. The
    argument the role sent stays in the record as it was sent.
    """
    area, real, root = resolve_path(ctx, path)
    if not (ctx.evaluation_writable if area == "evaluation" else ctx.writable):
        where = "the evaluation area" if area == "evaluation" else "the workspace"
        raise ValueError(
            f"write_file needs a read-write grant for {where}; this role's grant does not allow it"
        )
    rel = real.relative_to(root).as_posix()
    if content.strip() == WITHHELD:
        raise ValueError(
            f"{rel} not written: {WITHHELD!r} is what PSE shows in place of content you wrote before "
            "that did not stand (refused, or not code to run), not content; write "
            "the file's real content"
        )
    reason = ctx.accept(rel) if ctx.accept is not None and area == "workspace" else check_config_reason(rel)
    if reason is not None:
        raise SandboxViolation(f"{rel} may not be written: {reason}")
    if real.is_dir():
        raise ValueError(f"{path.strip()!r} is a directory; give a file path")
    if area == "evaluation" and rel.endswith(".py") and not test_side(rel):
        stem = PurePosixPath(rel).stem
        raise ValueError(
            f"{rel} not written: the evaluation area holds your own tests (test_*.py, *_test.py, or "
            "files under tests/), not modules: a copy of a module there is no evidence "
            f"of the delivered one. To judge {stem}.py, write tests that import it, in "
            f"{EVALUATION_PREFIX}/test_{stem}.py"
        )
    if area == "evaluation" and is_test_file(rel) and (borrowed := borrowed_tests(content, ctx.workspace)):
        raise ValueError(
            f"{rel} not written: {'; '.join(borrowed)}. Your tests are evidence only when they are your "
            "own, written from the task's words: a copy of the workspace's tests proves only what their "
            "writer chose to check. Write tests of your own, with cases the task states"
        )
    before = real.read_bytes() if real.is_file() and real.stat().st_size <= _SAME_CHECK_BYTES else None
    real.parent.mkdir(parents=True, exist_ok=True)
    data = _write(ctx, path, content)
    fixed: list[str] = []
    if ctx.ruff_fixes and area == "workspace" and rel.endswith((".py", ".pyi")):
        content, fixed = safe_fixes(ctx, rel, content)
        if fixed:
            _write(ctx, path, content)
    added: list[str] = []
    if rel.endswith(".py"):
        content, added = missing_imports(real, rel, content, None if area == "workspace" else ctx.workspace)
        if added:
            data = _write(ctx, path, content)
    hints = python_hints(real, rel, content, None if area == "workspace" else ctx.workspace)
    if added:
        hints.insert(
            0, f"PSE changed the file where one reading is certain ({'; '.join(added)}); read it to see it"
        )
    if fixed:
        hints.insert(0, f"ruff applied its safe fixes ({', '.join(fixed)}) to the file; read it to see it")
    if before is not None and before == content.encode("utf-8"):
        # In a revise told its module was to write again, the 1.5B model at temperature 0 wrote it byte
        # for byte as the review had failed it, then reported (code-delivery, CI).
        hints.insert(0, f"{rel} already held exactly these bytes: {UNCHANGED}")
    return ToolOutcome(
        "ok",
        "\n".join([f"wrote {_shown(area, root, real)} ({len(data)} bytes)", *(f"note: {h}" for h in hints)]),
        facts={
            "bytes": len(data),
            "area": area,
            "path": rel,
            **({"hints": hints} if hints else {}),
            **({"ruff_fixed": fixed} if fixed else {}),
            **({"names_bound": added} if added else {}),
        },
    )


def _write(ctx: ToolContext, path: str, content: str) -> bytes:
    """Write `content` to a role's path, re-resolved now and opened without following a last-component
    symlink (narrows the TOCTOU window after mkdir); the bytes written."""
    _, real, _ = resolve_path(ctx, path)
    data = content.encode("utf-8")
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return data
