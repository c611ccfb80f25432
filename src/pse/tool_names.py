"""The names of the tools: the one place they are spelled (prompts, cassettes and policies use them).

The module sits at the top of the package (it imports nothing of PSE) so the protocol layer, below
`pse.tools`, spells a tool by the same names.

Tools of an MCP server are named at run time: `mcp.SERVER.TOOL` (`mcp_tool_name`), and a policy may
grant every tool of a server with `mcp.SERVER.*` (`MCP_NAME`, `split_mcp_name`).
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = [
    "BUILTIN_CHECKS",
    "MCP_NAME",
    "MCP_PREFIX",
    "MCP_SERVER_NAME",
    "MCP_TOOL_NAME",
    "MCP_WILDCARD",
    "Tool",
    "check_tool",
    "mcp_tool_name",
    "split_mcp_name",
]


class Tool(StrEnum):
    """A tool a role may request. A `StrEnum`: a member equals its name as a string."""

    READ_FILE = "read_file"
    LIST_FILES = "list_files"
    WRITE_FILE = "write_file"
    BASH = "bash"
    RUN_PYTEST = "run_pytest"
    RUN_RUFF = "run_ruff"
    RUN_CHECK = "run_check"
    SEARCH_KNOWLEDGE = "search_knowledge"
    """Registered by the knowledge base when the task has a `knowledge/` folder."""


BUILTIN_CHECKS: dict[str, Tool] = {"pytest": Tool.RUN_PYTEST, "ruff": Tool.RUN_RUFF}
"""Required-check names served by a built-in tool; any other name is a check the task declares."""


def check_tool(check: str) -> Tool:
    """The tool the Evaluator runs a required check with: run_pytest, run_ruff, or run_check(name)."""
    return BUILTIN_CHECKS.get(check, Tool.RUN_CHECK)


MCP_PREFIX = "mcp."
"""Every tool of an MCP server is named `mcp.SERVER.TOOL`."""
MCP_WILDCARD = "*"
"""`mcp.SERVER.*` in a policy: every tool the server offers."""
MCP_SERVER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
"""A server's name in task.toml (`[mcp.NAME]`): no dot, so a tool name splits one way."""
MCP_TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""A tool name a server may offer; any other is not offered (it could not be written in a request)."""
MCP_NAME = re.compile(
    rf"{re.escape(MCP_PREFIX)}(?P<server>{MCP_SERVER_NAME.pattern})\.(?P<tool>\*|{MCP_TOOL_NAME.pattern})"
)
"""A policy key for MCP tools: `mcp.SERVER.TOOL` or `mcp.SERVER.*`."""


def mcp_tool_name(server: str, tool: str) -> str:
    """The name roles call a server's tool by: `mcp.SERVER.TOOL`."""
    return f"{MCP_PREFIX}{server}.{tool}"


def split_mcp_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of `mcp.SERVER.TOOL` (tool `*` for a wildcard), or None for any other name."""
    found = MCP_NAME.fullmatch(name)
    return (found["server"], found["tool"]) if found else None
