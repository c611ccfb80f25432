"""The team on AutoGen: each role works in a phase beside the ToolAgent; contexts are built explicitly.

A cycle is a sequence of phases (Planner, Specialist, Evaluator; a revise cycle starts at the
Specialist). A phase is one role and the ToolAgent in a two-participant round robin until the role's
final message; the engine runs the phases in order and applies the state table between them.
"""

from pse.team._clients import FailureBox, FailureTrackingClient
from pse.team._conditions import FINAL_TURNS, RoleFinished, TurnCap
from pse.team._contexts import ContextFactory, CycleOpening, HistoryContexts, ScopedContexts
from pse.team._phase import WIND_DOWN_S, Phase, RoleTeam
from pse.team._team import RoleSetup, describe
from pse.team._withheld import LAST_TURN_NOTICE, WITHHELD, WithholdingContext, withhold_broken_writes

__all__ = [
    "FINAL_TURNS",
    "LAST_TURN_NOTICE",
    "WIND_DOWN_S",
    "WITHHELD",
    "ContextFactory",
    "CycleOpening",
    "FailureBox",
    "FailureTrackingClient",
    "HistoryContexts",
    "Phase",
    "RoleFinished",
    "RoleSetup",
    "RoleTeam",
    "ScopedContexts",
    "TurnCap",
    "WithholdingContext",
    "describe",
    "withhold_broken_writes",
]
