"""The runner: turns a task name, inputs and settings into a run folder, a wired engine and a result.

Both the CLI and the dashboard start, resume and watch runs through this module only. A run folder
holds `workspace/`, `trace.json`, and when there are ones `report.md`, `escalation.json/.md`, and the
recorded cassette if `--record` was given.
"""

from pse.runner._answer import answer_run
from pse.runner._approve import ApprovalAnswer, approve_call, pending_approvals
from pse.runner._prepare import (
    RunOptions,
    prepare_resume,
    prepare_run,
    prepare_task,
    registry_for,
    user_tasks_dir,
)
from pse.runner._run import RunSummary, arun, run, run_to_end, summarize
from pse.runner._tools import own_tests
from pse.runner._wiring import PreparedRun

__all__ = [
    "ApprovalAnswer",
    "PreparedRun",
    "RunOptions",
    "RunSummary",
    "answer_run",
    "approve_call",
    "arun",
    "own_tests",
    "pending_approvals",
    "prepare_resume",
    "prepare_run",
    "prepare_task",
    "registry_for",
    "run",
    "run_to_end",
    "summarize",
    "user_tasks_dir",
]
