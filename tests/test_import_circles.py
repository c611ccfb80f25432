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
