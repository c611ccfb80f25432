"""The loop engine: cycles, verdict gates, retries, budgets, step_buffer, the state machine and the trace."""

from pse.engine._approvals import (
    APPROVALS_DIR,
    ApprovalDecision,
    ApprovalDesk,
    read_decision,
    write_decision,
)
from pse.engine._briefs import NextCycle
from pse.engine._crew import Crew, RunControl, StepCrew, StepScope, StepWiring
from pse.engine._decide import Judgement, Rules, RunState, decide, judge, kept_steps
from pse.engine._engine import Engine
from pse.engine._escalation import build_escalation, write_escalation
from pse.engine._events import EventSink, RunEvents
from pse.engine._gates import GatePolicy, evaluate_gates
from pse.engine._graph import StepSpec, graph_problem, step_specs, task_criteria
from pse.engine._ledger import Ledger
from pse.engine._limits import LoopLimits
from pse.engine._lock import LOCK_FILE, holding_run, run_is_live
from pse.engine._resume import Resume
from pse.engine._run_id import RUN_ID_PATTERN, check_run_id, is_run_id, new_run_id
from pse.engine._setup import PriceFn, RunMeters, RunOpening, RunSetup, RunStorage, RunTeam, ToolRuntime
from pse.engine._state import TERMINAL, IllegalTransition, State, StateMachine, check_transition
from pse.engine._step_buffer import artifact_list, fit_to_tokens, replan_packet, revise_packet
from pse.engine._stop import RunStop, StopKind, StopReason, ToolStop
from pse.engine._values import (
    AskAgain,
    CycleStop,
    EndCycle,
    EndStep,
    Final,
    Halted,
    Move,
    Next,
    PhaseResult,
    RunPhase,
    RunSteps,
    Seen,
    StartCycle,
    StepsSettled,
    Stop,
)
from pse.trace import (
    TRACE_SCHEMA_VERSION,
    Cost,
    CycleRecord,
    RunTokens,
    Trace,
    load_trace,
    outcome_event,
    prune_runs,
    trace_schema,
    write_trace,
)

__all__ = [
    "APPROVALS_DIR",
    "LOCK_FILE",
    "RUN_ID_PATTERN",
    "TERMINAL",
    "TRACE_SCHEMA_VERSION",
    "ApprovalDecision",
    "ApprovalDesk",
    "AskAgain",
    "Cost",
    "Crew",
    "CycleRecord",
    "CycleStop",
    "EndCycle",
    "EndStep",
    "Engine",
    "EventSink",
    "Final",
    "GatePolicy",
    "Halted",
    "IllegalTransition",
    "Judgement",
    "Ledger",
    "LoopLimits",
    "Move",
    "Next",
    "NextCycle",
    "PhaseResult",
    "PriceFn",
    "Resume",
    "Rules",
    "RunControl",
    "RunEvents",
    "RunMeters",
    "RunOpening",
    "RunPhase",
    "RunSetup",
    "RunState",
    "RunSteps",
    "RunStop",
    "RunStorage",
    "RunTeam",
    "RunTokens",
    "Seen",
    "StartCycle",
    "State",
    "StateMachine",
    "StepCrew",
    "StepScope",
    "StepSpec",
    "StepWiring",
    "StepsSettled",
    "Stop",
    "StopKind",
    "StopReason",
    "ToolRuntime",
    "ToolStop",
    "Trace",
    "artifact_list",
    "build_escalation",
    "check_run_id",
    "check_transition",
    "decide",
    "evaluate_gates",
    "fit_to_tokens",
    "graph_problem",
    "holding_run",
    "is_run_id",
    "judge",
    "kept_steps",
    "load_trace",
    "new_run_id",
    "outcome_event",
    "prune_runs",
    "read_decision",
    "replan_packet",
    "revise_packet",
    "run_is_live",
    "step_specs",
    "task_criteria",
    "trace_schema",
    "write_decision",
    "write_escalation",
    "write_trace",
]
