"""A run's tools: the policy its roles are held to, and the ToolExecutor that decides, runs and audits."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pse.engine import ApprovalDesk
from pse.roles import role_spec
from pse.runner._frame import RunFrame
from pse.runner._mcp import McpSetup
from pse.runner._repository import RunRepository
from pse.tasks import Task
from pse.toolagent import Policy, ToolExecutor, ToolRunner
from pse.tools import EvidenceRules, ToolRegistry, is_test_file

__all__ = ["RunTools", "build_tools", "own_tests", "run_policy"]


def own_tests(task: Task, workspace: Path | None = None, repository: bool = False) -> bool:
    """Whether a run of `task` holds its Evaluator to tests of its own (`[verification]
    independent_tests`). Unset, it does where the task requires pytest and gives no tests itself: it
    seeds no test file and no folder, the run's `workspace` holds no test file as it starts (an
    instance's files), it does not run on a repository (whose tests are the evidence), and it runs as
    one task, not in steps.

    Why by default: otherwise a PASS there rests on the tests the Specialist chose to write. On the
    held-out merge-intervals task the 1.5B model's Evaluator ran the Specialist's one test and passed
    a `merge` that sorts its caller's list in place, which the task's reference check refuses."""
    config = task.config
    chosen = config.verification.independent_tests
    if chosen is not None:
        return chosen
    if "pytest" not in config.required_checks or repository or config.repository.required:
        return False
    if config.execution != "task" or any(is_test_file(p) or not PurePosixPath(p).suffix for p in config.seed):
        return False
    return workspace is None or not any(is_test_file(path.name) for path in workspace.rglob("*.py"))


@dataclass(frozen=True)
class RunTools:
    """A run's tool side.

    Attributes:
        policy: the grants of each seat: the defaults, the task's overrides, a person's widenings, the
            borrowed roles' tools, the independent tests' rule.
        executor: parses, decides, runs and audits every tool call of the run.
        evaluation_dir: where the Evaluator's own tests go (None: no independent tests in this run).
    """

    policy: Policy
    executor: ToolExecutor
    evaluation_dir: Path | None


def run_policy(frame: RunFrame, registry: ToolRegistry) -> Policy:
    """The policy of `frame`'s run, before the independent tests' rule (`build_tools` adds it)."""
    task, resume = frame.task, frame.resume
    policy = Policy.default(frame.settings, registry).with_overrides(task.config.policy)
    if resume is not None and resume.grants:  # a person's widenings for this run (`pse answer --grant`)
        policy = policy.with_human_grants(resume.grants)
    for (
        role
    ) in frame.speakers:  # a seat that does other roles' work holds their tools (the single team's Agent)
        if borrowed := role_spec(role).borrows:
            policy = policy.with_seat(role, borrowed)
    return policy


def build_tools(
    frame: RunFrame,
    registry: ToolRegistry,
    *,
    mcp: McpSetup | None,
    runner: ToolRunner,
    approvals: ApprovalDesk,
    repository: RunRepository | None,
    inputs: Mapping[str, str] | None = None,
) -> RunTools:
    """The run's policy and executor, over `registry` (the built-in tools, knowledge, MCP servers' tools).

    Args:
        frame: the run.
        registry: every tool the run has.
        mcp: the run's MCP servers (their sandbox and redactor); None: none.
        runner: what runs an allowed call (the sandbox, or a recording's replay).
        approvals: holds a call that needs a person's approval.
        repository: a run on a repository: the change is what roles wrote, by PSE's records.
        inputs: the run's inputs, which `read_file` gives by name where no such file exists.
    """
    task, settings, resume = frame.task, frame.settings, frame.resume
    verification = task.config.verification
    policy = run_policy(frame, registry)
    evaluation_dir = None
    if resume is not None:  # as the run began: its area is there if it had one
        independent = (frame.run_dir / "evaluation").is_dir()
    else:
        independent = own_tests(task, frame.workspace, repository is not None)
    if independent and frame.crew.independent_review:
        policy = policy.with_independent_tests()
        evaluation_dir = frame.run_dir / "evaluation"
        evaluation_dir.mkdir(mode=0o700, exist_ok=True)  # no other role's command may read it
    executor = ToolExecutor(
        frame.workspace,
        settings,
        policy,
        registry=registry,
        checks=task.resolved_checks(),
        inputs=inputs,
        task_dir=task.folder,
        evaluation_dir=evaluation_dir,
        check_config=task.check_config_files,
        pytest_plugins=verification.pytest_plugins,
        history=resume.history if resume is not None else [],
        on_record=frame.events.tool_call,
        runner=runner,
        approver=approvals,
        # A run stopped while a call waited for a person runs its interrupted cycle again: every tool call
        # it recorded is answered from the trace, and only what comes after runs.
        replay=resume.replayed if resume is not None else (),
        sandbox=mcp.sandbox if mcp is not None else None,
        redactor=mcp.redactor if mcp is not None else None,
        evidence=EvidenceRules(
            expected_outputs=tuple(task.config.expected_outputs),
            evidence=tuple(verification.evidence),
            plan_outputs=approvals.declared_outputs,
            repository=repository.files if repository is not None else None,
        ),
        # A replayed run starts no command; its writes are checked against the recording as they are.
        ruff_fixes=verification.ruff_fix
        and "ruff" in task.config.all_required_checks
        and not settings.replay_tools,
    )
    if repository is not None:  # the change is what roles wrote, by PSE's records
        repository.written = functools.partial(executor.provenance.written_by_roles, "workspace")
    return RunTools(policy, executor, evaluation_dir)
