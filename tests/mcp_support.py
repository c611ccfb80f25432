"""A ToolExecutor wired with the real stdio MCP server of tests/data/mcp (the official SDK), as a run
wires it: servers started in the executor's own sandbox, their tools in its registry, the task's
policy over them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pse.config import Settings
from pse.events import ToolCallRecord
from pse.mcp import McpServers, McpServerSpec
from pse.protocol import render_tool_calls
from pse.sandbox import bwrap_problem
from pse.toolagent import Policy, Redactor, ToolExecutor, sandbox_for, settings_secrets
from pse.tools import builtin_tools

__all__ = ["MODES", "SERVER_DIR", "calls", "mcp_executor", "needs_bwrap", "notes_spec"]

SERVER_DIR = Path(__file__).resolve().parent / "data" / "mcp"
"""The task-folder stand-in: the server runs as {task_dir}/notes_server.py."""
BWRAP_MISSING = bwrap_problem()
needs_bwrap = pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"bwrap unusable here: {BWRAP_MISSING}")
MODES = [pytest.param("bwrap", marks=needs_bwrap), "fallback"]


def notes_spec(**changes: Any) -> McpServerSpec:
    """The notes server's `[mcp.notes]` table, with `changes`."""
    return McpServerSpec(**{"command": ["{python}", "{task_dir}/notes_server.py"], **changes})


def calls(*requests: tuple[str, dict[str, str]]) -> str:
    """A role's message holding these requests."""
    return "Calling the server.\n" + render_tool_calls(list(requests))


@contextmanager
def mcp_executor(
    ws: Path,
    mode: str,
    policy: dict[str, Any] | None = None,
    *,
    spec: McpServerSpec | None = None,
    network: tuple[str, ...] = (),
    on_record: Callable[[ToolCallRecord], None] | None = None,
    **options: Any,
) -> Iterator[tuple[ToolExecutor, McpServers]]:
    """An executor for `ws` whose registry holds the notes server's tools; the server stops after."""
    settings = Settings(sandbox=mode, **{"tool_timeout_s": 30, **options})  # type: ignore[arg-type]
    sandbox = sandbox_for(ws, settings)
    servers = McpServers.start({"notes": spec or notes_spec()}, sandbox, task_dir=SERVER_DIR, network=network)
    try:
        registry = builtin_tools()
        servers.register(registry)
        rules = Policy.default(settings, registry).with_overrides(policy)
        redactor = Redactor([*settings_secrets(settings), *servers.secrets()])  # as a run has it
        executor = ToolExecutor(
            ws, settings, rules, registry=registry, sandbox=sandbox, on_record=on_record, redactor=redactor
        )
        yield executor, servers
    finally:
        servers.stop()
