"""The default policy (the README's table) and what a policy can name: roles, tools and their modes.

==================  =========  ==========  =========
tool                Planner    Specialist  Evaluator
==================  =========  ==========  =========
read_file           read-only  read-only   read-only
list_files          read-only  read-only   read-only
write_file          –          read-write  –
bash                read-only  –           read-only
run_pytest          –          –           read-only
run_ruff            –          –           read-only
run_check           –          –           read-only
search_knowledge    read-only  read-only   read-only
==================  =========  ==========  =========

`Vocabulary` is what an override is checked against: a run's policy builds it from its own tools and
grants; `BUILTIN_VOCABULARY` is the same for the built-in tools, which is what a task can use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pse.roles import ROLES, Role
from pse.tools import Mode, Tool, ToolRegistry, builtin_tools

__all__ = ["BUILTIN_VOCABULARY", "DEFAULT_GRANTS", "EVALUATOR_AREAS", "Area", "Vocabulary", "tool_modes"]

_RO: Mode = "read-only"
_RW: Mode = "read-write"
DEFAULT_GRANTS: Mapping[str, Mapping[str, Mode]] = {
    Role.PLANNER: {Tool.READ_FILE: _RO, Tool.LIST_FILES: _RO, Tool.BASH: _RO, Tool.SEARCH_KNOWLEDGE: _RO},
    Role.SPECIALIST: {
        Tool.READ_FILE: _RO,
        Tool.LIST_FILES: _RO,
        Tool.WRITE_FILE: _RW,
        Tool.SEARCH_KNOWLEDGE: _RO,
    },
    Role.EVALUATOR: {
        Tool.READ_FILE: _RO,
        Tool.LIST_FILES: _RO,
        Tool.BASH: _RO,
        Tool.RUN_PYTEST: _RO,
        Tool.RUN_RUFF: _RO,
        Tool.RUN_CHECK: _RO,
        Tool.SEARCH_KNOWLEDGE: _RO,
    },
}
_LATER_TOOLS: Mapping[str, tuple[Mode, ...]] = {Tool.SEARCH_KNOWLEDGE: (_RO,)}
"""Tools the policy knows before their implementation is registered (the knowledge base adds it)."""

Area = Literal["workspace", "evaluation"]
"""Where a grant's paths may point: the run workspace, or the Evaluator's evaluation area."""
EVALUATOR_AREAS: Mapping[str, tuple[Area, ...]] = {
    tool: ("workspace", "evaluation") for tool in (Tool.READ_FILE, Tool.LIST_FILES, Tool.RUN_PYTEST)
}
"""The Evaluator reads its own tests and runs them beside the workspace's (when it has an area)."""


def tool_modes(registry: ToolRegistry) -> dict[str, tuple[Mode, ...]]:
    """Every tool a policy over `registry` knows → the modes it may be granted in, in registry order."""
    modes = {spec.name: spec.modes for spec in registry}
    return {**modes, **{tool: later for tool, later in _LATER_TOOLS.items() if tool not in modes}}


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What policy overrides may name: each role with the tools it holds, each tool with its modes."""

    tool_modes: Mapping[str, tuple[Mode, ...]]
    granted: Mapping[str, frozenset[str]]
    mcp_servers: Mapping[str, tuple[str, ...]] | None = None
    """A run's MCP servers → the tools each offers. None before any server runs (a task being loaded or
    validated): then an `mcp.SERVER.TOOL` name of the right shape passes here, and the task checks that
    it declares the server and that the mode fits it."""


BUILTIN_VOCABULARY = Vocabulary(
    tool_modes(builtin_tools()), {role: frozenset(DEFAULT_GRANTS[role]) for role in ROLES}
)
"""The vocabulary of the default policy over the built-in tools: what a task's `[policy]` may name."""
