"""No two modules of PSE import each other, not even through a function-local import (issue 30, item 7):
a circle means two rooms share a job, and the second import is a workaround that hides it."""

from __future__ import annotations

import ast
from pathlib import Path

import pse

ROOT = Path(pse.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every PSE module `path` imports, wherever the import stands (module level, function, TYPE_CHECKING)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pse":
            out |= {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
            out |= {node.module} & modules.keys()
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & modules.keys()
    return out


def test_no_two_modules_import_each_other() -> None:
    modules = _modules()
    edges = {name: _imports(path, modules) for name, path in modules.items()}
    circles = sorted(
        f"{a} <-> {b}"
        for a, targets in edges.items()
        for b in targets
        if a < b
        and a in edges[b]
        and not (modules[a].name == "__init__.py" or modules[b].name == "__init__.py")
    )
    assert circles == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from pse.engine._decide import decide\n    return decide\n")
    assert _imports(module, _modules()) == {"pse.engine._decide"}


def _package(module: str) -> str:
    """The package a module belongs to: `pse.cli._serve` → `cli`; a top-level module is its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else module


def test_no_package_reaches_itself_through_others() -> None:
    """A circle of packages (`cli` → `web` → `cli`) is two rooms sharing a job too, only further apart."""
    modules = _modules()
    reaches: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {_package(t) for t in _imports(path, modules)} - {_package(name)}
        reaches.setdefault(_package(name), set()).update(targets)
    circles = []
    for start in sorted(reaches):
        seen, todo = set(), list(reaches[start])
        while todo:
            package = todo.pop()
            if package not in seen:
                seen.add(package)
                todo += reaches.get(package, set())
        if start in seen:
            circles.append(start)
    assert circles == []
    assert {"cli", "web", "engine"} <= reaches.keys() and "web" in reaches["cli"]  # the graph is the real one
