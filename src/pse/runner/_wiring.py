"""Wiring a run: the builders' values, in order, into the engine's `RunSetup` and one `PreparedRun`.

Each builder returns one typed value from the run's narrow `RunFrame`: `open_script` the cassette and
the tool runner (`_script.py`), `RunKnowledge` the task's knowledge, `start_mcp` its MCP servers
(`_mcp.py`), `build_tools` the policy and executor (`_tools.py`), `RunClients` the model clients
(`_clients.py`), `system_prompts` the prompts (`_prompts.py`), `ApprovalDesk` the held calls. This
module orders them and hands the engine its `RunSetup`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autogen_agentchat.base import ChatAgent
from autogen_core.models import ChatCompletionClient

from pse.config import Settings, with_overrides
from pse.engine import (
    ApprovalDesk,
    Engine,
    GatePolicy,
    Resume,
    RunEvents,
    RunMeters,
    RunOpening,
    RunSetup,
    RunStorage,
    RunTeam,
    StepCrew,
    Trace,
)
from pse.events import Event, SandboxRecord
from pse.exceptions import ConfigError
from pse.knowledge import RunKnowledge
from pse.models import CassettePlayer, CassetteRecorder
from pse.runner._clients import RunClients
from pse.runner._delivery import deliver, write_report
from pse.runner._fit import RunFit
from pse.runner._frame import RunFrame
from pse.runner._given import given_for_roles
from pse.runner._index import StoreIndexer
from pse.runner._limits import loop_limits
from pse.runner._mcp import McpSetup, start_mcp
from pse.runner._prompts import given_tests, system_prompts
from pse.runner._replay import replay_positions
from pse.runner._repository import RunRepository, finish_repository
from pse.runner._script import open_script
from pse.runner._tools import build_tools
from pse.tasks import Task
from pse.team import RoleSetup
from pse.telemetry import RunTelemetry, telemetry_for
from pse.toolagent import ToolAgent, ToolExecutor

__all__ = ["PreparedRun", "wire"]


_LIMIT_FIELDS = (
    "max_partial_retries",
    "max_fail_retries",
    "max_criterion_failures",
    "turns_per_cycle",
    "run_timeout_s",
    "token_budget",
    "cost_budget",
    "step_buffer_tokens",
    "max_step_retries",
    "max_steps",
    "max_parallel_steps",
)


@dataclass
class PreparedRun:
    """A run ready to go: its engine plus what must happen after the engine returns."""

    engine: Engine
    task: Task
    run_dir: Path
    workspace: Path
    recorder: CassetteRecorder | None
    clients: dict[str, ChatCompletionClient]
    player: CassettePlayer | None
    defaulted_scripted: bool
    mcp: McpSetup | None = None
    """The run's MCP servers (None: the task has none); `run_to_end` stops them."""
    telemetry: RunTelemetry | None = None
    """PSE_OTEL: sends the run's spans when it ends (None: off)."""
    repository: RunRepository | None = None
    """A run on a repository (`--repo`): `run_to_end` commits its change on PASSED (None: no repository)."""

    @property
    def run_id(self) -> str:
        return self.engine.trace.run_id


def _task_settings(settings: Settings, task: Task) -> Settings:
    """The settings with the task's limit overrides applied (validated by the settings model)."""
    limits = task.config.limits.model_dump(exclude_none=True)
    overrides = {k: v for k, v in limits.items() if k in _LIMIT_FIELDS}
    return with_overrides(settings, f"limit override of task {task.name!r}", **overrides)


def wire(**arguments: Any) -> PreparedRun:
    """`_wire_run`, stopping the run's MCP servers when wiring fails after they started."""
    started: list[McpSetup] = []
    try:
        return _wire_run(started=started, **arguments)
    except BaseException:
        for setup in started:
            setup.servers.stop()
        raise


