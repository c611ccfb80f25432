"""The decision step: read one message and decide each request before anything runs.

A request is refused here when the protocol cannot read it (`protocol.<kind>`), the policy denies it
(`policy.*`, `task.ROLE.TOOL`), its per-cycle budget is spent (`budget.ROLE.TOOL`) or it would write a
check-configuration file the task did not declare (`protect.check_config`), change a file the task
seeded (`protect.input`), or, on a repository run, change one of the repository's protected tests
(`protect.tests`) or write a `.git` path (`protect.vcs`). Every other request becomes
an `Allowed` step and has taken one call of its budget.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol, TypedDict

from pse.config import Settings
from pse.events import ToolCallRecord
from pse.exceptions import SandboxViolation
from pse.protocol import DsmlError, ToolCall, parse_tool_calls, truncate_text
from pse.sandbox import Accept
from pse.toolagent._approval import ApprovalRule
from pse.toolagent._policy import Grant, Policy
from pse.toolagent._provenance import INPUT_REASON, TESTS_REASON, TESTS_RULE, VCS_REASON, VCS_RULE
from pse.tools import Tool, ToolContext, ToolRegistry, ToolSpec, check_config_reason, resolve_path

__all__ = [
    "INPUT_RULE",
    "PROTECT_RULE",
    "RECORD_ARGUMENT_CHARS",
    "TESTS_RULE",
    "VCS_RULE",
    "Allowed",
    "Decider",
    "Request",
    "Step",
    "request_of",
]

PROTECT_RULE = "protect.check_config"
"""The rule that denies writing a check-configuration file the task did not declare."""
INPUT_RULE = "protect.input"
"""The rule that denies changing a file the task seeded (its inputs and visible tests are evidence)."""
RECORD_ARGUMENT_CHARS = 4000
"""Audit records keep each argument up to this many characters (written files are in the workspace)."""
NO_TOOL_CALLS_MESSAGE = (
    "your message was routed to the ToolAgent but holds no <tool_calls> block, so nothing was run. "
    'Request tools like this: <tool_calls><invoke name="read_file"><parameter name="path">README.md'
    "</parameter></invoke></tool_calls>"
)


class Request(TypedDict):
    """Who asked for what: the fields every audit record of a request starts with."""

    requester: str
    tool: str
    arguments: dict[str, str]
    index: int


def request_of(requester: str, tool: str, arguments: Mapping[str, str], index: int) -> Request:
    """The request's audit fields, each argument capped at `RECORD_ARGUMENT_CHARS`."""
    kept = {name: truncate_text(value, RECORD_ARGUMENT_CHARS)[0] for name, value in arguments.items()}
    return Request(requester=requester, tool=tool, arguments=kept, index=index)


@dataclass(frozen=True, slots=True)
class Allowed:
    """A request the decision step let through, ready to run."""

    request: Request
    call: ToolCall
    spec: ToolSpec
    context: ToolContext
    rule: str
    approval: ApprovalRule | None = None
    """When the grant holds some of its calls for a person (the executor asks it)."""
    scope: str = ""
    """The step of a steps plan whose message holds the call ("" outside step mode)."""


class Scope(Protocol):
    """The step of a steps plan a message belongs to (`pse.engine.StepScope`): its own budgets and, for
    its Specialist, the only paths it may write (None: not narrowed)."""

    @property
    def step(self) -> str: ...

    @property
    def outputs(self) -> frozenset[str] | None: ...


SCOPE_RULE = "steps.outputs"
"""The rule that denies a step's Specialist a write outside its step's declared outputs."""

Step = Allowed | ToolCallRecord
"""One request after the decision step: allowed and waiting to run, or already settled by its record."""


