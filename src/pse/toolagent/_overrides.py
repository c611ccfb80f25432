"""A task's policy overrides (`[policy.ROLE]` of task.toml): one typed model, read the same by every reader.

`TaskConfig.policy` is a `PolicyOverrides`, `pse validate` reports its validation errors, and a run's
`Policy.with_overrides` applies one, so what validate accepts is exactly what a run accepts. The format::

    [policy.Specialist]
    bash = "read-write"                         # a mode: read-only | read-write | deny

    [policy.Evaluator]
    run_pytest = { budget = 5 }                 # a table: mode, budget (calls per cycle, >= 0), or both
    bash = { mode = "read-write", budget = 2 }

    [policy.Specialist.write_file]              # approval: which calls wait for a person (_approval)
    approval = { outside_outputs = true }       # "never" (the default), "always", or a rule table

Roles are spelled as everywhere else (Planner, Specialist, Evaluator): any other spelling is refused with
the right one. Tools and modes are checked against a `Vocabulary` passed as the validation context (a
run's own tools), by default the built-in one. Every problem is raised as a `PydanticCustomError` whose
context holds its fix; `policy_problem` turns one error into the task.toml key, the problem and the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError, PydanticUndefined

from pse.toolagent._approval import approval_problem
from pse.toolagent._defaults import BUILTIN_VOCABULARY, Vocabulary
from pse.tools import MCP_PREFIX, MCP_WILDCARD, split_mcp_name

__all__ = ["MODE_WORDS", "ModeWord", "PolicyOverrides", "PolicyProblem", "ToolOverride", "policy_problem"]

ModeWord = Literal["read-only", "read-write", "deny"]
"""What a task may set a tool to: one of the two grant modes, or no grant at all."""
MODE_WORDS: tuple[str, ...] = get_args(ModeWord)
_SETTING_FIX = (
    'write TOOL = "read-only" (or "read-write", "deny"), or TOOL = { mode = "read-only", budget = 5 }'
)
_POLICY_ERROR = "policy"
"""The error type of every policy problem (its context holds the fix)."""


def _problem(message: str, fix: str) -> PydanticCustomError:
    # The fix comes first: pydantic fills the template key by key, and a message quoting user input that
    # holds "{fix}" must stay as written.
    return PydanticCustomError(_POLICY_ERROR, "{message}", {"fix": fix, "message": message})


def _vocabulary(info: ValidationInfo) -> Vocabulary:
    return info.context if isinstance(info.context, Vocabulary) else BUILTIN_VOCABULARY


def _known_role(name: str, info: ValidationInfo) -> str:
    roles = _vocabulary(info).granted
    if name in roles:
        return name
    spelled = [role for role in roles if role.lower() == name.lower()]
    listed = ", ".join(roles)
    fix = f"write {spelled[0]}: roles are spelled {listed}" if spelled else f"use one of {listed}"
    raise _problem(f"unknown role {name!r}", fix)


def _known_mcp_tool(name: str, vocabulary: Vocabulary) -> str:
    parsed = split_mcp_name(name)
    if parsed is None:
        fix = "write mcp.SERVER.TOOL or mcp.SERVER.* (SERVER as in [mcp.SERVER] of task.toml)"
        raise _problem(f"{name!r} is no MCP tool name", fix)
    if vocabulary.mcp_servers is None:
        return name  # no server runs yet: the task checks the server is declared (TaskConfig)
    server, tool = parsed
    offered = vocabulary.mcp_servers.get(server)
    if offered is None:
        running = ", ".join(vocabulary.mcp_servers) or "none"
        raise _problem(
            f"no MCP server {server!r} runs in this run",
            f"declare [mcp.{server}]; the servers are: {running}",
        )
    near = difflib.get_close_matches(tool, list(offered), n=1, cutoff=0.8)
    listed = f"its tools are {', '.join(offered) or 'none'}"
    what = "no tools" if tool == MCP_WILDCARD else f"no tool {tool!r}"
    raise _problem(
        f"MCP server {server} offers {what}", f"did you mean {near[0]}? {listed}" if near else listed
    )


def _known_tool(name: str, info: ValidationInfo) -> str:
    tools = _vocabulary(info).tool_modes
    if name in tools:
        return name
    if name.startswith(MCP_PREFIX):
        return _known_mcp_tool(name, _vocabulary(info))
    near = difflib.get_close_matches(name, list(tools), n=1, cutoff=0.8)
    listed = f"tools are {', '.join(tools)}"
    raise _problem(f"unknown tool {name!r}", f"did you mean {near[0]}? {listed}" if near else listed)


def _table_of_tools(value: object) -> object:
    if not isinstance(value, Mapping):
        raise _problem(f"a role's overrides are a table of tools, got {value!r}", _SETTING_FIX)
    return value


class ToolOverride(BaseModel):
    """One role's setting for one tool: a mode, a budget, an approval, or several. `tool = "MODE"` is
    `{ mode = "MODE" }`.

    A mode grants the tool (rule `task.ROLE.TOOL`), keeping the budget it had, or denies it; a budget
    alone changes the calls per cycle of a tool the role already holds; an approval says which of its
    calls wait for a person (`pse.toolagent._approval`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ModeWord | None = Field(default=None, description="read-only, read-write, or deny (no grant)")
    budget: int | None = Field(default=None, ge=0, description="calls per cycle, >= 0")
    approval: str | dict[str, Any] | None = Field(
        default=None,
        description="never, always, or a rule table (command, path, outside_outputs, larger_than)",
    )

    @model_validator(mode="before")
    @classmethod
    def _read(cls, value: object) -> object:
        if isinstance(value, str):
            value = {"mode": value}
        if not isinstance(value, Mapping):
            raise _problem(f"a tool's setting is a mode or a table, got {value!r}", _SETTING_FIX)
        unknown = [key for key in value if key not in cls.model_fields]
        if unknown:
            raise _problem(
                f"unknown setting {unknown[0]!r}", "a tool's table takes mode, budget and approval"
            )
        mode, budget = value.get("mode"), value.get("budget")
        if mode is not None and mode not in MODE_WORDS:
            raise _problem(f"unknown mode {mode!r}", f"use one of {', '.join(MODE_WORDS)}")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
            raise _problem(
                f"a budget is a whole number of calls >= 0, got {budget!r}", "write e.g. budget = 5"
            )
        if "approval" in value and (problem := approval_problem(value["approval"])) is not None:
            raise _problem(*problem)
        return value

    @model_validator(mode="after")
    def _meaningful(self) -> ToolOverride:
        if self.mode is None and self.budget is None and self.approval is None:
            raise _problem("an empty table changes nothing", "give a mode, a budget, an approval, or several")
        if self.mode == "deny" and (self.budget is not None or self.approval is not None):
            raise _problem("a denied tool has no budget or approval", "drop them, or grant a mode with them")
        return self


RoleName = Annotated[str, AfterValidator(_known_role)]
ToolName = Annotated[str, AfterValidator(_known_tool)]
RoleOverrides = Annotated[dict[ToolName, ToolOverride], BeforeValidator(_table_of_tools)]


class PolicyOverrides(RootModel[dict[RoleName, RoleOverrides]]):
    """A task's overrides of the default policy: role → tool → `ToolOverride`. Empty changes nothing.

    Validate with `PolicyOverrides.model_validate(data, context=vocabulary)` to check against a run's own
    tools; without a context the built-in tools and the default grants are the vocabulary.
    """

    model_config = ConfigDict(frozen=True)

    root: dict[RoleName, RoleOverrides] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _table_of_roles(cls, value: object) -> object:
        if value is not PydanticUndefined and not isinstance(value, Mapping):  # (no value: the default)
            fix = 'write [policy.Specialist] then bash = "deny"'
            raise _problem(f"the policy is a table of roles, got {value!r}", fix)
        return value

    @model_validator(mode="after")
    def _fits_the_tools(self, info: ValidationInfo) -> PolicyOverrides:
        vocabulary = _vocabulary(info)
        errors: list[InitErrorDetails] = []
        for role, tool, setting in self.settings():
            known = vocabulary.tool_modes.get(tool)  # None: an MCP tool no server offers yet (TaskConfig)
            modes = known or ("read-only",)
            if known is not None and setting.mode not in (None, "deny", *modes):
                message = f"{tool} can be granted {' or '.join(modes)} only, not {setting.mode}"
                problem = _problem(message, f'use mode "{modes[0]}", or "deny"')
            elif setting.mode is None and tool not in vocabulary.granted[role]:
                what = "budget" if setting.budget is not None else "approve"
                extra = f"budget = {setting.budget}" if setting.budget is not None else "approval = …"
                key = f'"{tool}"' if "." in tool else tool
                grant = f'{key} = {{ mode = "{modes[0]}", {extra} }}'
                problem = _problem(f"{role} has no {tool} grant to {what}", f"grant it: {grant}")
            else:
                continue
            errors.append({"type": problem, "loc": (role, tool), "input": setting.model_dump()})
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    def settings(self) -> Iterator[tuple[str, str, ToolOverride]]:
        """Every (role, tool, setting), in the order the task wrote them."""
        for role, tools in self.root.items():
            for tool, setting in tools.items():
                yield role, tool, setting


@dataclass(frozen=True, slots=True)
class PolicyProblem:
    """One policy problem: the task.toml key (`policy.Planner.bash`), what is wrong, what to do."""

    key: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}; {self.fix}"


def policy_problem(error: ErrorDetails, loc: Sequence[int | str] | None = None) -> PolicyProblem:
    """Describe one validation error of a `PolicyOverrides`; `loc` is its location inside the policy
    (default the error's own, as `PolicyOverrides.model_validate` reports it)."""
    where = [str(part) for part in (error["loc"] if loc is None else loc) if part != "[key]"]
    context: dict[str, Any] = dict(error.get("ctx") or {})
    fix = str(context["fix"]) if error["type"] == _POLICY_ERROR else "see the policy format in docs/tools.md"
    return PolicyProblem(".".join(["policy", *where]), error["msg"], fix)
