"""What a `write_file` of Python can tell its writer at once: the file does not parse, it reads a name
nothing in it binds, or a test file defines its own copy of what a module beside it delivers.

These are the commonest ways a model's file fails or its tests prove nothing about the delivered code: a
test module that starts with a copy of the function it tests passes whatever the delivered file holds
(the sealed checks then refuse the run: the delivered file was never executed); a test module that never
imports the module it tests fails every test with a `NameError`. Said when the file is written, the
writer can fix it in the same turn instead of losing a cycle. A hint is information only: it decides
nothing, and the checks judge the files as they are.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import stat
import threading
from pathlib import Path, PurePosixPath

from pse.tools._evidence import is_test_file

__all__ = [
    "NOT_BOUND",
    "NOT_PYTHON",
    "WITHHELD",
    "constant_of",
    "parse_python",
    "python_hints",
    "python_problem",
    "scan_names",
    "sibling_modules",
    "syntax_problem",
    "unbound_names",
]

NOT_PYTHON = "does not parse as Python"
NOT_BOUND = "which it never imports or defines"
"""What a write's note says of a name its file reads and nothing binds (`FILE uses NAME, which ...`)."""
"""What a hint on a Python file that does not parse says after its path (`team` reads it back)."""
WITHHELD = "[not shown: this write did not stand; the answer to it says why]"
"""What a role's model sees in place of its own write that was refused, or was not code to run
(`team.WithholdingContext`); `write_file` refuses it as content: a small model copies whatever text it
is shown."""

_READ_LIMIT = 1_000_000
"""Sibling modules larger than this are not read for their names."""
_LINE_CHARS = 120
"""At most this much of the line that does not parse is quoted."""


_PARSING = threading.Lock()


def parse_python(source: str | bytes) -> ast.Module:
    """`ast.parse`, one PSE call at a time in the process. In CPython 3.11 the AST constructor's depth
    counter is the interpreter's, shared by its threads, and `write_file` runs on the tool pool's
    threads beside the engine: tests/test_steps.py died about one run in three with `SystemError: AST
    constructor recursion depth mismatch` from a write's hint (Debian 12's Python 3.11.2).

    Raises only SyntaxError (ValueError for a null byte), whatever the source: a file nested too deeply
    for the parser (`1+1+...` 200,000 times gives RecursionError, 100,000 unary minuses MemoryError) is
    one Python cannot compile either, and a role that wrote it must not end the run as ERROR through
    PSE's analysis of it (issue 45)."""
    with _PARSING:
        try:
            return ast.parse(source)
        except (RecursionError, MemoryError) as exc:
            error = SyntaxError(f"it is nested too deeply for Python's parser ({type(exc).__name__})")
            error.lineno = 1
            raise error from None


def _parsed(rel: str, source: str | bytes) -> ast.Module | str:
    """The module `source` holds, or why the Python file `rel` does not parse, with the line quoted."""
    try:
        return parse_python(source)
    except SyntaxError as exc:
        line = " ".join((exc.text or "").split())[:_LINE_CHARS]
        where = f"line {exc.lineno}" + (f": {line}" if line else "")
        return f"{rel} {NOT_PYTHON}: {exc.msg} ({where})"
    except ValueError:  # a null byte
        return f"{rel} {NOT_PYTHON}: it holds a null byte"


def syntax_problem(rel: str, source: str | bytes) -> str | None:
    """Why `source`, the Python file `rel`, does not parse, with the line quoted; None if it parses.

    The line is the writer's own text, quoted so that a reader of the trace, or a model, sees what to fix
    without opening the file. (It did not move the 1.5B model: told the line, as when told only its number,
    it wrote the same stray `]` again, with or without the grammar: its own way of ending that file.)"""
    parsed = _parsed(rel, source)
    return parsed if isinstance(parsed, str) else None


def constant_of(statement: ast.stmt) -> object:
    """The value of a statement that is a bare constant (a docstring, `...`); None otherwise."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return statement.value.value
    return None


def _docstring_only(body: list[ast.stmt]) -> bool:
    """A function body that is its docstring and nothing else (or with `pass` / `...` after it)."""
    first, rest = body[0], body[1:]
    return isinstance(constant_of(first), str) and all(
        isinstance(s, ast.Pass) or constant_of(s) is ... for s in rest
    )


def _stubs(rel: str, tree: ast.Module) -> str | None:
    """The top-level functions of `rel` that hold only their docstring: a specification copied, with no
    code (the 1.5B model wrote HumanEval's PROBLEM back without the body it was to write)."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    names = [n.name for n in tree.body if isinstance(n, kinds) and _docstring_only(n.body)]
    if not names:
        return None
    which = f"{names[0]} has" if len(names) == 1 else f"{', '.join(names)} have"
    return f"{rel}: {which} only a docstring, no code"


def python_problem(rel: str, source: str | bytes, beside: Path | None = None) -> str | None:
    """Why `source`, the Python file `rel`, is not yet code to deliver: it does not parse
    (`syntax_problem`), a top-level function holds only its docstring, it reads a name nothing in it
    binds (`unbound_names`, with the import of a module of `beside`, its folder, that defines it), or it
    is a test file that holds no test; None if none holds."""
    tree = _parsed(rel, source)
    if isinstance(tree, str):
        return tree
    return _stubs(rel, tree) or _unbound_problem(rel, tree, source, beside) or _no_test(rel, tree)


def _no_test(rel: str, tree: ast.Module) -> str | None:
    """A test file (`test_*.py`, `*_test.py`) in which pytest finds no test: held-out roman's revise, told
    its test file was to write again, wrote it as one empty line and reported (heldout-17)."""
    if not is_test_file(PurePosixPath(rel).name):
        return None
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:  # any class: pytest collects a unittest.TestCase whatever its name
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        if any(isinstance(m, kinds) and m.name.startswith("test") for m in members):
            return None
    return f"{rel} holds no test (a test_* function, or one in a Test* class)"


_MODULE_GLOBALS = frozenset(
    {"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__", "__path__"}
)
_BUILTINS = frozenset(dir(builtins)) | _MODULE_GLOBALS
"""Names every module has without binding them: the builtins and a module's own globals."""


_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)