class Decider:
    """Decides the requests of one run against its policy, and counts each role's calls per cycle.

    Args:
        policy: who may call what, how often.
        registry: the tools the parser knows.
        settings: the parser's limits (invokes per message, bytes per parameter).
        context_for: what a call under a grant may use (its workspace, area, writability).
        accept: the rule for every write (None, or why the path may not be written).
    """

    def __init__(
        self,
        policy: Policy,
        registry: ToolRegistry,
        settings: Settings,
        context_for: Callable[[Grant], ToolContext],
        accept: Accept,
    ) -> None:
        self._policy = policy
        self._registry = registry
        self._settings = settings
        self._context_for = context_for
        self._accept = accept
        self._used: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()  # steps decide their messages at the same time

    def new_cycle(self) -> None:
        """Every role's per-tool budget is full again."""
        self._used.clear()

    def give_back(self, step: Allowed) -> None:
        """An allowed call that was not run does not count against its budget."""
        with self._lock:
            self._used[(step.request["requester"], step.scope, step.request["tool"])] -= 1

    def decide(self, requester: str, text: str, scope: Scope | None = None) -> list[Step]:
        """Every request of `requester`'s message, in order, allowed or settled (a step's message: under
        its scope, with budgets of its own)."""
        with self._lock:
            return self._decide(requester, text, scope)

    def _decide(self, requester: str, text: str, scope: Scope | None) -> list[Step]:
        parsed = parse_tool_calls(
            text,
            self._registry.signatures(),
            max_invokes=self._settings.max_invokes_per_message,
            max_value_bytes=self._settings.max_parameter_bytes,
        )
        if not parsed.found_block:
            request = request_of(requester, "(none)", {}, 1)
            return [
                ToolCallRecord.malformed(
                    **request, rule="protocol.no_tool_calls", problem=NO_TOOL_CALLS_MESSAGE
                )
            ]
        steps: list[Step] = []
        for item in parsed.items:
            if isinstance(item, DsmlError):
                request = request_of(requester, item.name or "(parse)", item.arguments, item.index)
                steps.append(
                    ToolCallRecord.malformed(**request, rule=f"protocol.{item.kind}", problem=item.message)
                )
            else:
                steps.append(self._decide_call(requester, item, scope))
        return steps

    def _decide_call(self, requester: str, call: ToolCall, scope: Scope | None = None) -> Step:
        request = request_of(requester, call.name, call.arguments, call.index)
        decision = self._policy.decide(requester, call.name)
        if not decision.allowed or decision.grant is None:
            why = f"{requester} may not call {call.name} (policy: {decision.rule})"
            return ToolCallRecord.denied(**request, rule=decision.rule, reason=why)
        key = (requester, scope.step if scope is not None else "", call.name)
        if self._used[key] >= decision.grant.budget:
            rule = f"budget.{requester}.{call.name}"
            why = (
                f"{requester} has used all {decision.grant.budget} {call.name} calls of this cycle "
                f"(policy: {rule}); work with the results you have"
            )
            return ToolCallRecord.denied(**request, rule=rule, reason=why)
        context = self._context_for(decision.grant)
        if scope is not None and scope.outputs is not None:
            context = replace(context, accept=_within(scope, context.accept))
        refusal = self._write_refusal(context, call) if call.name == Tool.WRITE_FILE else None
        if refusal is not None:
            named = (SCOPE_RULE, INPUT_RULE, TESTS_RULE, VCS_RULE)
            rule = next((r for r in named if f"(policy: {r})" in refusal), PROTECT_RULE)
            return ToolCallRecord.denied(**request, rule=rule, reason=refusal)
        self._used[key] += 1
        spec = self._registry.get(call.name)
        assert spec is not None  # the parser only lets registered tools through
        return Allowed(
            request, call, spec, context, decision.rule, decision.grant.approval, scope.step if scope else ""
        )

    def _write_refusal(self, context: ToolContext, call: ToolCall) -> str | None:
        """Why a write_file request is refused before it runs (a check-configuration file), if it is."""
        path = call.arguments.get("path", "")
        try:
            area, real, root = resolve_path(context, path)
        except SandboxViolation:
            return None  # the tool itself answers a bad path, with its own message
        rel = real.relative_to(root).as_posix()
        accept = context.accept or self._accept
        reason = accept(rel) if area == "workspace" else check_config_reason(rel)
        if reason is None:
            return None
        prefixes = [("step ", SCOPE_RULE), (INPUT_REASON, INPUT_RULE), (TESTS_REASON, TESTS_RULE)]
        prefixes.append((VCS_REASON, VCS_RULE))
        rule = next((r for prefix, r in prefixes if reason.startswith(prefix)), PROTECT_RULE)
        named = "" if f"(policy: {rule})" in reason else f" (policy: {rule})"  # repository rules name theirs
        return f"{path.strip()} may not be written: {reason}{named}"


def _within(scope: Scope, accept: Accept | None) -> Accept:
    """`accept`, and refuse any path that is not one of the step's outputs."""
    outputs = scope.outputs or frozenset()

    def check(path: str) -> str | None:
        if path not in outputs:
            allowed = ", ".join(sorted(outputs)) or "none"
            return f"step {scope.step} may write only its outputs ({allowed})"
        return accept(path) if accept is not None else None

    return check
