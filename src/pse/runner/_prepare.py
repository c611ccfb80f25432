"""Preparing a run: its folder and workspace seeded, its policy, sandbox, models and event sink wired."""

from __future__ import annotations

import functools
import os
import stat
import threading
import time
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
    RunEvents,
    RunSetup,
    StepCrew,
    Trace,
    check_run_id,
    interrupted_cycle,
    load_trace,
    new_run_id,
    prune_runs,
)
from pse.events import Cost, Event, SandboxRecord
from pse.exceptions import CassetteError, ConfigError, UserError
from pse.knowledge import RunKnowledge
from pse.models import (
    Cassette,
    CassettePlayer,
    CassetteRecorder,
    ConstraintLog,
    PrefixClient,
    PrefixMeter,
    ResumedTurnsClient,
    Scrubber,
    Turn,
    UsageMeter,
    create_model_client,
    price_of,
)
from pse.repo import remove_worktree
from pse.roles import ALL_ROLES, ROLES, SINGLE_AGENT, TOOL_AGENT, Role
from pse.runner._index import StoreIndexer
from pse.runner._mcp import McpSetup, has_mcp_tools, start_mcp
from pse.runner._repository import RunRepository, load_repository, open_repository, repository_brief
from pse.tasks import (
    Task,
    TaskRegistry,
    findings_prompt,
    independent_tests_prompt,
    mcp_prompt,
    questions_prompt,
    seeded_files,
    spec_conflict_prompt,
    steps_prompt,
    write_files,
)
from pse.team import RoleSetup
from pse.telemetry import RunTelemetry, telemetry_for
from pse.toolagent import (
    Policy,
    RecordingToolRunner,
    ReplayingToolRunner,
    ToolAgent,
    ToolExecutor,
    ToolRunner,
    render_tool_catalog,
    run_tools,
    tool_functions,
    tool_signatures,
)
from pse.tools import EvidenceRules, is_test_file

__all__ = ["PreparedRun", "prepare_resume", "prepare_run", "registry_for", "user_tasks_dir"]


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


def user_tasks_dir(settings: Settings) -> Path:
    """Where the user's tasks live: PSE_TASKS_DIR or --tasks-dir, else ./tasks (where `pse new` writes)."""
    return settings.tasks_dir or Path("tasks")


def registry_for(settings: Settings) -> TaskRegistry:
    """The task registry: built-in tasks plus the user's tasks directory, PSE_TASKS_DIR / --tasks-dir,
    else ./tasks when it holds tasks (registered or not: an unregistered task folder is warned about)."""
    extra = user_tasks_dir(settings).resolve()  # absolute: check commands run with the workspace as cwd
    return TaskRegistry.discover(extra, optional=settings.tasks_dir is None)


def _task_settings(settings: Settings, task: Task) -> Settings:
    """The settings with the task's limit overrides applied (validated by the settings model)."""
    limits = task.config.limits.model_dump(exclude_none=True)
    overrides = {k: v for k, v in limits.items() if k in _LIMIT_FIELDS}
    return with_overrides(settings, f"limit override of task {task.name!r}", **overrides)


