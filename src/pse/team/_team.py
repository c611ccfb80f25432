"""The roles' setups: what each LLM role is made of (name, system message, model client)."""

from __future__ import annotations

from dataclasses import dataclass

from autogen_core.models import ChatCompletionClient

from pse.roles import Role

__all__ = ["RoleSetup", "describe"]

_DESCRIPTIONS: dict[str, str] = {
    Role.PLANNER: "Defines the work and its acceptance criteria. Never executes, never judges.",
    Role.SPECIALIST: "Executes the plan inside its bounds and reports artifacts and evidence.",
    Role.EVALUATOR: "Judges each criterion against evidence it gathers itself. Never fixes.",
}


@dataclass(frozen=True)
class RoleSetup:
    """What one LLM role is made of: its name, full system message and model client."""

    name: str
    system_message: str
    client: ChatCompletionClient


def describe(role: str) -> str:
    """The one-line description AutoGen shows for a role's agent."""
    return _DESCRIPTIONS.get(role, role)
