"""The Evaluator's own tests are its own: no test of the workspace copied, none imported.

`independent_tests` asks for evidence the Specialist did not choose (ARCHITECTURE.md, sealed
verification): tests the Evaluator writes in its evaluation area, from the task's words. Seen on the
1.5B model: its Evaluator wrote the Specialist's `test_slug.py`, byte for byte, as
`@evaluation/test_slug.py`, so the gate counted the Specialist's two cases as the Evaluator's. A hostile
Specialist that writes weak tests would get them counted so, if the Evaluator copies them. Whatever
the Evaluator's model does, a test file of the evaluation area is refused when any of its tests is one
of the workspace's, whatever it is named (same code, its docstring aside), or when it imports a
workspace test module (its tests would be collected as the Evaluator's). A test written from the task
that happens to repeat one of the workspace's is refused too; a test of its own differs by a case.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path, PurePosixPath

from pse._run_files import read_beneath
from pse.tool_names import Tool
from pse.tools._evidence import candidate_files, is_test_file
from pse.tools._pyhints import NOT_BOUND, parse_python, syntax_problem, unbound_names

__all__ = ["FIXTURE_LOOKUP", "borrowed_tests", "code_faults", "hollow_tests", "test_names"]

FIXTURE_LOOKUP = re.compile(r"^file .+, line \d+$")
"""The first line of pytest's report of a test that asks for a fixture nothing defines."""
_TOOLS = frozenset(Tool)
_TOOL_CALLS = "a tool is called with <tool_calls>, never from a test"

_READ_LIMIT = 16_000_000
"""Workspace test files larger than this are not compared (nor could a model copy from one)."""


def _test_defs(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The tests pytest collects from `tree`: `test*` functions, at top level or in a `Test*` class."""
    found = []
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) and node.name.startswith("Test") else [node]
        for member in members:
            if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and member.name.startswith("test"):
                found.append(member)
    return found


def _tests(tree: ast.Module) -> dict[str, str]:
    """Each test pytest collects from `tree`, by its code (`_shape`)."""
    found: dict[str, str] = {}
    for test in _test_defs(tree):
        found.setdefault(_shape(test), test.name)
    return found


_NOT_THE_WORK = frozenset({*sys.stdlib_module_names, "pytest", "_pytest"})


def hollow_tests(source: str | bytes) -> list[str]:
    """The tests of `source` that assert nothing of the work: no assertion (`assert`, `self.assert…`,
    `pytest.raises`), or no call into a name the file imports from outside the standard library and
    pytest. Such a test passes on any work, so it backs no criterion (`_backing`): asked for
    `def test_ac2():`, a model can write `pass` or `assert True`. A test that reaches the work only
    through a fixture counts as hollow too (a false alarm the Evaluator answers with a direct call)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return []
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in _NOT_THE_WORK:
                imported |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            imported |= {
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] not in _NOT_THE_WORK
            }
    hollow = []
    for test in _test_defs(tree):
        calls = [node for node in ast.walk(test) if isinstance(node, ast.Call)]
        asserts = any(isinstance(node, ast.Assert) for node in ast.walk(test)) or any(
            _called(call).startswith("assert") or _called(call) == "raises" for call in calls
        )
        if not (asserts and any(_root(call.func) in imported for call in calls)):
            hollow.append(test.name)
    return hollow


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else ""


def _shape(test: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A test's code as one string: its decorators, arguments and body; its name and docstring left out."""
    body = test.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:] if isinstance(body[0].value.value, str) else body
    parts = [*test.decorator_list, test.args, *body]
    return "\n".join(ast.dump(part) for part in parts)


def _workspace_tests(workspace: Path) -> dict[str, tuple[str, str]]:
    """The workspace's tests by the dump of their code: (test name, file), the first file that holds it."""
    found: dict[str, tuple[str, str]] = {}
    for rel in candidate_files(workspace):  # every test that can be evidence is among them
        if not is_test_file(rel):
            continue
        try:
            tree = parse_python(read_beneath(workspace, PurePosixPath(rel).parts, max_bytes=_READ_LIMIT))
        except (OSError, SyntaxError, ValueError):  # too large (RunFileTooLarge), gone, or not Python
            continue
        for shape, name in _tests(tree).items():
            found.setdefault(shape, (name, rel))
    return found