def _wire(**arguments: Any) -> PreparedRun:
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
) -> PreparedRun:
    settings = _task_settings(settings, task)
    if limits:  # the caller's limits (an evaluation suite's) win over the task's own
        settings = with_overrides(settings, "limit override of the suite", **limits)
    # Who speaks: the three roles, or (PSE_TEAM=single, the evaluation baseline) one Agent.
    speakers = (SINGLE_AGENT,) if settings.team == "single" else ROLES
    specs = {role: settings.model_spec(role) for role in speakers}
    telemetry = telemetry_for(settings, run_id)  # PSE_OTEL: AutoGen's spans go under the cycle span
    events = RunEvents(run_id, telemetry.watch(on_event) if telemetry is not None else on_event)
    scrubber = Scrubber(settings.secrets())  # the recorder's rule: digests are of scrubbed text
    cassette = settings.cassette or task.cassette_path
    player: CassettePlayer | None = None
    if any(spec.provider == "scripted" for spec in specs.values()):
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
        if settings.team == "single" and SINGLE_AGENT not in player.positions:
            raise CassetteError(
                f"cassette {cassette} scripts no turns for {SINGLE_AGENT!r}, the one speaker of "
                "PSE_TEAM=single: pass a cassette with Agent turns (record one with --record FILE), "
                "or unset PSE_TEAM"
            )
    recorder = CassetteRecorder(settings.record, secrets=settings.secrets()) if settings.record else None
    replay = _tool_replay(task, cassette, player, scrubber, positions) if settings.replay_tools else None
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
        policy = policy.with_human_grants(_human_grants(trace))
    evaluation_dir = None
    if settings.team == "single":
        policy = policy.with_single_agent(SINGLE_AGENT)
    elif verification.independent_tests:
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
        task_dir=task.dir,
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
    extra: dict[str, str] = {Role.EVALUATOR: independent_tests_prompt()} if evaluation_dir is not None else {}
    if settings.planner_questions:
        if settings.protocol != "dsml":
            raise ConfigError(
                "PSE_PLANNER_QUESTIONS works with the XML protocol only for now: set PSE_PROTOCOL=dsml, "
                "or PSE_PLANNER_QUESTIONS=false"
            )
        extra[Role.PLANNER] = questions_prompt()
    if task.config.execution == "steps" and settings.team == "pse":
        extra[Role.PLANNER] = "\n\n".join(filter(None, [extra.get(Role.PLANNER), steps_prompt()]))
    if repository is not None and settings.protocol == "dsml" and Role.EVALUATOR in speakers:
        extra[Role.EVALUATOR] = "\n\n".join(filter(None, [extra.get(Role.EVALUATOR), findings_prompt()]))
    for role in speakers if mcp is not None else ():
        if has_mcp_tools(role, policy, knowledge.registry):
            extra[role] = "\n\n".join(filter(None, [extra.get(role), mcp_prompt()]))
    # Tests the task gave (its seed, an evaluation instance's files) are protected evidence; a role that
    # finds one contradicting the specification has an honest way out, and is told so (XML protocol).
    given = [
        p for p in seeded_files(task_message) if is_test_file(p) and p not in task.config.expected_outputs
    ]
    honest = (Role.SPECIALIST, Role.EVALUATOR, SINGLE_AGENT) if given and settings.protocol == "dsml" else ()
    for role in (r for r in honest if r in speakers):
        extra[role] = "\n\n".join(filter(None, [extra.get(role), spec_conflict_prompt()]))
    system = {
        role: task.system_prompt(role, settings.protocol)
        + (f"\n{extra[role]}\n" if role in extra else "")
        + "\n## Your tools\n"
        + render_tool_catalog(role, policy, knowledge.registry, settings.protocol)
        for role in speakers
    }
    own = _own_agents(agents or {}, speakers)
    roles = [
        RoleSetup(name=role, system_message=system[role], client=clients[role], agent=own.get(role))
        for role in speakers
    ]
    # Each role's AutoGen team is built at its first phase, inside the run (AutoGen's create_agent span
    # then belongs to the run's trace), and reset before each later one.
    tool_agent = ToolAgent(executor)
    step_crew: StepCrew | None = None
    if task.config.execution == "steps" and settings.team == "pse":
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
        settings=settings,
        gates=GatePolicy(
            required_checks=list(task.config.required_checks),
            expected_outputs=list(task.config.expected_outputs),
            targets=dict(verification.targets),
            independent_tests=evaluation_dir is not None,
            check_config=task.check_config_files,
            block_findings=verification.block_findings,
        ),
        inputs=inputs,
        tags=dict(tags or (trace.tags if trace is not None else {})),
        price=price,
        positions=_positions(player, replay),
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


def _own_agents(agents: Mapping[str, ChatAgent], speakers: tuple[str, ...]) -> dict[str, ChatAgent]:
    """The user's own agents, each for a role of this run and named as it (the ToolAgent judges a request
    by the seat it came from, which is the role's name).

    Raises:
        UserError: a key that is no role of this run, or an agent named otherwise than its role.
    """
    for role, agent in agents.items():
        if role not in speakers:
            raise UserError(f"agents: {role!r} is no role of this run; give one of {', '.join(speakers)}")
        if getattr(agent, "name", None) != role:
            raise UserError(
                f"agents: the agent for {role} is named {getattr(agent, 'name', None)!r}; name it {role!r} "
                "(its messages speak as its role, and the role's policy judges them)"
            )
    return dict(agents)


