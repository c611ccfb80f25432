"""The roles' setups: what each LLM role is made of (name, system message, model client)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autogen_agentchat.base import ChatAgent
from autogen_core.models import ChatCompletionClient

from pse.roles import ROLE_SPECS

__all__ = ["RoleSetup", "describe"]


@dataclass(frozen=True)
class RoleSetup:
    """What one LLM role is made of: its name, full system message and model client.

    `agent`, when given, is a user's own AutoGen `ChatAgent` that takes the role's seat instead of the
    `AssistantAgent` PSE builds: it gets the role's opening as its task and is policed like any role
    (its tool requests go through the ToolAgent under the role's policy, its final message through the
    engine's parser and gates). `teams` holds the role's group chats for the run (see `RoleTeam`).
    """

    name: str
    system_message: str
    client: ChatCompletionClient
    agent: ChatAgent | None = None
    teams: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)


def describe(role: str) -> str:
    """The one-line description AutoGen shows for a role's agent (its `RoleSpec`'s; else its name)."""
    spec = ROLE_SPECS.get(role)
    return spec.description if spec is not None else role
