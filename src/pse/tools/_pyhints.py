"""What a `write_file` of Python can tell its writer at once: the file does not parse, or a test file
defines its own copy of what a module beside it delivers.

Both are the commonest ways a model's tests prove nothing about the delivered code: a test module that
starts with a copy of the function it tests passes whatever the delivered file holds (the sealed checks
then refuse the run: the delivered file was never executed). Said when the file is written, the writer
can fix it in the same turn instead of losing a cycle. A hint is information only: it decides nothing,
and the checks judge the files as they are.
"""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path, PurePosixPath

__all__ = ["python_hints"]

_READ_LIMIT = 1_000_000
"""Sibling modules larger than this are not read for their names."""


def _is_test(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _top_level_names(tree: ast.Module) -> set[str]:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}


def _module_names(path: Path) -> set[str]:
    """The functions and classes a sibling module defines at top level (none if it is no plain file, too
    large, or does not parse)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return set()
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > _READ_LIMIT:
            return set()
        try:
            return _top_level_names(ast.parse(fh.read(_READ_LIMIT)))
        except (OSError, SyntaxError, ValueError):
            return set()


def python_hints(real: Path, rel: str, content: str) -> list[str]:
    """Hints on the Python file just written at `real` (workspace path `rel`) with `content`."""
    if not rel.endswith(".py"):
        return []
    try:
        tree = ast.parse(content)
    except SyntaxError as exc:
        return [f"{rel} does not parse as Python: {exc.msg} (line {exc.lineno}); write it again"]
    if not _is_test(PurePosixPath(rel).name):
        return []
    mine = _top_level_names(tree)
    hints = []
    for sibling in sorted(real.parent.glob("*.py")):
        if sibling.name == real.name or _is_test(sibling.name):
            continue
        copied = sorted(mine & _module_names(sibling))
        if copied:
            module = sibling.stem
            hints.append(
                f"{rel} defines {', '.join(copied)}, as {sibling.name} does: its tests run this copy, not "
                f"{sibling.name}. Delete the copy and import it: from {module} import {', '.join(copied)}"
            )
    return hints
