"""The team on AutoGen: role agents, the ToolAgent beside them, deterministic routing, scoped contexts."""

from pse.team._clients import FailureBox, FailureTrackingClient, UnusedSelectorClient
from pse.team._context import ScopedContext
from pse.team._routing import TASK_SOURCE, TOOL_AGENT, CycleEnd, cycle_end_reason, next_speaker
from pse.team._team import RoleSetup, SpeakerOrder, build_role_agents, build_team

__all__ = [
    "TASK_SOURCE",
    "TOOL_AGENT",
    "CycleEnd",
    "FailureBox",
    "FailureTrackingClient",
    "RoleSetup",
    "ScopedContext",
    "SpeakerOrder",
    "UnusedSelectorClient",
    "build_role_agents",
    "build_team",
    "cycle_end_reason",
    "next_speaker",
]
