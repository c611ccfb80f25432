"""The ToolAgent: policy, executor and the AutoGen agent that is the only holder of side effects.

Usage::

    policy = Policy.default(settings).with_overrides(task_config.policy)
    executor = ToolExecutor(workspace, settings, policy, checks=task_checks, task_dir=task_dir,
                            on_record=run_events.tool_call,   # every audit record, pushed as decided
                            runner=run_tools)                 # or recorded / replayed: see _runners
    agent = ToolAgent(executor)          # sits beside each role in its phase
    executor.new_cycle()                 # at every cycle start: budgets full again
    ...
    if executor.infrastructure_error:    # after a ToolAgent turn: end the run as ERROR
        ...

`ToolAgent` is imported on first use: the policy format (`PolicyOverrides`) is read by task loading and
`pse validate`, which must not pull in AutoGen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pse.toolagent._approval import ApprovalRule, ApprovalVerdict, Approver, HeldCall
from pse.toolagent._catalog import render_tool_catalog, tool_functions, tool_signatures
from pse.toolagent._decide import Allowed
from pse.toolagent._defaults import DEFAULT_GRANTS
from pse.toolagent._executor import ToolBatch, ToolExecutor
from pse.toolagent._offload import MAX_TOOL_THREADS
from pse.toolagent._overrides import PolicyOverrides, PolicyProblem, ToolOverride, policy_problem
from pse.toolagent._policy import Grant, Policy, PolicyDecision
from pse.toolagent._redact import MIN_SECRET_CHARS, Redactor, settings_secrets
from pse.toolagent._runners import (
    WORKSPACE_TOOLS,
    RecordingToolRunner,
    ReplayingToolRunner,
    ToolRunner,
    run_tools,
)
from pse.toolagent._sandbox import sandbox_for

if TYPE_CHECKING:
    from pse.toolagent._agent import ToolAgent

__all__ = [
    "DEFAULT_GRANTS",
    "MAX_TOOL_THREADS",
    "MIN_SECRET_CHARS",
    "WORKSPACE_TOOLS",
    "Allowed",
    "ApprovalRule",
    "ApprovalVerdict",
    "Approver",
    "Grant",
    "HeldCall",
    "Policy",
    "PolicyDecision",
    "PolicyOverrides",
    "PolicyProblem",
    "RecordingToolRunner",
    "Redactor",
    "ReplayingToolRunner",
    "ToolAgent",
    "ToolBatch",
    "ToolExecutor",
    "ToolOverride",
    "ToolRunner",
    "policy_problem",
    "render_tool_catalog",
    "run_tools",
    "sandbox_for",
    "settings_secrets",
    "tool_functions",
    "tool_signatures",
]


def __getattr__(name: str) -> Any:
    if name in __all__:  # exported but not imported above: the AutoGen agent
        from pse.toolagent import _agent

        return getattr(_agent, name)
    raise AttributeError(f"module 'pse.toolagent' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
