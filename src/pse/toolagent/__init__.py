"""The ToolAgent: policy, executor and the AutoGen agent that is the only holder of side effects.

Usage::

    policy = Policy.default(settings).with_overrides(task_config.get("tools"))
    executor = ToolExecutor(workspace, settings, policy, checks=task_checks, task_dir=task_dir,
                            on_record=trace.add_tool_call)
    agent = ToolAgent(executor)          # sits in the group chat
    executor.new_cycle()                 # at every cycle start: budgets full again
    ...
    if executor.infrastructure_error:    # after the team returns: end the run as ERROR
        ...
"""

from pse.toolagent._agent import ToolAgent
from pse.toolagent._catalog import render_tool_catalog
from pse.toolagent._executor import MAX_TOOL_THREADS, ToolBatch, ToolExecutor
from pse.toolagent._policy import DEFAULT_GRANTS, Grant, Policy, PolicyDecision

__all__ = [
    "DEFAULT_GRANTS",
    "MAX_TOOL_THREADS",
    "Grant",
    "Policy",
    "PolicyDecision",
    "ToolAgent",
    "ToolBatch",
    "ToolExecutor",
    "render_tool_catalog",
]