def _waived(line: str) -> bool:
    """A line whose `# noqa` (bare, or naming F821) says its undefined name is meant, as pyflakes reads it."""
    found = _NOQA.search(line)
    return found is not None and (not found["codes"] or "F821" in found["codes"].upper())


def unbound_names(tree: ast.Module, source: str | bytes = "") -> list[str]:
    """The names `tree` reads that nothing in the file binds (`scan_names`)."""
    return scan_names(tree, source)[0]


def scan_names(tree: ast.Module, source: str | bytes = "") -> tuple[list[str], set[str]]:
    """The names `tree` reads that nothing in the file binds, anywhere, and that are no builtin, in order of
    first use; and the names the file binds. A file that imports `*` binds names no parser can see, and
    reads none unbound.

    Deliberately coarser than pyflakes' undefined-name check (no scopes): a name bound anywhere in the
    file counts as bound everywhere, so what is named here fails whenever its line runs. Seen on the
    1.5B model: a test file that never imports the module it tests (`NameError: name 'Account' is not
    defined` in every test), `pytest.raises` with no `import pytest`, and HumanEval-5's `delimiter` for
    the parameter `delimeter`. A name whose every use is on a line with `# noqa` (bare or naming F821)
    is meant, as for pyflakes: bound at run time (`module.__dict__[...] = ...`)."""
    bound: set[str] = set()
    read: dict[str, tuple[int, int]] = {}
    lines = (source.decode("utf-8", "replace") if isinstance(source, bytes) else source).splitlines()
    meant: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return [], bound
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                read.setdefault(node.id, (node.lineno, node.col_offset))
                line = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
                meant[node.id] = meant.get(node.id, True) and _waived(line)
            else:
                bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    known = bound | _BUILTINS
    unbound = sorted((name for name in read if name not in known and not meant[name]), key=read.__getitem__)
    return unbound, bound


def _unbound_problem(rel: str, tree: ast.Module, source: str | bytes, beside: Path | None) -> str | None:
    """What `rel` reads unbound (`unbound_names`), with the import that binds each name a module of `beside`
    (not a test module, not `rel` itself) defines at top level."""
    names = unbound_names(tree, source)
    if not names:
        return None
    said = f"{rel} uses {', '.join(names)}, {NOT_BOUND}"
    if beside is None:
        return said
    imports = [
        f"from {stem} import {', '.join(found)}"
        for stem, defined in sibling_modules(beside, PurePosixPath(rel).name).items()
        if (found := [name for name in names if name in defined])
    ]
    return f"{said}: {'; '.join(imports)}" if imports else said


def _top_level_names(tree: ast.Module) -> set[str]:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}


def sibling_modules(folder: Path, own: str) -> dict[str, set[str]]:
    """The modules of `folder` a Python file named `own` there may import from, by name, each with the
    functions and classes it defines at top level: not `own` itself, no test module, only a module whose
    name is an identifier (one an `import` statement can name)."""
    return {
        path.stem: _module_names(path)
        for path in sorted(folder.glob("*.py"))
        if path.stem.isidentifier() and path.name != own and not is_test_file(path.name)
    }


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
            return _top_level_names(parse_python(fh.read(_READ_LIMIT)))
        except (OSError, SyntaxError, ValueError):
            return set()


def python_hints(real: Path, rel: str, content: str, modules: Path | None = None) -> list[str]:
    """Hints on the Python file just written at `real` (workspace path `rel`) with `content`; `modules`:
    the folder of the modules its code imports (the workspace, for a file of the evaluation area; by
    default the file's own folder).

    Never raises: a hint is PSE's analysis of a role's file, and a failure of that analysis is a note
    to the role (the checks judge the file as it is), never a failure of the run."""
    try:
        return _hints(real, rel, content, modules if modules is not None else real.parent)
    except Exception as exc:  # any analysis error: a note, not an ERROR (issue 45)
        return [f"PSE could not analyse {rel} ({type(exc).__name__}); the checks judge it as it is"]


def _hints(real: Path, rel: str, content: str, modules: Path) -> list[str]:
    if not rel.endswith(".py"):
        return []
    tree = _parsed(rel, content)
    if isinstance(tree, str):
        return [f"{tree}; write it again"]
    stubs = _stubs(rel, tree)
    hints = [f"{stubs}; write its code"] if stubs is not None else []
    unbound = _unbound_problem(rel, tree, content, modules)
    if unbound is not None:
        hints.append(unbound)
    if not is_test_file(PurePosixPath(rel).name):
        return hints
    mine = _top_level_names(tree)
    # A test file that defines what a module beside it does tests its own copy, evidence of nothing
    # delivered: both of held-out slugify's test files did (heldout-15), the Evaluator's in its area.
    for module, defined in sibling_modules(modules, real.name if modules == real.parent else "").items():
        if copied := sorted(mine & defined):
            hints.append(
                f"{rel} defines {', '.join(copied)}, as {module}.py does: its tests run this copy, not "
                f"{module}.py. Delete the copy and import it: from {module} import {', '.join(copied)}"
            )
    return hints
