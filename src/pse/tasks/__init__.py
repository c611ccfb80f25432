"""The task platform: registry, task config, prompts, the zero-LLM rules engine and report extraction.

Typical use::

    registry = TaskRegistry.discover(your_dir)      # built-ins + yours; see pse.runner.registry_for
    task = registry.get("code-delivery")          # validated; TaskNotFoundError / ConfigError otherwise
    task.seed_workspace(workspace, inputs)         # data files, inputs/NAME, rules summary
    message = task.task_message(inputs, rules_md)  # the run's opening message (no paths, ids or times)
    system = task.system_prompt("Planner")          # protocol + base prompt + the task's prompt
"""

from pse.tasks._base_prompts import (
    base_prompt,
    files_prompt,
    findings_prompt,
    independent_tests_prompt,
    mcp_prompt,
    protocol_prompt,
    questions_prompt,
    spec_conflict_prompt,
    steps_prompt,
)
from pse.tasks._config import (
    BUILTIN_CHECKS,
    InputSpec,
    LimitOverrides,
    ReportSpec,
    SandboxSpec,
    TaskConfig,
    VerificationSpec,
)
from pse.tasks._message import seeded_files
from pse.tasks._offline import cassette_writes, offline_warnings
from pse.tasks._paths import builtin_tasks_dir, prompts_dir
from pse.tasks._registry import TaskRegistry, validate
from pse.tasks._report import extract_report, titled_report
from pse.tasks._rules import Finding, RulesSummary, SourceInfo, Window, load_rules, run_rules
from pse.tasks._scaffold import scaffold_task
from pse.tasks._task import INPUTS_DIR, Problem, Task, TaskLocation, is_input_file, write_files

__all__ = [
    "BUILTIN_CHECKS",
    "INPUTS_DIR",
    "Finding",
    "InputSpec",
    "LimitOverrides",
    "Problem",
    "ReportSpec",
    "RulesSummary",
    "SandboxSpec",
    "SourceInfo",
    "Task",
    "TaskConfig",
    "TaskLocation",
    "TaskRegistry",
    "VerificationSpec",
    "Window",
    "base_prompt",
    "builtin_tasks_dir",
    "cassette_writes",
    "extract_report",
    "files_prompt",
    "findings_prompt",
    "independent_tests_prompt",
    "is_input_file",
    "load_rules",
    "mcp_prompt",
    "offline_warnings",
    "prompts_dir",
    "protocol_prompt",
    "questions_prompt",
    "run_rules",
    "scaffold_task",
    "seeded_files",
    "spec_conflict_prompt",
    "steps_prompt",
    "titled_report",
    "validate",
    "write_files",
]