def _human_grants(trace: Trace) -> list[tuple[str, str, str]]:
    grants = []
    for answer in trace.answers:
        for grant in answer.grants:  # ROLE.TOOL:MODE, checked when the answer was given
            head, _, mode = grant.partition(":")
            role, _, tool = head.partition(".")
            grants.append((role, tool, mode))
    return grants


def _tool_replay(
    task: Task,
    cassette: Path | None,
    player: CassettePlayer | None,
    scrubber: Scrubber,
    positions: dict[str, int] | None,
) -> ReplayingToolRunner:
    """`--replay-tools`: the runner that answers tool calls from the cassette's recorded tool runs."""
    if cassette is None:
        raise UserError(
            f"--replay-tools (PSE_REPLAY_TOOLS) answers tool calls from a recording, and task {task.name!r} "
            "has no cassette: pass --cassette FILE, a cassette recorded with --record FILE"
        )
    runs = (player.cassette if player is not None else Cassette.from_file(cassette)).tool_runs
    if not runs:
        raise CassetteError(
            f"cassette {cassette} holds no recorded tool runs, so --replay-tools (PSE_REPLAY_TOOLS) has "
            f"nothing to answer tool calls with: record one with `pse run {task.name} --record FILE` "
            "(a recording keeps its tool runs), or run without --replay-tools"
        )
    return ReplayingToolRunner(
        runs, source=str(cassette), position=(positions or {}).get(TOOL_AGENT, 0), scrub=scrubber.data
    )


def _positions(
    player: CassettePlayer | None, replay: ReplayingToolRunner | None
) -> Callable[[], dict[str, int]] | None:
    """What the trace saves to resume a replay: model turns per role, and tool runs (as the ToolAgent's)."""
    if player is None and replay is None:
        return None

    def positions() -> dict[str, int]:
        found = player.positions if player is not None else {}
        return found | ({TOOL_AGENT: replay.position} if replay is not None else {})

    return positions


_SWEEP_EVERY_S = 3600.0
"""A process sweeps a runs folder for expired runs at most this often (retention counts in days)."""

_swept: dict[Path, float] = {}
_sweep_lock = threading.Lock()


def _sweep(runs_dir: Path, retention_days: int, run_id: str) -> None:
    """Prune the runs folder's expired runs (PSE_TRACE_RETENTION_DAYS), once an hour per process: a
    sweep reads every run folder, so sweeping before each run made a run's start grow with the folder."""
    now = time.monotonic()
    with _sweep_lock:
        last = _swept.get(runs_dir)
        if last is not None and now - last < _SWEEP_EVERY_S:
            return
        _swept[runs_dir] = now
        prune_runs(runs_dir, retention_days, keep={run_id})


