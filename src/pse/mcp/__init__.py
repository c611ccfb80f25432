"""MCP servers as governed tools: stdio servers a task declares, run in the sandbox, called by the ToolAgent.

A task declares servers in `task.toml` (`[mcp.NAME]`, `McpServerSpec`); a run starts each one inside its
sandbox (`McpServers.start`: the same mode, identity, limits and scrubbed environment as tool
commands), lists its tools and registers them as `mcp.NAME.TOOL` in the run's `ToolRegistry`. From there
they are tools like any other: a role is offered only those its policy grants (`mcp.NAME.TOOL` or
`mcp.NAME.*`, none by default), and every call goes through the ToolAgent's policy, budget, approval,
audit and trace. docs/tools.md#mcp-tools has the format, docs/security.md what the sandbox gives a server.

The official MCP SDK (`pip install 'pse[mcp]'`) is imported only when a server starts, so this package
imports without it; `sdk_problem()` says whether it is there.
"""

from pse.mcp._config import (
    INSTALL_HINT,
    PLACEHOLDERS,
    McpServerSpec,
    expand_command,
    sdk_problem,
    server_name_problem,
)
from pse.mcp._connection import MAX_MESSAGE_BYTES, MAX_TOOLS, START_TIMEOUT_S, CallAnswer, McpConnection
from pse.mcp._schema import DESCRIPTION_CHARS, MAX_PARAMS, McpParam, convert, quoted, read_schema
from pse.mcp._servers import McpServers, server_modes

__all__ = [
    "DESCRIPTION_CHARS",
    "INSTALL_HINT",
    "MAX_MESSAGE_BYTES",
    "MAX_PARAMS",
    "MAX_TOOLS",
    "PLACEHOLDERS",
    "START_TIMEOUT_S",
    "CallAnswer",
    "McpConnection",
    "McpParam",
    "McpServerSpec",
    "McpServers",
    "convert",
    "expand_command",
    "quoted",
    "read_schema",
    "sdk_problem",
    "server_modes",
    "server_name_problem",
]
