"""The sandbox of a run's tools, built from its settings (the executor's, and its MCP servers')."""

from __future__ import annotations

import os
from pathlib import Path

from pse.config import Settings
from pse.sandbox import Sandbox, SandboxLimits

__all__ = ["sandbox_for"]


def _sandbox_limits(settings: Settings) -> SandboxLimits:
    return SandboxLimits(
        timeout_s=settings.tool_timeout_s,
        cpu_s=settings.tool_cpu_s,
        memory_mb=settings.tool_memory_mb,
        file_size_mb=settings.tool_file_size_mb,
        max_processes=settings.tool_max_processes,
        output_limit=settings.tool_output_limit,
    )


def sandbox_for(workspace: Path, settings: Settings) -> Sandbox:
    """The sandbox a `ToolExecutor` runs `workspace`'s tools in, under `settings` (mode, uid, limits).

    Raises:
        ToolInfrastructureError: `settings.sandbox` is `bwrap` and bwrap cannot run here.
    """
    return Sandbox(
        Path(os.path.realpath(workspace)),
        _sandbox_limits(settings),
        settings.sandbox,
        sandbox_uid=settings.sandbox_uid,
        hide=settings.sandbox_hide,
        uid_pool=settings.sandbox_uids,
    )