def prepare_run(
    task_name: str,
    settings: Settings,
    *,
    inputs: dict[str, str] | None = None,
    on_event: Callable[[Event], None] | None = None,
    run_id: str | None = None,
    files: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
    limits: Mapping[str, Any] | None = None,
    agents: Mapping[str, ChatAgent] | None = None,
    repo: Path | None = None,
    base: str | None = None,
) -> PreparedRun:
    """Create the run folder and workspace, seed it, and wire the engine.

    Args:
        files: workspace path → content, written after the task's seed (an evaluation instance's
            files); listed in the task message with the seed.
        tags: labels kept in the trace (`pse eval` tags its runs with the eval, arm and instance).
        limits: engine limits that win over the task's own `[limits]` (a suite's).
        agents: role name → the user's own AutoGen `ChatAgent` for that role (named as the role): it
            takes the role's seat in the role's group chat, and is policed like the built-in one.
        repo: a git repository: the workspace is a worktree of it on the new branch `pse/<run_id>`
            (the repository's working tree, index, current branch and stash are never touched); a
            PASSED run commits its change there and writes `change.patch`.
        base: the ref the worktree starts from (default HEAD); only with `repo`.

    Raises:
        TaskNotFoundError: no such task.
        UserError / ConfigError / CassetteError: a bad input, setting or cassette (nothing is left behind).
    """
    task = registry_for(settings).get(task_name)
    resolved = task.resolve_inputs(inputs)
    run_id = run_id or new_run_id(task.name)
    runs_dir = settings.runs_dir.resolve()
    run_dir = runs_dir / run_id
    workspace = run_dir / "workspace"
    if repo is None and task.config.repository.required:
        raise UserError(
            f"task {task.name!r} works on a git repository; fix: pass --repo PATH (in Python: repo=PATH)"
        )
    if base is not None and repo is None:
        raise UserError(
            f"--base {base} needs --repo PATH; fix: pass the repository too (--repo PATH --base REF)"
        )
    _sweep(runs_dir, settings.trace_retention_days, run_id)
    run_dir.mkdir(parents=True)
    repository: RunRepository | None = None
    try:
        if repo is not None:
            repository = open_repository(task, repo, base, run_id, run_dir)
        else:
            workspace.mkdir()
        task.seed_workspace(workspace, resolved)
        extra = write_files(workspace, files or {})
        summary_md = workspace / "rules_summary.md"
        rules_summary = summary_md.read_text(encoding="utf-8") if summary_md.is_file() else None
        listed = [*extra, *sorted(repository.files.tracked)] if repository is not None else extra
        message = task.task_message(resolved, rules_summary, extra_files=listed)
        if repository is not None:
            message += "\n" + repository_brief(repository) + "\n"
        prepared = _wire(
            task=task,
            settings=settings,
            run_id=run_id,
            run_dir=run_dir,
            workspace=workspace,
            task_message=message,
            inputs=resolved,
            on_event=on_event,
            positions=None,
            trace=None,
            tags=tags,
            limits=limits,
            agents=agents,
            repository=repository,
        )
    except BaseException:
        import shutil

        remove_worktree(run_dir)  # nothing is left behind: no worktree, no branch
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return prepared


def prepare_resume(
    run_id: str,
    settings: Settings,
    *,
    on_event: Callable[[Event], None] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> PreparedRun:
    """Wire an engine that goes on with an interrupted run (same counters, same cassette position).

    Raises:
        UserError: the id is malformed, the run does not exist or it already has an outcome.
    """
    runs_dir = settings.runs_dir.resolve()
    run_dir = runs_dir / check_run_id(run_id)
    missing = UserError(f"no run {run_id!r} in {settings.runs_dir}; `pse trace list` shows the runs")
    if not (run_dir / "trace.json").is_file():
        raise missing
    # The run folder was written by tools: a symlinked trace is no run, and a symlinked workspace
    # would hand the resumed tools a directory outside the run.
    try:
        trace = load_trace(run_dir, beneath=runs_dir)
    except FileNotFoundError:
        raise missing from None
    except OSError as exc:
        raise UserError(f"cannot read the trace of run {run_id!r}: {exc}") from None
    workspace = run_dir / "workspace"
    if os.path.lexists(workspace) and not stat.S_ISDIR(os.lstat(workspace).st_mode):
        raise UserError(f"run {run_id!r} cannot resume: its workspace is not a real directory (a symlink?)")
    if trace.outcome is not None and not trace.outcome_reason.startswith("CANCELLED"):
        raise UserError(
            f"run {run_id} already ended {trace.outcome}; only interrupted or cancelled runs resume"
        )
    if trace.outcome is not None:  # cancelled: reopen it at the last cycle boundary
        trace = trace.reopened()
    task = registry_for(settings).get(trace.task)
    if trace.settings.get("cassette") and settings.cassette is None:
        settings = settings.model_copy(update={"cassette": Path(str(trace.settings["cassette"]))})
    if trace.settings.get("protocol") in (
        "dsml",
        "native",
    ):  # the run's turns are in the protocol it began with
        settings = settings.model_copy(update={"protocol": trace.settings["protocol"]})
    if trace.settings.get("replay_tools") is True:  # its tool runs go on from where the replay stood
        settings = settings.model_copy(update={"replay_tools": True})
    return _wire(
        task=task,
        settings=settings,
        run_id=run_id,
        run_dir=run_dir,
        workspace=workspace,
        task_message=trace.task_message,
        inputs=trace.inputs,
        on_event=on_event,
        positions=trace.cassette_positions,
        trace=trace,
        limits=limits,
        repository=load_repository(task, run_dir),
    )
