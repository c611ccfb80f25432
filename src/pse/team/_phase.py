"""A phase on AutoGen: one role and the ToolAgent, in turn, until the role's final message.

The role speaks; a message holding `<tool_calls>` is answered by the ToolAgent, then the role speaks
again; a message without one is the role's final message (its plan, report, verdict or `<blocked>`)
and ends the phase. Two participants in a `RoundRobinGroupChat` alternate exactly like that, so no
model and no selector function picks a speaker. When a phase ends is decided by two typed termination
conditions: `RoleFinished` (the same `has_tool_calls` test the ToolAgent's parser uses) and `TurnCap`
(the cycle's remaining turns); after the run, their `fired` flags say which one ended it.
"""

from __future__ import annotations

from collections.abc import Sequence

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import ChatAgent, TerminationCondition
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import LLMMessage

from pse.protocol import has_tool_calls
from pse.team._clients import FailureBox, FailureTrackingClient
from pse.team._team import RoleSetup, describe

__all__ = ["Phase", "RoleFinished", "TurnCap"]


class _Condition(TerminationCondition):
    """A single-use termination condition that remembers whether it fired.

    AutoGen resets a team's condition when a run ends; a phase's conditions serve one run, and what
    they remember (`fired`) is what the engine reads after it, so a reset only rearms `terminated`.
    """

    def __init__(self) -> None:
        self.fired = False
        self._armed = True

    @property
    def terminated(self) -> bool:
        return self.fired and self._armed

    async def reset(self) -> None:
        self._armed = False


class RoleFinished(_Condition):
    """Fires on the first message of `role` that requests no tool: its final message of the phase."""

    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        for message in messages:
            mine = isinstance(message, BaseChatMessage) and message.source == self.role
            if mine and not has_tool_calls(message.to_text()):
                self.fired = True
                return StopMessage(content=f"{self.role} finished its turn", source="RoleFinished")
        return None


class TurnCap(_Condition):
    """Fires once the phase's participants have spoken `limit` times (tool turns included)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.count = 0

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        self.count += sum(1 for m in messages if isinstance(m, BaseChatMessage))
        if self.count >= self.limit:
            self.fired = True
            return StopMessage(content=f"turn cap of {self.limit} reached", source="TurnCap")
        return None


class Phase:
    """One role's phase: its agent (fresh, its context opened by the caller) beside the ToolAgent.

    Args:
        role: who works.
        opening: the messages the role's model context starts with.
        tool_agent: answers the role's tool requests.
        box: the cycle's failure box (model failures, and refusal of calls once the cycle stopped).
        max_turns: turns left in the cycle.
    """

    def __init__(
        self,
        role: RoleSetup,
        opening: list[LLMMessage],
        tool_agent: ChatAgent,
        box: FailureBox,
        max_turns: int,
    ) -> None:
        self.finished = RoleFinished(role.name)
        self.cap = TurnCap(max_turns)
        agent = AssistantAgent(
            name=role.name,
            model_client=FailureTrackingClient(role.client, box),
            system_message=role.system_message,
            description=describe(role.name),
            model_context=UnboundedChatCompletionContext(initial_messages=opening),
            model_client_stream=False,
        )
        self.team = RoundRobinGroupChat([agent, tool_agent], termination_condition=self.finished | self.cap)
