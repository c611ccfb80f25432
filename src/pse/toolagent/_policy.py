"""The per-role tool policy: which role may call which tool, in which mode, how often per cycle.

Enforced in code by the executor, never by a prompt. `Policy.default` is the README's policy table
(`pse.toolagent._defaults`); a task narrows or widens it with `PolicyOverrides` (`Policy.with_overrides`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.roles import ROLES, Role
from pse.toolagent._approval import ApprovalRule, parse_approval
from pse.toolagent._defaults import DEFAULT_GRANTS, EVALUATOR_AREAS, Area, Vocabulary, tool_modes
from pse.toolagent._overrides import PolicyOverrides, policy_problem
from pse.tools import MCP_WILDCARD, Mode, Tool, ToolRegistry, builtin_tools, split_mcp_name

__all__ = ["Grant", "Policy", "PolicyDecision"]


@dataclass(frozen=True, slots=True)
class Grant:
    """One role's right to one tool. `rule` names where it came from (`roles.X.t` or `task.X.t`);
    `areas` where its paths may point (a read-write mode applies to each of them); `approval` which
    of its calls wait for a person (None: none do)."""

    mode: Mode
    budget: int
    rule: str
    areas: tuple[Area, ...] = ("workspace",)
    approval: ApprovalRule | None = None


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
        """The README's policy table, each grant budgeted `settings.tool_calls_per_cycle` calls per cycle."""
        budget = settings.tool_calls_per_cycle
        grants: dict[str, dict[str, Grant]] = {
            role: {
                tool: Grant(
                    mode,
                    budget,
                    f"roles.{role}.{tool}",
                    EVALUATOR_AREAS.get(tool, ("workspace",)) if role == Role.EVALUATOR else ("workspace",),
                )
                for tool, mode in DEFAULT_GRANTS[role].items()
            }
            for role in ROLES
        }
        return cls(grants, tool_modes(registry if registry is not None else builtin_tools()), budget)

    def with_independent_tests(self) -> Policy:
        """A copy where the Evaluator may also write files, in its evaluation area only (its own tests)."""
        grants = {role: dict(tools) for role, tools in self._grants.items()}
        grants[Role.EVALUATOR][Tool.WRITE_FILE] = Grant(
            "read-write", self._default_budget, "verification.independent_tests", ("evaluation",)
        )
        return Policy(grants, self._tool_modes, self._default_budget, self._denied)

    def with_seat(self, name: str, roles: Sequence[str]) -> Policy:
        """A copy with one more requester, `name`, granted the union of `roles`' tools (the read-write
        mode wins; the larger budget), in the workspace only: a seat that does those roles' work (the
        `single` baseline's Agent, `RoleSpec.borrows`). Each grant keeps the rule it came from, so its
        audit says which."""
        grants = {role: dict(tools) for role, tools in self._grants.items()}
        union: dict[str, Grant] = {}
        for role in roles:
            for tool, grant in self._grants.get(role, {}).items():
                old = union.get(tool)
                if old is None or (grant.mode == "read-write" and old.mode != "read-write"):
                    union[tool] = replace(
                        grant, areas=("workspace",), budget=max(grant.budget, old.budget if old else 0)
                    )
                else:
                    union[tool] = replace(old, budget=max(old.budget, grant.budget))
        grants[name] = union
        return Policy(grants, self._tool_modes, self._default_budget, self._denied)

    def with_overrides(self, overrides: PolicyOverrides | Mapping[str, Any] | None) -> Policy:
        """A copy with a task's overrides applied (the format: `PolicyOverrides`, docs/tools.md).

        A mode grants a tool (rule `task.ROLE.TOOL`) with the budget it had, else the default budget
        (Settings.tool_calls_per_cycle), or denies it; a budget sets its calls per cycle.

        Raises:
            ConfigError: the overrides do not fit this policy's roles and tools; one line per problem,
                each naming its task.toml key and the fix.
        """
        if overrides is None:
            return self
        # A task's overrides were checked against the built-in tools when it was loaded; check them
        # against this policy's own (its registry may hold more), with the same model.
        data = (
            overrides.model_dump(exclude_none=True) if isinstance(overrides, PolicyOverrides) else overrides
        )
        data, origins = self._expand_wildcards(data)
        try:
            checked = PolicyOverrides.model_validate(data, context=self._vocabulary())
        except ValidationError as exc:
            raise ConfigError("\n".join(str(policy_problem(error)) for error in exc.errors())) from None
        if not checked.root:
            return self
        grants = {role: dict(tools) for role, tools in self._grants.items()}
        denied = {role: set(names) for role, names in self._denied.items()}
        for role, tool, setting in checked.settings():
            old = grants[role].get(tool)
            approval = old.approval if old else None
            if setting.approval is not None:
                approval = parse_approval(setting.approval)
            if setting.mode == "deny":
                grants[role].pop(tool, None)
                denied[role].add(tool)
            elif setting.mode is None:
                assert old is not None  # validated: a budget or an approval of a grant
                kept = setting.budget if setting.budget is not None else old.budget
                grants[role][tool] = replace(old, budget=kept, approval=approval)
            else:
                budget = setting.budget if setting.budget is not None else old.budget if old else None
                grants[role][tool] = Grant(
                    setting.mode,
                    self._default_budget if budget is None else budget,
                    f"task.{role}.{origins.get((role, tool), tool)}",
                    old.areas if old else ("workspace",),
                    approval,
                )
                denied[role].discard(tool)
        return Policy(grants, self._tool_modes, self._default_budget, denied)

    def _mcp_servers(self) -> dict[str, tuple[str, ...]]:
        """Each MCP server of this policy's tools → the tools it offers (`mcp.SERVER.TOOL` names)."""
        servers: dict[str, list[str]] = {}
        for name in self._tool_modes:
            parsed = split_mcp_name(name)
            if parsed is not None:
                servers.setdefault(parsed[0], []).append(parsed[1])
        return {server: tuple(tools) for server, tools in servers.items()}

    def _expand_wildcards(self, data: Any) -> tuple[Any, dict[tuple[str, str], str]]:
        """`mcp.SERVER.*` of each role as one entry per tool the server offers, where the role names no
        such tool itself (a tool named on its own line wins over the wildcard, whatever the order); and
        which key each expanded tool came from (its grant's rule cites the wildcard)."""
        servers = self._mcp_servers()
        if not servers or not isinstance(data, Mapping):
            return data, {}
        origins: dict[tuple[str, str], str] = {}
        expanded: dict[str, Any] = {}
        for role, table in data.items():
            if not isinstance(table, Mapping):
                expanded[role] = table
                continue
            named = set(table)
            out: dict[str, Any] = {}
            for key, setting in table.items():
                parsed = split_mcp_name(str(key))
                if parsed is None or parsed[1] != MCP_WILDCARD or parsed[0] not in servers:
                    out[key] = setting
                    continue
                for tool in servers[parsed[0]]:
                    name = f"{key[: -len(MCP_WILDCARD)]}{tool}"
                    if name not in named:
                        out[name] = setting
                        origins[(role, name)] = key
            expanded[role] = out
        return expanded, origins

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

    def with_human_grants(self, grants: Iterable[tuple[str, str, str]]) -> Policy:
        """A copy with a person's widenings (role, tool, mode) for one run, each audited as
        `human.ROLE.TOOL` (see `pse answer --grant`)."""
        table = {role: dict(tools) for role, tools in self._grants.items()}
        denied = {role: set(names) for role, names in self._denied.items()}
        for role, tool, mode in grants:
            old = table.setdefault(role, {}).get(tool)
            table[role][tool] = Grant(
                mode,  # type: ignore[arg-type]  # checked against modes_of when the answer was given
                old.budget if old else self._default_budget,
                f"human.{role}.{tool}",
                old.areas if old else ("workspace",),
                old.approval if old else None,  # a widening does not waive the approvals of the grant
            )
            denied.setdefault(role, set()).discard(tool)
        return Policy(table, self._tool_modes, self._default_budget, denied)

    def modes_of(self, tool: str) -> tuple[Mode, ...] | None:
        """The modes `tool` may be granted in, or None for a tool this policy does not know."""
        return self._tool_modes.get(tool)

    def tool_names(self) -> list[str]:
        """Every tool this policy knows."""
        return list(self._tool_modes)

    def tools_for(self, role: str) -> list[tuple[str, Mode]]:
        """The tools `role` may call with their modes, in table order (for its system prompt)."""
        return [(tool, grant.mode) for tool, grant in self._grants.get(role, {}).items()]

    def grant(self, role: str, tool: str) -> Grant | None:
        """The grant of `role` for `tool`, if any."""
        return self._grants.get(role, {}).get(tool)

    def _vocabulary(self) -> Vocabulary:
        granted = {role: frozenset(tools) for role, tools in self._grants.items()}
        return Vocabulary(self._tool_modes, granted, self._mcp_servers())
