"""Wiring a run's engine: models, policy, executor, prompts and teams into one `PreparedRun`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from autogen_agentchat.base import ChatAgent
from autogen_core.models import ChatCompletionClient

from pse.config import Settings, with_overrides
from pse.engine import (
    ApprovalDesk,
    Engine,
    GatePolicy,
    RunEvents,
    RunSetup,
    StepCrew,
    Trace,
    interrupted_cycle,
)
from pse.events import Cost, Event, SandboxRecord
from pse.exceptions import CassetteError, ConfigError, UserError
from pse.knowledge import RunKnowledge
from pse.models import (
    CassettePlayer,
    CassetteRecorder,
    ConstraintLog,
    MeteredChatCompletionClient,
    PrefixClient,
    PrefixMeter,
    ResumedTurnsClient,
    Scrubber,
    Turn,
    UsageMeter,
    create_model_client,
    price_of,
)
from pse.roles import ALL_ROLES, role_spec
from pse.runner._index import StoreIndexer
from pse.runner._limits import loop_limits
from pse.runner._mcp import McpSetup, start_mcp
from pse.runner._prompts import system_prompts
from pse.runner._replay import human_grants, replay_positions, tool_replay
from pse.runner._repository import RunRepository, finish_repository
from pse.tasks import (
    Task,
)
from pse.team import RoleSetup
from pse.telemetry import RunTelemetry, telemetry_for
from pse.toolagent import (
    Policy,
    RecordingToolRunner,
    ToolAgent,
    ToolExecutor,
    ToolRunner,
    run_tools,
    tool_functions,
    tool_signatures,
)
from pse.tools import EvidenceRules

__all__ = ["PreparedRun", "wire"]

_T = TypeVar("_T")


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
    positions: dict[str, int] | None,
    trace: Trace | None,
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
    # Who speaks: the crew PSE_TEAM selects (the three roles, or the evaluation baseline's one Agent).
    crew = settings.crew
    speakers = crew.speakers
    specs = {role: settings.model_spec(role) for role in speakers}
    telemetry = telemetry_for(settings, run_id)  # PSE_OTEL: AutoGen's spans go under the cycle span
    events = RunEvents(run_id, telemetry.watch(on_event) if telemetry is not None else on_event)
    scrubber = Scrubber(settings.secrets())  # the recorder's rule: digests are of scrubbed text
    given = _given(models or {}, speakers, "models")  # a client given for a role (pse.testing's)
    if given and settings.protocol != "dsml":
        raise ConfigError("models given for roles speak the XML protocol only: set PSE_PROTOCOL=dsml")
    cassette = settings.cassette or task.cassette_path
    scripted = [role for role in speakers if specs[role].provider == "scripted" and role not in given]
    if player is None and scripted:  # no cassette given in memory: the settings' or the task's file
        if cassette is None:
            raise UserError(
                f"task {task.name!r} has no cassette and no model is configured: pass --cassette FILE, "
                "or configure a real model (PSE_PROVIDER, PSE_API_KEY / PSE_BASE_URL)"
            )
        player = CassettePlayer.from_file(
            Path(cassette),
            strict=settings.replay_strict,
            # the roles' streams, and a steps run's `ROLE@STEP` ones
            positions={r: p for r, p in (positions or {}).items() if r.split("@")[0] in ALL_ROLES},
            scrubber=scrubber,
            on_drift=events.drift,
        )
        player.latency_s = settings.scripted_latency_s
        settings = settings.model_copy(update={"cassette": Path(cassette).resolve()})
    if player is not None and scripted:
        # Every cassette scripts the three roles (perhaps with no turns); another speaker only if it has some.
        unscripted = [role for role in scripted if role not in player.positions]
        if unscripted:
            role, one = unscripted[0], "the one speaker" if len(speakers) == 1 else "a speaker"
            raise CassetteError(
                f"cassette {cassette} scripts no turns for {role!r}, {one} of PSE_TEAM={crew.name}: pass a "
                f"cassette with {role} turns (record one with --record FILE), or unset PSE_TEAM"
            )
    recorder = CassetteRecorder(settings.record, secrets=settings.secrets()) if settings.record else None
    replay = tool_replay(task, cassette, player, scrubber, positions) if settings.replay_tools else None
    runner: ToolRunner = replay if replay is not None else run_tools
    if recorder is not None:
        runner = RecordingToolRunner(recorder.add_tool_run, runner)

    # Knowledge: search_knowledge if the task has knowledge/; injection on new runs; traced retrievals.
    knowledge = RunKnowledge(task.knowledge_dir, settings, query=task.config.goal if trace is None else None)
    task_message = knowledge.brief(task_message)
    mcp = start_mcp(task, settings, workspace, knowledge.registry)  # their tools, before the policy
    started += [mcp] if mcp is not None else []
    verification = task.config.verification
    policy = Policy.default(settings, knowledge.registry).with_overrides(task.config.policy)
    if trace is not None and trace.answers:  # a person's widenings for this run (`pse answer --grant`)
        policy = policy.with_human_grants(human_grants(trace))
    for role in speakers:  # a seat that does other roles' work holds their tools (the single team's Agent)
        if borrowed := role_spec(role).borrows:
            policy = policy.with_seat(role, borrowed)
    evaluation_dir = None
    if verification.independent_tests and crew.independent_review:
        policy = policy.with_independent_tests()
        evaluation_dir = run_dir / "evaluation"
        evaluation_dir.mkdir(mode=0o700, exist_ok=True)  # no other role's command may read it
    meter = UsageMeter()
    # A run stopped while a call waited for a person runs its interrupted cycle again: every turn and
    # tool call it recorded is answered from the trace, and only what comes after reaches a model.
    again = interrupted_cycle(trace) if trace is not None else None
    past = [c for c in trace.cycles if c is not again] if trace is not None else []
    approvals = ApprovalDesk(run_dir, settings.approval_timeout_s)
    executor = ToolExecutor(
        workspace,
        settings,
        policy,
        registry=knowledge.registry,
        checks=task.resolved_checks(),
        task_dir=task.folder,
        evaluation_dir=evaluation_dir,
        check_config=task.check_config_files,
        pytest_plugins=task.config.verification.pytest_plugins,
        history=[call for cycle in past for call in cycle.tool_calls],
        on_record=events.tool_call,
        runner=runner,
        approver=approvals,
        replay=again.tool_calls if again is not None else (),
        sandbox=mcp.sandbox if mcp is not None else None,
        redactor=mcp.redactor if mcp is not None else None,
        evidence=EvidenceRules(
            expected_outputs=tuple(task.config.expected_outputs),
            evidence=tuple(verification.evidence),
            plan_outputs=approvals.declared_outputs,
            repository=repository.files if repository is not None else None,
        ),
    )
    if repository is not None:  # the change is what roles wrote, by PSE's records
        repository.written = functools.partial(executor.provenance.written_by_roles, "workspace")
    # Constrained decoding allows each role exactly its granted tools; what each call carried is noted
    # in the trace's settings (`constrain_used`, filled in as calls are made).
    constraints = ConstraintLog(trace.settings.get("constrain_used") if trace is not None else None)

    def client_for(role: str, step: str | None = None) -> ChatCompletionClient:
        if role in given:  # the same client in every step: its own code keeps its state
            return MeteredChatCompletionClient(given[role], role, meter)
        return create_model_client(
            settings,
            role,
            player=player,
            recorder=recorder,
            meter=meter,
            tools=tool_signatures(role, policy, knowledge.registry),
            functions=tool_functions(role, policy, knowledge.registry),
            constraint_log=constraints,
            step=step,
        )

    clients: dict[str, ChatCompletionClient] = {role: client_for(role) for role in speakers}
    prefixes = PrefixMeter()  # what a prefix cache could serve of each prompt (not of replayed turns)
    for role in speakers:
        clients[role] = PrefixClient(clients[role], role, specs[role].model, prefixes)

    def resumed(client: ChatCompletionClient, role: str, step: str | None) -> ChatCompletionClient:
        """`client`, answering first with the turns `role` gave in the interrupted cycle (in `step`'s
        stream for a steps plan: the Planner and the final review have none)."""
        if again is None:
            return client
        turns = [
            Turn(m.content, m.prompt_tokens, m.completion_tokens, m.thought)
            for m in again.messages
            if m.source == role and m.step == step and not m.late
        ]
        return ResumedTurnsClient(client, turns, seen=functools.partial(prefixes.remember, specs[role].model))

    for role in speakers:
        clients[role] = resumed(clients[role], role, None)
    system = system_prompts(
        task,
        settings,
        policy,
        knowledge.registry,
        speakers,
        task_message=task_message,
        independent_tests=evaluation_dir is not None,
        on_repository=repository is not None,
        with_mcp=mcp is not None,
    )
    own = _given(agents or {}, speakers, "agents")
    roles = [
        RoleSetup(name=role, system_message=system[role], client=clients[role], agent=own.get(role))
        for role in speakers
    ]
    # Each role's AutoGen team is built at its first phase, inside the run (AutoGen's create_agent span
    # then belongs to the run's trace), and reset before each later one.
    tool_agent = ToolAgent(executor)
    step_crew: StepCrew | None = None
    if task.config.execution == "steps" and crew.plans:
        if settings.context_mode == "history":
            raise ConfigError(
                f'task {task.name!r} runs in steps (execution = "steps"), where each step has a context of '
                "its own; PSE_CONTEXT_MODE=history cannot apply: unset it, or use a task-mode task"
            )

        def step_role(role: str, step: str) -> RoleSetup:
            key = f"{role}@{step}"  # each step has its own client: its own cassette stream `ROLE@STEP`
            if key not in clients:
                metered = PrefixClient(client_for(role, step), role, specs[role].model, prefixes)
                clients[key] = resumed(metered, role, step)  # a resumed cycle: the step's turns first
            return RoleSetup(name=role, system_message=system[role], client=clients[key])

        step_crew = StepCrew(role=step_role, tool_agent=lambda scope: ToolAgent(executor, scope=scope))

    def price(role: str, prompt: int, completion: int, cached: int = 0) -> Cost:
        return price_of(settings, specs[role].model, prompt, completion, cached)

    setup = RunSetup(
        run_id=run_id,
        task=task.name,
        task_message=task_message,
        roles=roles,
        tool_agent=tool_agent,
        tools=executor,
        workspace=workspace,
        run_dir=run_dir,
        limits=loop_limits(settings),
        recorded_settings=settings.public_dump(),
        context_mode=settings.context_mode,
        planner_questions=settings.planner_questions,
        hard_gates=settings.hard_gates,
        crew=crew,
        gates=GatePolicy(
            required_checks=task.config.all_required_checks,
            expected_outputs=list(task.config.expected_outputs),
            targets=dict(verification.targets),
            independent_tests=evaluation_dir is not None,
            check_config=task.check_config_files,
            block_findings=verification.block_findings,
        ),
        inputs=inputs,
        tags=dict(tags or (trace.tags if trace is not None else {})),
        price=price,
        positions=replay_positions(player, replay),
        events=events,
        meter=meter,
        prefixes=prefixes,
        injected_retrievals=[knowledge.injected] if knowledge.injected else [],
        sandbox=SandboxRecord(
            mode=executor.sandbox.mode,
            requested=settings.sandbox,
            uid=executor.sandbox.identity.uid,
            warning=executor.sandbox.warning,
        ),
        approvals=approvals,
        steps=step_crew,
        index=StoreIndexer(settings, run_dir.parent.resolve()),
        conclude=(
            functools.partial(finish_repository, repository, run_dir=run_dir)
            if repository is not None
            else None
        ),  # the commit on PASSED, before the outcome event announces it
    )
    engine = Engine(setup, trace)
    if repository is not None and engine.trace.repository is None:
        engine.trace.repository = repository.record
    engine.trace.settings["constrain_used"] = constraints.calls  # the log's own dict: every save has it
    return PreparedRun(
        engine=engine,
        task=task,
        run_dir=run_dir,
        workspace=workspace,
        recorder=recorder,
        clients=clients,
        player=player,
        defaulted_scripted=any(spec.provider_was_defaulted for spec in specs.values()),
        telemetry=telemetry,
        mcp=mcp,
        repository=repository,
    )


def _given(given: Mapping[str, _T], speakers: tuple[str, ...], what: str) -> dict[str, _T]:
    """The caller's own agents or model clients, each for a role of this run; an agent is named as its
    role (the ToolAgent judges a request by the seat it came from, which is the role's name).

    Raises:
        UserError: a key that is no role of this run, or an agent named otherwise than its role.
    """
    for role, value in given.items():
        if role not in speakers:
            raise UserError(f"{what}: {role!r} is no role of this run; give one of {', '.join(speakers)}")
        if what == "agents" and getattr(value, "name", None) != role:
            raise UserError(
                f"agents: the agent for {role} is named {getattr(value, 'name', None)!r}; name it {role!r} "
                "(its messages speak as its role, and the role's policy judges them)"
            )
    return dict(given)
