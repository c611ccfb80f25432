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
from pse.events import SandboxRecord
from pse.models import PrefixMeter, UsageMeter
from pse.roles import CrewSpec
from pse.team import RoleSetup
from pse.trace import Trace

__all__ = ["PriceFn", "RunSetup", "ToolRuntime"]


class ToolRuntime(ToolStop, Protocol):
    """The part of the ToolAgent's executor the engine uses (its records arrive pushed, in `RunEvents`);
    what a stop reaches (its clock, its halt, its failure) is `ToolStop`'s."""

    def new_cycle(self) -> None:
        """Reset the per-cycle call budgets."""
        ...

    def role_written_config(self) -> Mapping[str, str]:
        """Check-configuration files in the workspace that a role wrote, with their author."""
        ...


@dataclass
class RunSetup:
    """Everything one run is made of. The runner builds it; the engine only uses it.

    Attributes:
        limits: what the run may spend and repeat (turns, retries, steps, tokens, money, time).
        recorded_settings: the run's settings as its trace records them (secrets removed).
        context_mode: how the roles' contexts open each cycle (`step_buffer`, or `history`: the
            baseline that carries the whole history).
        planner_questions: the Planner may ask a person instead of assuming (PSE_PLANNER_QUESTIONS).
        hard_gates: a PASS is held to the hard gates (false: the Evaluator's word alone; an ablation).
        crew: who speaks, in which order, and how their review is judged (`Settings.crew`); `roles`
            holds a setup for each of its speakers.
        events: the run's one event sink; the executor pushes its audit records into it.
        meter: where the roles' model clients report every call's usage; the engine's ledger listens.
        prefixes: measures how much of each prompt repeats one sent before (the ledger listens).
        price: prices each model call (None: every call costs 0).
        positions: cassette turns consumed per role (scripted runs), saved so a run can resume.
        sandbox: which sandbox runs the tool commands (recorded in the trace).
        injected_retrievals: (query, citations) retrieved before the run and put in the task message;
            filed in cycle 1.
        approvals: where tool calls held for a person wait (the executor's approver); None: no call
            is ever held.
        steps: per-step roles and ToolAgents, when the task's execution is "steps" (None: "task").
        index: called after every write of the trace, with the trace and its file: writes the run's
            row in the run store (None: no store).
        conclude: the run's last work once its outcome is set and before the outcome event announces
            it, run in a worker thread; it may add to the trace (a repository run commits its change
            here, so whoever hears the outcome finds the branch and commit in the trace).
    """

    run_id: str
    task: str
    task_message: str
    roles: Sequence[RoleSetup]
    tool_agent: ChatAgent
    tools: ToolRuntime
    workspace: Path
    run_dir: Path
    limits: LoopLimits
    recorded_settings: Mapping[str, object]
    crew: CrewSpec
    events: RunEvents
    context_mode: ContextMode = "step_buffer"
    planner_questions: bool = False
    hard_gates: bool = True
    meter: UsageMeter = field(default_factory=UsageMeter)
    prefixes: PrefixMeter = field(default_factory=PrefixMeter)
    gates: GatePolicy = field(default_factory=GatePolicy)
    inputs: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    price: PriceFn | None = None
    positions: Callable[[], dict[str, int]] | None = None
    sandbox: SandboxRecord | None = None
    injected_retrievals: Sequence[tuple[str, list[dict[str, Any]]]] = ()
    approvals: ApprovalDesk | None = None
    steps: StepCrew | None = None
    index: Callable[[Trace, Path], None] | None = None
    conclude: Callable[[Trace], object] | None = None
