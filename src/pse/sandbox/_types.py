"""What a command is given (its limits) and what it gives back (its result)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["OUTBOX", "CommandResult", "SandboxLimits"]

OUTBOX = "{outbox}"
"""In a command's argv, replaced by the path of its outbox (see `Sandbox.run`)."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """The named limits of one command (see `Settings` for their meaning and defaults)."""

    timeout_s: float = 60.0
    cpu_s: int = 120
    memory_mb: int = 2048
    file_size_mb: int = 64
    max_processes: int = 256
    output_limit: int = 20_000


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command did. `exit_code` is None when it timed out; `sandbox` names the mode that ran it.

    `changes` are the workspace paths a read-write command changed and PSE kept; `refused` the ones it
    did not keep, with why; `outbox` the files the command left in its outbox; `snapshot` the sha256 of
    every file of the sealed snapshot it ran over (area → path → digest), and `snapshot_missing` the
    admitted paths that could not be copied into it.
    """

    exit_code: int | None
    output: str
    timed_out: bool
    truncated: bool
    sandbox: str
    ms: int
    cwd: str = ""
    changes: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    outbox: Mapping[str, bytes] = field(default_factory=dict)
    snapshot: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    snapshot_missing: tuple[str, ...] = ()
