"""The per-role tool policy: which role may call which tool, in which mode, how often per cycle.

Enforced in code by the executor, never by a prompt. The default table (ARCHITECTURE.md):

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

A task narrows or widens it with a plain dict (see `Policy.with_overrides`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.roles import ROLES, Role
from pse.tools import Mode, Tool, ToolRegistry, builtin_tools

__all__ = ["DEFAULT_GRANTS", "Area", "Grant", "Policy", "PolicyDecision"]

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
_MODE_WORDS = ("read-only", "read-write", "deny")


Area = Literal["workspace", "evaluation"]
"""Where a grant's paths may point: the run workspace, or the Evaluator's evaluation area."""
_EVALUATOR_AREAS: dict[str, tuple[Area, ...]] = {
    tool: ("workspace", "evaluation") for tool in (Tool.READ_FILE, Tool.LIST_FILES, Tool.RUN_PYTEST)
}
"""The Evaluator reads its own tests and runs them beside the workspace's (when it has an area)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """One role's right to one tool. `rule` names where it came from (`roles.X.t` or `task.X.t`);
    `areas` where its paths may point (a read-write mode applies to each of them)."""

    mode: Mode
    budget: int
    rule: str
    areas: tuple[Area, ...] = ("workspace",)


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """Whether a role may call a tool, and the rule that decided (recorded in the audit)."""

    allowed: bool
    rule: str
    grant: Grant | None = None


class Policy:
    """Grants per role and tool; immutable (overrides return a new policy).

    Args:
        grants: role → tool → grant.
        tool_modes: every tool the policy knows → the modes it may be granted in.
        default_budget: calls per cycle of a grant a task adds.
        denied: role → tools a task denied explicitly (their denials cite `task.ROLE.TOOL`).
    """

    def __init__(
        self,
        grants: Mapping[str, Mapping[str, Grant]],
        tool_modes: Mapping[str, tuple[Mode, ...]],
        default_budget: int,
        denied: Mapping[str, set[str]] | None = None,
    ) -> None:
        self._grants = {role: dict(tools) for role, tools in grants.items()}
        self._tool_modes = dict(tool_modes)
        self._default_budget = default_budget
        self._denied = {role: set((denied or {}).get(role, set())) for role in grants}

    @classmethod
    def default(cls, settings: Settings, registry: ToolRegistry | None = None) -> Policy:
        """The ARCHITECTURE.md table, each grant budgeted `settings.tool_calls_per_cycle` calls per cycle."""
        tools = registry if registry is not None else builtin_tools()
        tool_modes = {**_LATER_TOOLS, **{spec.name: spec.modes for spec in tools}}
        budget = settings.tool_calls_per_cycle
        grants: dict[str, dict[str, Grant]] = {
            role: {
                tool: Grant(
                    mode,
                    budget,
                    f"roles.{role}.{tool}",
                    _EVALUATOR_AREAS.get(tool, ("workspace",)) if role == Role.EVALUATOR else ("workspace",),
                )
                for tool, mode in DEFAULT_GRANTS[role].items()
            }
            for role in ROLES
        }
        return cls(grants, tool_modes, budget)

    def with_independent_tests(self) -> Policy:
        """A copy where the Evaluator may also write files, in its evaluation area only (its own tests)."""
        grants = {role: dict(tools) for role, tools in self._grants.items()}
        grants[Role.EVALUATOR][Tool.WRITE_FILE] = Grant(
            "read-write", self._default_budget, "verification.independent_tests", ("evaluation",)
        )
        return Policy(grants, self._tool_modes, self._default_budget, self._denied)

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> Policy:
        """A copy with a task's overrides applied. The format (all keys optional)::

            {
                "Planner": {"bash": "deny"},                 # role → tool → read-only | read-write | deny
                "Specialist": {"bash": "read-write"},
                "budgets": {"Evaluator": {"run_pytest": 5}},  # role → tool → calls per cycle (>= 0)
            }

        A new grant gets the default budget of the role's other grants (Settings.tool_calls_per_cycle).

        Raises:
            ConfigError: an unknown role, tool or mode, a budget that is not a whole number >= 0, or a
                budget for a tool the role is not granted; the message names the offending key.
        """
        if not overrides:
            return self
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"tool policy overrides must be a table/dict, got {type(overrides).__name__}")
        grants = {role: dict(tools) for role, tools in self._grants.items()}
        denied = {role: set(names) for role, names in self._denied.items()}
        for key, value in overrides.items():
            if key == "budgets":
                continue
            role = self._check_role(key, f"tools.{key}")
            if not isinstance(value, Mapping):
                raise ConfigError(f"tools.{key} must map tool names to modes, got {value!r}")
            for tool, mode in value.items():
                where = f"tools.{key}.{tool}"
                self._check_tool(tool, where)
                if mode not in _MODE_WORDS:
                    raise ConfigError(f"{where}: unknown mode {mode!r}; use one of {', '.join(_MODE_WORDS)}")
                if mode == "deny":
                    grants[role].pop(tool, None)
                    denied[role].add(tool)
                    continue
                if mode not in self._tool_modes[tool]:
                    allowed = " or ".join(self._tool_modes[tool])
                    raise ConfigError(f"{where}: {tool} can be granted {allowed} only (or deny), not {mode}")
                old = grants[role].get(tool)
                grants[role][tool] = Grant(
                    mode,
                    old.budget if old else self._default_budget,
                    f"task.{role}.{tool}",
                    old.areas if old else ("workspace",),
                )
                denied[role].discard(tool)
        budgets = overrides.get("budgets", {})
        if not isinstance(budgets, Mapping):
            raise ConfigError(f"tools.budgets must map roles to {{tool: calls}}, got {budgets!r}")
        for key, value in budgets.items():
            role = self._check_role(key, f"tools.budgets.{key}")
            if not isinstance(value, Mapping):
                raise ConfigError(f"tools.budgets.{key} must map tool names to call counts, got {value!r}")
            for tool, count in value.items():
                where = f"tools.budgets.{key}.{tool}"
                self._check_tool(tool, where)
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    raise ConfigError(f"{where}: a budget is a whole number of calls >= 0, got {count!r}")
                if tool not in grants[role]:
                    raise ConfigError(f"{where}: {role} has no {tool} grant to budget; grant it first")
                grants[role][tool] = replace(grants[role][tool], budget=count)
        return Policy(grants, self._tool_modes, self._default_budget, denied)

    def decide(self, role: str, tool: str) -> PolicyDecision:
        """May `role` call `tool`? (Budgets are counted by the executor, per cycle.)"""
        if role not in self._grants:
            return PolicyDecision(False, "policy.unknown_requester")
        grant = self._grants[role].get(tool)
        if grant is not None:
            return PolicyDecision(True, grant.rule, grant)
        if tool in self._denied.get(role, set()):
            return PolicyDecision(False, f"task.{role}.{tool}")
        return PolicyDecision(False, "policy.default_deny")

    def tools_for(self, role: str) -> list[tuple[str, Mode]]:
        """The tools `role` may call with their modes, in table order (for its system prompt)."""
        return [(tool, grant.mode) for tool, grant in self._grants.get(role, {}).items()]

    def grant(self, role: str, tool: str) -> Grant | None:
        """The grant of `role` for `tool`, if any."""
        return self._grants.get(role, {}).get(tool)

    def as_table(self) -> dict[str, dict[str, str]]:
        """role → tool → "mode (budget N)", for traces and docs."""
        return {
            role: {tool: f"{g.mode} (budget {g.budget})" for tool, g in tools.items()}
            for role, tools in self._grants.items()
        }

    def _check_role(self, key: object, where: str) -> str:
        if key not in self._grants:
            raise ConfigError(f"{where}: unknown role {key!r}; roles are {', '.join(self._grants)}")
        return str(key)

    def _check_tool(self, tool: object, where: str) -> None:
        if tool not in self._tool_modes:
            raise ConfigError(
                f"{where}: unknown tool {tool!r}; tools are {', '.join(sorted(self._tool_modes))}"
            )
