"""A run's MCP servers: started in the run's sandbox before its policy is made, stopped when the run ends.

The servers must run before the policy exists: a task's `mcp.SERVER.*` grants name the tools the
servers list, so they are registered in the run's registry first. The ToolExecutor then runs in the
same `Sandbox` object, so halting the run (`Engine` cancel) kills the servers with the commands.
"""

from __future__ import annotations

from pathlib import Path

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.mcp import McpServers
from pse.sandbox import Sandbox
from pse.tasks import Task
from pse.toolagent import Policy, Redactor, sandbox_for, settings_secrets
from pse.tools import MCP_PREFIX, ToolRegistry

__all__ = ["McpSetup", "has_mcp_tools", "start_mcp"]


class McpSetup:
    """What a run with MCP servers hands its executor: the servers, their sandbox, the redactor."""

    def __init__(self, servers: McpServers, sandbox: Sandbox, redactor: Redactor) -> None:
        self.servers = servers
        self.sandbox = sandbox
        self.redactor = redactor


def start_mcp(task: Task, settings: Settings, workspace: Path, registry: ToolRegistry) -> McpSetup | None:
    """Start the task's MCP servers (none: None) and register their tools in `registry`.

    Raises:
        ConfigError: the SDK is missing, a server needs a network the task does not allow, or the
            protocol is not DSML.
        ToolInfrastructureError: the sandbox or a server could not start.
    """
    if not task.config.mcp:
        return None
    if settings.protocol != "dsml":
        raise ConfigError(
            f"task {task.name!r} declares MCP servers, whose tools (mcp.SERVER.TOOL) work with the XML "
            "protocol only for now: set PSE_PROTOCOL=dsml"
        )
    sandbox = sandbox_for(workspace, settings)
    servers = McpServers.start(
        task.config.mcp, sandbox, task_dir=task.folder, network=task.config.sandbox.network
    )
    try:
        servers.register(registry)
    except BaseException:
        servers.stop()
        raise
    return McpSetup(servers, sandbox, Redactor([*settings_secrets(settings), *servers.secrets()]))


def has_mcp_tools(role: str, policy: Policy, registry: ToolRegistry) -> bool:
    """Whether `role` is granted any MCP tool the run offers (its prompt then explains them)."""
    return any(tool.startswith(MCP_PREFIX) and tool in registry for tool, _ in policy.tools_for(role))
