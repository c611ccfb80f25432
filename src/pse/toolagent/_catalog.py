"""The short "your tools" text each role's system prompt carries."""

from __future__ import annotations

from pse.toolagent._policy import Policy
from pse.tools import ToolRegistry, builtin_tools

__all__ = ["render_tool_catalog"]


def render_tool_catalog(role: str, policy: Policy, registry: ToolRegistry | None = None) -> str:
    """List the tools `role` may call (registered ones only), with parameters, mode and budget.

    Example line: `- write_file(path, content) — Create or replace a file ... [read-write, 30/cycle]`.
    Pass the run's registry when it holds more than the built-ins (e.g. search_knowledge).
    """
    registry = registry if registry is not None else builtin_tools()
    lines: list[str] = []
    for tool, mode in policy.tools_for(role):
        spec = registry.get(tool)
        grant = policy.grant(role, tool)
        if spec is None or grant is None:
            continue  # granted but not registered in this run (e.g. no knowledge base): calling it would fail
        where = (
            " (only in your evaluation area: paths start with @evaluation/)"
            if grant.areas == ("evaluation",)
            else ""
        )
        lines.append(f"- {spec.signature.usage()} — {spec.description}{where} [{mode}, {grant.budget}/cycle]")
    if not lines:
        return f"{role} has no tools in this task."
    head = (
        f"Tools {role} may request (write a <tool_calls> block; the ToolAgent answers with <tool_results>; "
        "paths are relative to the workspace):"
    )
    return "\n".join([head, *lines])
