"""Build the PSE team on AutoGen: three AssistantAgents, the ToolAgent and a deterministic group chat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import ChatAgent
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage
from autogen_agentchat.teams import SelectorGroupChat
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import ChatCompletionClient

from pse.roles import Role
from pse.team._clients import FailureBox, FailureTrackingClient, UnusedSelectorClient
from pse.team._context import ScopedContext
from pse.team._routing import CycleEnd, next_speaker

__all__ = ["RoleSetup", "SpeakerOrder", "build_role_agents", "build_team"]

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


class SpeakerOrder:
    """The group chat's selector: deterministic, see `pse.team._routing.next_speaker`."""

    def __init__(self, first_speaker: str) -> None:
        self.first_speaker = first_speaker

    def __call__(self, thread: Sequence[BaseAgentEvent | BaseChatMessage]) -> str:
        return next_speaker(thread, self.first_speaker)


def build_role_agents(
    roles: Sequence[RoleSetup],
    box: FailureBox,
    briefs: Mapping[str, str | None] | None,
) -> dict[str, AssistantAgent]:
    """Build the three AssistantAgents with our own system messages and no native tools.

    Args:
        roles: the three roles' setups.
        box: collects the first infrastructure failure of any role's model.
        briefs: role → replacement text of the task message in that role's context; None means
            no scoping at all (every role sees the whole thread, as plain AutoGen does: the
            `history` baseline).
    """
    agents: dict[str, AssistantAgent] = {}
    for role in roles:
        context = (
            UnboundedChatCompletionContext()
            if briefs is None
            else ScopedContext(role.name, briefs.get(role.name))
        )
        agents[role.name] = AssistantAgent(
            name=role.name,
            model_client=FailureTrackingClient(role.client, box),
            system_message=role.system_message,
            description=_DESCRIPTIONS.get(role.name, role.name),
            model_context=context,
            model_client_stream=False,
        )
    return agents


def build_team(
    agents: Mapping[str, AssistantAgent], tool_agent: ChatAgent, order: SpeakerOrder, max_turns: int
) -> SelectorGroupChat:
    """One group chat for one cycle (or, in history mode, for the whole run)."""
    return SelectorGroupChat(
        participants=[*agents.values(), tool_agent],
        model_client=UnusedSelectorClient(),
        selector_func=order,
        termination_condition=CycleEnd(),
        max_turns=max_turns,
        allow_repeated_speaker=True,
    )
