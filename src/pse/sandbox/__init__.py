"""The sandbox: workspace-confined paths and confined command execution (bwrap or a portable fallback).

Read `pse.sandbox._runner`'s docstring for what it does and, as plainly, what it does not protect against;
docs/security.md has the whole threat model.
"""

from pse.sandbox._copies import MAX_SYNC_BYTES, MAX_SYNC_CHANGES, Accept, Copy, Synced
from pse.sandbox._env import SECRET_NAME, scrubbed_environment
from pse.sandbox._identity import DEFAULT_SANDBOX_UID, Identity
from pse.sandbox._paths import read_inside, resolve_in_workspace
from pse.sandbox._runner import Sandbox, bwrap_problem
from pse.sandbox._seccomp import DENIED_SYSCALLS
from pse.sandbox._server import STDERR_TAIL_CHARS, SandboxedProcess, WorkspaceAccess, start_process
from pse.sandbox._snapshot import MAX_SNAPSHOT_BYTES, Snapshot, SnapshotTooLarge
from pse.sandbox._types import OUTBOX, CommandResult, SandboxLimits
from pse.sandbox._uids import processes_of, sweep_uid

__all__ = [
    "DEFAULT_SANDBOX_UID",
    "DENIED_SYSCALLS",
    "MAX_SNAPSHOT_BYTES",
    "MAX_SYNC_BYTES",
    "MAX_SYNC_CHANGES",
    "OUTBOX",
    "SECRET_NAME",
    "STDERR_TAIL_CHARS",
    "Accept",
    "CommandResult",
    "Copy",
    "Identity",
    "Sandbox",
    "SandboxLimits",
    "SandboxedProcess",
    "Snapshot",
    "SnapshotTooLarge",
    "Synced",
    "WorkspaceAccess",
    "bwrap_problem",
    "processes_of",
    "read_inside",
    "resolve_in_workspace",
    "scrubbed_environment",
    "start_process",
    "sweep_uid",
]
