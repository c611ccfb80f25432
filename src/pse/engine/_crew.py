"""What a cycle works with and what it comes to: the crew, the run's control, the cycle's spec and outcome.

These are data, shared by the cycle (`_cycle`), step mode (`_steps`) and the role loop (`_role_loop`), so
none of those modules needs another's: each imports this one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from autogen_agentchat.base import ChatAgent

from pse.engine._events import RunEvents
from pse.engine._graph import StepSpec
from pse.engine._ledger import Ledger
from pse.engine._state import StateMachine
from pse.engine._stop import CycleStop, RunStop
from pse.events import (
    BlockedRecord,
    ClarificationRecord,
    GateRecord,
    PlanRecord,
    ToolCallRecord,
    VerdictRecord,
)
from pse.team import ContextFactory, RoleSetup

__all__ = [
    "Crew",
    "CycleKind",
    "CycleOutcome",
    "GateFn",
    "NextCycle",
    "RunControl",
    "StepCrew",
    "StepScope",
    "StepWiring",
]

CycleKind = Literal["initial", "revise", "replan"]


@dataclass(frozen=True)
class NextCycle:
    """The cycle the run's state calls for: its kind, the roles' phases in order, and what crosses into it.

    Attributes:
        kind: initial, revise (after a PARTIAL: the Specialist starts) or replan (after a FAIL).
        roles: the phases, in order.
        packet: the task message of the cycle (the task, plus the step_buffer after the first cycle).
        step_buffer: what crossed from the previous cycle (None on the first).
        briefs: role → the text that replaces the packet in its context (the bare task on a revise).
        carried: final messages of an earlier cycle that still hold, placed before this cycle's own
            (the fixed plan on a revise, as the Planner's: the same text the first cycle's roles saw).
        notes: role → a message placed after the finals in its context (the step_buffer for the
            Specialist on a revise), so everything before it is a prefix an earlier prompt sent.
    """

    kind: CycleKind
    roles: tuple[str, ...]
    packet: str
    step_buffer: str | None = None
    briefs: Mapping[str, str] = field(default_factory=dict)
    carried: tuple[tuple[str, str], ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass
class CycleOutcome:
    """What a cycle came to. At most one of verdict / review_error is set; `stop` when it was cut short."""

    plan: PlanRecord | None = None
    verdict: VerdictRecord | None = None
    review_error: str | None = None
    blocked: BlockedRecord | None = None
    clarification: ClarificationRecord | None = None
    stop: CycleStop | None = None
    step_failure: str | None = None
    """execution = steps: a step failed, or went over its retries (the engine re-plans)."""
    review_plan: PlanRecord | None = None
    """execution = steps: the part of the plan the final verdict judges (its gates use it)."""


@dataclass(frozen=True)
class StepScope:
    """What a step's ToolAgent enforces: the step its calls belong to, and (for its Specialist) the only
    paths `write_file` may write."""

    step: str
    outputs: frozenset[str] | None = None
    """None: writes are not narrowed (the step's review)."""


@dataclass(frozen=True)
class StepCrew:
    """What the runner gives step mode: each role's setup for a step (its own cassette stream and
    client), and a ToolAgent that enforces a `StepScope`."""

    role: Callable[[str, str], RoleSetup]
    tool_agent: Callable[[StepScope], ChatAgent]


GateFn = Callable[[VerdictRecord | None, PlanRecord, Sequence[ToolCallRecord]], GateRecord]


@dataclass
class StepWiring:
    """What step mode needs beside the crew: per-step roles and ToolAgents, the step gate, the limits.

    Attributes:
        role: (role, step) → that role's setup for the step (its own cassette stream).
        tool_agent: a ToolAgent that enforces `StepScope`.
        gate: the step's hard gates over (its verdict, its sub-plan, the attempt's tool calls).
        kept: steps that passed in earlier cycles and are still in the plan (set by the engine).
    """

    role: Callable[[str, str], RoleSetup]
    tool_agent: Callable[[StepScope], ChatAgent]
    gate: GateFn
    workspace: Path
    max_retries: int
    parallel: int
    max_steps: int
    step_buffer_tokens: int
    kept: dict[str, StepSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class Crew:
    """Who works in a cycle: the roles, the ToolAgent beside them, and how their contexts open."""

    roles: Mapping[str, RoleSetup]
    tool_agent: ChatAgent
    contexts: ContextFactory
    turns_per_cycle: int
    format_retries: int = 1
    questions: bool = False  # the Planner may ask a person (PSE_PLANNER_QUESTIONS)
    steps: StepWiring | None = None  # execution = steps: the plan's steps run one by one (`_steps`)
    missing: Callable[[Sequence[str]], list[str]] | None = None
    """Which of these workspace paths do not exist: a Specialist's report before every output of the plan
    is written is sent back once, as a format repair (small models report after the first file)."""
    broken: Callable[[Sequence[str]], list[str]] | None = None
    """Why each of these workspace paths that is Python does not parse (`unparsed_outputs`): a report over
    a broken output is sent back once, like one over a missing output."""
    finds_test: Callable[[str], bool] | None = None
    """Whether a named test is a test function of the workspace (`names_a_test`): a SPEC_CONFLICT naming
    none is asked about once."""
    owed: Callable[[Sequence[ToolCallRecord]], list[str]] | None = None
    """The required checks an Evaluator's PASS comes before (`evidence_owed`): such a PASS is sent back once,
    so a model that forgot a check runs it in its phase instead of losing the cycle to a hard gate."""
    conflicts: bool = True
    """The task gave tests (its seed, an instance's files), so a role may report a SPEC_CONFLICT: a given
    test that contradicts the specification. Without any, a verdict for SPEC_CONFLICT is asked about once."""
    shown: Callable[[Sequence[str]], str | None] | None = None
    """What these workspace paths hold now, for the Evaluator's opening (`outputs_note`): the outputs it
    judges, read by PSE as its phase starts, so a small model spends no turn reading them."""


@dataclass(frozen=True)
class RunControl:
    """The run's state a cycle works against: the state machine, the ledger, the event sink, and the
    run's one stop (`RunStop`: why it stopped, the cycle's cancellation token)."""

    machine: StateMachine
    ledger: Ledger
    events: RunEvents
    stop: RunStop