def borrowed_tests(content: str, workspace: Path) -> list[str]:
    """What of `content`, a test file for the evaluation area, is the workspace's tests', one line each:
    a test whose code is a workspace test's, an import of a workspace test module. None: its own (or it
    does not parse: the write's other notes say so)."""
    try:
        tree = parse_python(content)
    except (SyntaxError, ValueError):
        return []
    theirs = _workspace_tests(workspace)
    said = [
        f"{name} is {theirs[shape][0]} of {theirs[shape][1]}"
        for shape, name in _tests(tree).items()
        if shape in theirs
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            said += [f"it imports {node.module}"] if _is_test_module(node.module or "") else []
        elif isinstance(node, ast.Import):
            said += [f"it imports {alias.name}" for alias in node.names if _is_test_module(alias.name)]
    return list(dict.fromkeys(said))


def _is_test_module(name: str) -> bool:
    last = name.split(".")[-1]
    return last.startswith("test_") or last.endswith("_test")


def test_names(source: str) -> str:
    """A test file told by its tests' names, not its code: what the Evaluator is shown of the
    Specialist's tests when it owes tests of its own (`engine._workspace.outputs_note`)."""
    try:
        names = list(_tests(parse_python(source)).values())
    except (SyntaxError, ValueError):
        return "a test file that does not parse as Python (read_file shows it)"
    listed = ", ".join(names) if names else "none"
    return (
        f"the Specialist's tests, named but not shown, so that yours are your own: {listed} "
        "(read_file shows them)"
    )


def code_faults(rel: str, source: str | bytes, failures: dict[str, str]) -> list[str]:
    """Why the test file `rel` failed on its own code, whatever the code it tests does, one line each.
    `failures`: how its tests failed, test name to pytest's first line (a module that could not be
    collected under ""). Each fault is read from the file's code and confirmed by a failure: it does not
    parse; it reads a name nothing in it binds (a tool's name among them) and a test failed with that
    `NameError`; it asks a module for what the module does not have (`pytest.run_pytest()`: pytest, or
    a standard-library module already loaded here) and a test failed on that attribute; a test asks for
    a fixture nothing defines; a test that failed reads the text of a Python file (`_reads_source`).

    None can be the tested code's doing: a name the tested module defines is still unbound here if the
    file never imports it, and a file that imports `*` binds names no parser sees, so it reads none
    unbound. Seen on the 1.5B model's Evaluator: `run_pytest(...)` called inside a test,
    `pytest.run_pytest()` at module level, a test taking a parameter `obj`; its PARTIAL then sent the
    Specialist to fix a module that was right (held-out roman, top-words, csv-mean)."""
    said = list(failures.values())
    if not said:
        return []
    problem = syntax_problem(rel, source)
    if problem is not None:
        return [problem]
    tree = parse_python(source)
    found = [
        f"{rel} calls {name}, a tool: {_TOOL_CALLS}" if name in _TOOLS else f"{rel} reads {name}, {NOT_BOUND}"
        for name in unbound_names(tree, source)
        if any(f"name '{name}' is not defined" in message for message in said)
    ]
    found += [
        f"{rel} line {line} asks {module} for {name}, which {module} does not have"
        + (f": {_TOOL_CALLS}" if name in _TOOLS else "")
        for line, module, name in _missing_attributes(tree)
        if any(f"has no attribute '{name}'" in message for message in said)
    ]
    found += [
        f"{rel}::{test} takes parameters no fixture provides: a test takes none unless a fixture of that "
        "name is defined"
        for test, message in failures.items()
        if test and FIXTURE_LOOKUP.match(message)
    ]
    failed = {test.rpartition("::")[2].partition("[")[0] for test in failures}
    found += [
        f"{rel}::{test.name} reads the text of {source_file}: what a module's text holds says nothing of "
        "what it does; call its code and assert what the task says it returns"
        for test in _test_defs(tree)
        if test.name in failed and (source_file := _reads_source(test))
    ]
    return found


_READS = frozenset({"open", Tool.READ_FILE, "read_text", "read_bytes", "Path"})


def _reads_source(test: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The Python file whose text `test` reads (`open("m.py")`, `Path("m.py").read_text()`, a `read_file`
    called as Python), or "". The 1.5B model's Evaluator, shown the outputs' text at its phase's start,
    wrote tests asserting `open("words.py").read() == ...` with a copy of it in triple quotes, which
    failed on any other bytes: three times in two held-out runs (`heldout-21` slugify, top-words), each
    time over a module the revise it sent then rewrote."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and _called(node) in _READS:
            for arg in node.args[:1]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.endswith(".py"):
                    return arg.value
    return ""


def _missing_attributes(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, module, name) of each `module.name` read of a module the file imports whole (`import
    pytest`) that the module does not have: pytest's, or a standard-library module's already loaded in
    this process (none is imported for the check but pytest, which every test run imports)."""
    modules = {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if "." not in alias.name
    }
    found: dict[tuple[str, str], int] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            continue
        name = modules.get(node.value.id)
        module = _known_module(name) if name is not None else None
        if name is not None and module is not None and not hasattr(module, node.attr):
            found.setdefault((name, node.attr), node.lineno)
    return [(line, module, name) for (module, name), line in found.items()]


def _known_module(name: str) -> object | None:
    """The module `name`, if it is pytest or a standard-library module this process has loaded."""
    if name == "pytest":
        return importlib.import_module("pytest")
    return sys.modules.get(name) if name in sys.stdlib_module_names else None
