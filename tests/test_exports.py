"""Every public package and module of `pse` exports exactly its public names, in both directions.

"Public" is what a reader of the source would take for it: a name without a leading underscore that
the module defines (a class, a function, an assignment) or, in a package's `__init__`, re-exports from
the package's own modules (type-checking-only imports included: `pse` resolves those lazily).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import pse


def _public_modules() -> list[str]:
    found = pkgutil.walk_packages(pse.__path__, "pse.")
    return [
        "pse",
        *sorted(m.name for m in found if not any(part.startswith("_") for part in m.name.split("."))),
    ]


def _defined(name: str) -> set[str]:
    module = importlib.import_module(name)
    path = Path(str(module.__file__))
    package = name if path.name == "__init__.py" else None
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.ImportFrom) and package is not None:
                source = node.module or ""
                if node.level > 0 or source == package or source.startswith(f"{package}."):
                    names.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {n for n in names if not n.startswith("_")}


def test_the_public_packages_are_found() -> None:
    modules = _public_modules()
    assert {"pse", "pse.engine", "pse.tasks", "pse.web", "pse.config", "pse.exceptions"} <= set(modules)
    assert not [m for m in modules if "._" in m]


@pytest.mark.parametrize("name", _public_modules())
def test_all_is_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(exported) == len(set(exported)), f"duplicate names in {name}.__all__"
    absent = [n for n in exported if not hasattr(module, n)]
    assert not absent, f"{name}.__all__ names {absent}, which do not exist"
    unlisted = sorted(_defined(name) - set(exported))
    assert not unlisted, f"{name} defines {unlisted} without a leading underscore but not in __all__"


def test_the_top_level_exports_the_run_api_every_exception_and_every_event() -> None:
    import pse.events
    import pse.exceptions

    assert {"run", "arun", "RunSummary", "Settings", "load_settings"} <= set(pse.__all__)
    assert set(pse.exceptions.__all__) <= set(pse.__all__)
    events = {n for n in pse.events.__all__ if n == "Event" or n.endswith("Event") or n == "CycleStarted"}
    assert len(events) == 9 and events <= set(pse.__all__)
    for name in pse.exceptions.__all__:
        assert getattr(pse, name) is getattr(pse.exceptions, name)
    assert pse.ToolCallEvent is pse.events.ToolCallEvent
