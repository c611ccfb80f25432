"""The sandbox: workspace-confined paths and confined command execution (bwrap or a portable fallback).

Read `pse.sandbox._runner`'s docstring for what it does and, as plainly, what it does not protect against.
"""

from pse.sandbox._paths import resolve_in_workspace
from pse.sandbox._runner import CommandResult, Sandbox, SandboxLimits, bwrap_problem, scrubbed_environment

__all__ = [
    "CommandResult",
    "Sandbox",
    "SandboxLimits",
    "bwrap_problem",
    "resolve_in_workspace",
    "scrubbed_environment",
]
