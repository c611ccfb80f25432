"""The MCP tables of task.toml checked against each other: the servers against the SDK, the sandbox's
network list and the policy's MCP grants (`TaskConfig` reports what this finds as its own errors)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pse.mcp import INSTALL_HINT, McpServerSpec, sdk_problem, server_modes
from pse.toolagent import PolicyOverrides
from pse.tools import split_mcp_name

__all__ = ["McpProblem", "mcp_problems"]

McpProblem = tuple[tuple[str, ...], str, str]
"""Where in task.toml (a key path), what is wrong, and the fix."""


def mcp_problems(
    mcp: Mapping[str, McpServerSpec], network: Sequence[str], policy: PolicyOverrides
) -> list[McpProblem]:
    """Every problem of the `[mcp.*]` servers, `[sandbox] network` and the policy's MCP grants."""
    found: list[McpProblem] = []

    def problem(loc: tuple[str, ...], message: str, fix: str) -> None:
        found.append((loc, message, fix))

    if mcp and (missing := sdk_problem()) is not None:
        problem(("mcp",), missing, f"install it ({INSTALL_HINT}), or drop the [mcp.*] tables")
    for name in network:
        if name not in mcp:
            problem(("sandbox", "network"), f"no MCP server {name!r}", f"declare [mcp.{name}], or drop it")
        elif not mcp[name].network:
            fix = f"set network = true in [mcp.{name}], or drop it from the list"
            problem(("sandbox", "network"), f"MCP server {name} does not say it needs the network", fix)
    for name, spec in mcp.items():
        if spec.network and name not in network:
            fix = f'allow it with [sandbox] network = ["{name}"], or drop network = true'
            problem(("mcp", name), "the server needs the network and the task does not allow it", fix)
    for role, tool, setting in policy.settings():
        parsed = split_mcp_name(tool)
        if parsed is None:
            continue
        server = mcp.get(parsed[0])
        if server is None:
            declared = ", ".join(mcp) or "none"
            fix = f"declare [mcp.{parsed[0]}] or fix the name; declared: {declared}"
            problem(("policy", role, tool), f"no MCP server {parsed[0]!r} is declared", fix)
        elif setting.mode not in (None, "deny", *server_modes(server)):
            fix = f'use mode "read-only", or give [mcp.{parsed[0]}] workspace = "read-write"'
            problem(
                ("policy", role, tool), f"MCP server {parsed[0]} sees the workspace read-only at most", fix
            )
    return found
