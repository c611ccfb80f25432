"""Running an instance's hidden check against a finished run's workspace, in the sandbox.

The check runs after the run has ended, so no role is left to see it, and its result goes only to the
evaluation's folder, never to a trace or a prompt. It runs like a tool command (same sandbox mode,
uid, limits and scrubbed environment), read-only, with the suite's hidden folder as a private copy no
other command ever gets, and with the evaluation's secret paths masked: the delivered code it exercises
is untrusted, and must not read the answers either.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from pse.config import Settings
from pse.evals._results import HiddenResult
from pse.evals._suite_model import Instance
from pse.exceptions import ToolInfrastructureError
from pse.sandbox import Sandbox, SandboxLimits

__all__ = ["HIDDEN_OUTPUT_CHARS", "run_hidden_check"]

HIDDEN_OUTPUT_CHARS = 4000
"""Output of a hidden check kept in results.jsonl (head and tail)."""


def run_hidden_check(
    instance: Instance,
    workspace: Path,
    settings: Settings,
    *,
    hidden_dir: Path | None,
    secret_paths: Sequence[Path],
    timeout_s: float,
) -> HiddenResult:
    """Run `instance`'s hidden check on `workspace`; passed only on exit code 0 within the timeout.

    Never raises: a check that cannot run (no workspace, a broken sandbox) is a failed check with its
    `error`, so one broken run cannot stop an evaluation.
    """
    started = time.monotonic()
    if not workspace.is_dir():
        return HiddenResult(passed=False, exit_code=None, error=f"the run left no workspace at {workspace}")
    limits = SandboxLimits(
        timeout_s=timeout_s,
        cpu_s=max(settings.tool_cpu_s, int(timeout_s) + 1),
        memory_mb=settings.tool_memory_mb,
        file_size_mb=settings.tool_file_size_mb,
        max_processes=settings.tool_max_processes,
        output_limit=HIDDEN_OUTPUT_CHARS,
    )
    try:
        box = Sandbox(
            workspace,
            limits,
            settings.sandbox,
            sandbox_uid=settings.sandbox_uid,
            hide=secret_paths,
            uid_pool=settings.sandbox_uids,
        )
        done = box.run(
            list(instance.hidden_check),
            writable=False,
            private={"hidden": hidden_dir} if hidden_dir is not None else None,
            stdin=instance.stdin,
        )
    except ToolInfrastructureError as exc:
        return HiddenResult(
            passed=False,
            exit_code=None,
            duration_s=round(time.monotonic() - started, 3),
            error=f"the hidden check could not run: {exc}",
        )
    return HiddenResult(
        passed=done.exit_code == 0 and not done.timed_out,
        exit_code=done.exit_code,
        timed_out=done.timed_out,
        duration_s=round(done.ms / 1000, 3),
        output=done.output,
    )