def _wire_run(
    *,
    started: list[McpSetup],
    task: Task,
    settings: Settings,
    run_id: str,
    run_dir: Path,
    workspace: Path,
    task_message: str,
    inputs: dict[str, str],
    on_event: Callable[[Event], None] | None,
    resume: Resume | None,
    tags: Mapping[str, str] | None = None,
    limits: Mapping[str, Any] | None = None,
    agents: Mapping[str, ChatAgent] | None = None,
    repository: RunRepository | None = None,
    player: CassettePlayer | None = None,
    models: Mapping[str, ChatCompletionClient] | None = None,
) -> PreparedRun:
    settings = _task_settings(settings, task)
    if limits:  # the caller's limits (an evaluation suite's) win over the task's own
        settings = with_overrides(settings, "limit override of the suite", **limits)
    telemetry = telemetry_for(settings, run_id)  # PSE_OTEL: AutoGen's spans go under the cycle span
    events = RunEvents(run_id, telemetry.watch(on_event) if telemetry is not None else on_event)
    frame = RunFrame(task, settings, run_dir, workspace, events, resume)
    trace = frame.trace
    crew, speakers = frame.crew, frame.speakers
    given = given_for_roles(models or {}, speakers, "models")  # a client given for a role (pse.testing's)
    if given and settings.protocol != "dsml":
        raise ConfigError("models given for roles speak the XML protocol only: set PSE_PROTOCOL=dsml")
    scripted = [role for role in speakers if frame.spec(role).provider == "scripted" and role not in given]
    positions = resume.positions if resume is not None else None
    fit = RunFit(inputs, repository.tree if repository is not None else None)
    script = open_script(
        task, settings, crew, scripted, player=player, positions=positions, events=events, fit=fit
    )
    if script.loaded is not None:  # the run's settings name the cassette file it plays
        frame = dataclasses.replace(frame, settings=settings.model_copy(update={"cassette": script.loaded}))
        settings = frame.settings

    # Knowledge: search_knowledge if the task has knowledge/; injection on new runs; traced retrievals.
    knowledge = RunKnowledge(task.knowledge_dir, settings, query=task.config.goal if trace is None else None)
    task_message = knowledge.brief(task_message)
    mcp = start_mcp(task, settings, workspace, knowledge.registry)  # their tools, before the policy
    started += [mcp] if mcp is not None else []
    approvals = ApprovalDesk(run_dir, settings.approval_timeout_s)
    tools = build_tools(
        frame,
        knowledge.registry,
        mcp=mcp,
        runner=script.tool_runner,
        approvals=approvals,
        repository=repository,
        inputs=inputs,
    )
    run_clients = RunClients(frame, script, tools.policy, knowledge.registry, given)
    system = system_prompts(
        task,
        settings,
        tools.policy,
        knowledge.registry,
        speakers,
        task_message=task_message,
        independent_tests=tools.evaluation_dir is not None,
        on_repository=repository is not None,
        with_mcp=mcp is not None,
    )
    own = given_for_roles(agents or {}, speakers, "agents")
    roles = [
        RoleSetup(
            name=role, system_message=system[role], client=run_clients.clients[role], agent=own.get(role)
        )
        for role in speakers
    ]
    # Each role's AutoGen team is built at its first phase, inside the run (AutoGen's create_agent span
    # then belongs to the run's trace), and reset before each later one.
    executor = tools.executor
    tool_agent = ToolAgent(executor)
    step_crew: StepCrew | None = None
    if task.config.execution == "steps" and crew.plans:
        if settings.context_mode == "history":
            raise ConfigError(
                f'task {task.name!r} runs in steps (execution = "steps"), where each step has a context of '
                "its own; PSE_CONTEXT_MODE=history cannot apply: unset it, or use a task-mode task"
            )

        def step_role(role: str, step: str) -> RoleSetup:
            return RoleSetup(name=role, system_message=system[role], client=run_clients.for_step(role, step))

        step_crew = StepCrew(role=step_role, tool_agent=lambda scope: ToolAgent(executor, scope=scope))

    verification = task.config.verification
    setup = RunSetup(
        opening=RunOpening(
            run_id=run_id,
            task=task.name,
            task_message=task_message,
            recorded_settings=settings.public_dump(),
            inputs=inputs,
            tags=dict(tags or (trace.tags if trace is not None else {})),
            sandbox=SandboxRecord(
                mode=executor.sandbox.mode,
                requested=settings.sandbox,
                uid=executor.sandbox.identity.uid,
                warning=executor.sandbox.warning,
            ),
            injected_retrievals=[knowledge.injected] if knowledge.injected else [],
        ),
        team=RunTeam(
            crew=crew,
            roles=roles,
            tool_agent=tool_agent,
            steps=step_crew,
            context_mode=settings.context_mode,
            planner_questions=settings.planner_questions,
            given_tests=bool(given_tests(task, task_message)),
        ),
        tools=executor,
        workspace=workspace,
        storage=RunStorage(
            run_dir=run_dir,
            index=StoreIndexer(settings, run_dir.parent.resolve()),
            positions=replay_positions(script.player, script.replay),
        ),
        limits=loop_limits(settings),
        events=events,
        gates=GatePolicy(
            required_checks=task.config.all_required_checks,
            expected_outputs=list(task.config.expected_outputs),
            targets=dict(verification.targets),
            independent_tests=tools.evaluation_dir is not None,
            check_config=task.check_config_files,
            block_findings=verification.block_findings,
            # A crew whose judge reviews its own work has no independent evidence for the gates to hold.
            enforced=settings.hard_gates and crew.gated,
            judge=crew.reviewer,
        ),
        meters=RunMeters(usage=run_clients.meter, prefixes=run_clients.prefixes, price=run_clients.price),
        approvals=approvals,
        conclude=functools.partial(_conclude, task, executor, repository, run_dir),
        # the deliverable, and a repository run's commit on PASSED, before the outcome event announces it
    )
    engine = Engine(setup, resume)
    if repository is not None and engine.trace.repository is None:
        engine.trace.repository = repository.record
    engine.trace.settings["constrain_used"] = (
        run_clients.constraints.calls
    )  # the log's own dict: every save has it
    return PreparedRun(
        engine=engine,
        task=task,
        run_dir=run_dir,
        workspace=workspace,
        recorder=script.recorder,
        clients=run_clients.clients,
        player=script.player,
        defaulted_scripted=run_clients.defaulted_scripted,
        telemetry=telemetry,
        mcp=mcp,
        repository=repository,
    )


def _conclude(
    task: Task, executor: ToolExecutor, repository: RunRepository | None, run_dir: Path, trace: Trace
) -> None:
    """A run's last work, before its trace is written the last time: the workspace made what its checks
    saw, a repository run's change, the report."""
    trace.delivery = deliver(executor, run_dir)
    if repository is not None:
        finish_repository(repository, trace, run_dir)
    write_report(task, executor.workspace, run_dir, trace)
