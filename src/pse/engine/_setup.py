"""What the engine needs for one run, wired by the runner. Interfaces, not implementations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from autogen_agentchat.base import ChatAgent

from pse.config import ContextMode
from pse.engine._approvals import ApprovalDesk
from pse.engine._crew import StepCrew
from pse.engine._events import RunEvents
from pse.engine._gates import GatePolicy
from pse.engine._ledger import PriceFn
from pse.engine._limits import LoopLimits
from pse.engine._stop import ToolStop
from pse.events import SandboxRecord, utc_now
from pse.models import PrefixMeter, UsageMeter
from pse.roles import CrewSpec
from pse.team import RoleSetup
from pse.trace import Trace

__all__ = ["PriceFn", "RunMeters", "RunOpening", "RunSetup", "RunStorage", "RunTeam", "ToolRuntime"]


class ToolRuntime(ToolStop, Protocol):
    """The part of the ToolAgent's executor the engine uses (its records arrive pushed, in `RunEvents`);
    what a stop reaches (its clock, its halt, its failure) is `ToolStop`'s."""

    def new_cycle(self) -> None:
        """Reset the per-cycle call budgets."""
        ...

    def role_written_config(self) -> Mapping[str, str]:
        """Check-configuration files in the workspace that a role wrote, with their author."""
        ...


@dataclass(frozen=True)
class RunOpening:
    """What a new run's trace opens with. A resumed run keeps its trace's own, except the sandbox it now
    runs under.

    Attributes:
        recorded_settings: the run's settings as its trace records them (secrets removed).
        sandbox: which sandbox runs the tool commands.
        injected_retrievals: (query, citations) retrieved before the run and put in the task message;
            filed in cycle 1.
    """

    run_id: str
    task: str
    task_message: str
    recorded_settings: Mapping[str, object]
    inputs: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    sandbox: SandboxRecord | None = None
    injected_retrievals: Sequence[tuple[str, list[dict[str, Any]]]] = ()

    def new_trace(self, context_mode: ContextMode) -> Trace:
        """A new run's state, as it opens (a resumed run's is loaded instead: `Resume`)."""
        return Trace(
            run_id=self.run_id,
            task=self.task,
            started_at=utc_now(),
            settings=dict(self.recorded_settings),
            inputs=dict(self.inputs),
            tags=dict(self.tags),
            context_mode=context_mode,
            task_message=self.task_message,
        )


@dataclass(frozen=True)
class RunTeam:
    """Who works, and how their phases open (the engine's `Crew` is built from it).

    Attributes:
        crew: who speaks, in which order, and how their review is judged (`Settings.crew`); `roles`
            holds a setup for each of its speakers.
        tool_agent: the ToolAgent that answers the roles' tool requests.
        steps: per-step roles and ToolAgents, when the task's execution is "steps" (None: "task").
        context_mode: how the roles' contexts open each cycle (`step_buffer`, or `history`: the
            baseline that carries the whole history).
        planner_questions: the Planner may ask a person instead of assuming (PSE_PLANNER_QUESTIONS).
        given_tests: the task gave tests (its seed, an instance's files): a role may report a
            SPEC_CONFLICT, a given test that contradicts the specification.
    """

    crew: CrewSpec
    roles: Sequence[RoleSetup]
    tool_agent: ChatAgent
    steps: StepCrew | None = None
    context_mode: ContextMode = "step_buffer"
    planner_questions: bool = False
    given_tests: bool = False


@dataclass(frozen=True)
class RunMeters:
    """Where the run's spending is measured; the engine's `Ledger` listens to both meters.

    Attributes:
        usage: where the roles' model clients report every call's usage.
        prefixes: measures how much of each prompt repeats one sent before.
        price: prices each model call (None: every call costs 0).
    """

    usage: UsageMeter = field(default_factory=UsageMeter)
    prefixes: PrefixMeter = field(default_factory=PrefixMeter)
    price: PriceFn | None = None


@dataclass(frozen=True)
class RunStorage:
    """Where the run is kept, and what each save of its trace writes besides the trace.

    Attributes:
        run_dir: the run folder (`trace.json`, the escalation, the lock).
        index: called after every write of the trace, with the trace and its file: writes the run's
            row in the run store (None: no store).
        positions: cassette turns consumed per role (scripted runs), saved so a run can resume.
    """

    run_dir: Path
    index: Callable[[Trace, Path], None] | None = None
    positions: Callable[[], dict[str, int]] | None = None


@dataclass
class RunSetup:
    """Everything one run is made of, in the parts its collaborators take: the trace opens with
    `opening`, the `Crew` is built from `team`, the `Ledger` listens to `meters`, every save goes to
    `storage`. The runner builds it; the engine only uses it.

    Attributes:
        tools: the ToolAgent's executor (budgets, the stop's reach, role-written configuration).
        workspace: the folder the roles work in, which the gates and the nudges read.
        limits: what the run may spend and repeat (turns, retries, steps, tokens, money, time).
        gates: what the hard gates demand of a PASS, and whether they hold it (`GatePolicy.enforced`).
        events: the run's one event sink; the executor pushes its audit records into it.
        approvals: where tool calls held for a person wait (the executor's approver); None: no call
            is ever held.
        conclude: the run's last work once its outcome is set and before the outcome event announces
            it, run in a worker thread; it may add to the trace (a repository run commits its change
            here, so whoever hears the outcome finds the branch and commit in the trace).
    """

    opening: RunOpening
    team: RunTeam
    tools: ToolRuntime
    workspace: Path
    storage: RunStorage
    limits: LoopLimits
    events: RunEvents
    gates: GatePolicy = field(default_factory=GatePolicy)
    meters: RunMeters = field(default_factory=RunMeters)
    approvals: ApprovalDesk | None = None
    conclude: Callable[[Trace], object] | None = None
