"""The participants of a run, by name: the three LLM roles and the ToolAgent. The one place they are spelled.

Role names are a public contract (cassettes, traces, `PSE_<ROLE>_*` variables, policy tables); every
other module refers to them through `Role`. `Role` is a `StrEnum`, so a member equals its name as a
string and serializes as one.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ALL_ROLES", "ROLES", "SINGLE_AGENT", "TASK_SOURCE", "TOOL_AGENT", "Role"]


class Role(StrEnum):
    """An LLM role with separated powers."""

    PLANNER = "Planner"
    """Defines the work and its acceptance criteria; never executes, never judges."""
    SPECIALIST = "Specialist"
    """Executes inside its bounds and reports; never changes the criteria, never grades itself."""
    EVALUATOR = "Evaluator"
    """Judges each criterion against evidence it gathers itself; never fixes."""


ROLES: tuple[str, ...] = tuple(Role)
"""The role names (members of `Role`) in their speaking order, typed as the strings they are."""
SINGLE_AGENT = "Agent"
"""The one LLM agent of the `single` team (`PSE_TEAM=single`, the evaluation baseline): it does the work
and then reviews it itself, with the Specialist's and the Evaluator's tools. Not a PSE role: it has no
separated powers, which is what the baseline measures."""
ALL_ROLES: tuple[str, ...] = (*ROLES, SINGLE_AGENT)
"""Every LLM participant a cassette may script."""
TOOL_AGENT = "ToolAgent"
"""The group-chat name of the ToolAgent: a participant, not a role (no model, no policy of its own)."""
TASK_SOURCE = "user"
"""The source AutoGen gives the task message that opens a cycle."""
