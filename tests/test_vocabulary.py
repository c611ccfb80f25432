"""One source per vocabulary: role and tool names are spelled only in their defining module.

Every other module refers to `pse.roles.Role` / `TOOL_AGENT` and `pse.tools.Tool`. Checked on the
syntax tree: a string literal *equal to* a name is a second spelling; a name inside a longer text (a
message, an example in a docstring) is prose. `__all__` lists hold Python names, not tool names.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pse.roles import TOOL_AGENT, Role
from pse.tools import Tool, builtin_tools

SRC = Path(__file__).resolve().parents[1] / "src" / "pse"
DEFINING = {"roles.py": {*Role, TOOL_AGENT}, "tool_names.py": set(Tool)}
NAMES = {str(name) for names in DEFINING.values() for name in names}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            found.add(id(first.value))
    return found


def _exports(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            found |= {id(n) for n in ast.walk(node.value)}
    return found


def test_role_and_tool_names_are_spelled_once() -> None:
    spelled: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in DEFINING:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree) | _exports(tree)
        for node in ast.walk(tree):
            literal = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            if literal and node.value in NAMES:
                spelled.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert spelled == [], "use pse.roles.Role / TOOL_AGENT or pse.tools.Tool instead:\n" + "\n".join(spelled)


def test_the_vocabularies_are_the_public_names() -> None:
    assert list(Role) == ["Planner", "Specialist", "Evaluator"] and TOOL_AGENT == "ToolAgent"
    assert {spec.name for spec in builtin_tools()} == set(Tool) - {Tool.SEARCH_KNOWLEDGE}
