"""A phase on AutoGen: one role and the ToolAgent, in turn, until the role's final message.

The role speaks; a message holding `<tool_calls>` is answered by the ToolAgent, then the role speaks
again; a message without one is the role's final message (its plan, report, verdict or `<blocked>`)
and ends the phase. No model and no selector picks a speaker: the two alternate, always.

The phase drives the two AutoGen agents itself, through their own streaming API
(`on_messages_stream`), handing each the other's last message, exactly what a two-member
`RoundRobinGroupChat` hands them. It does not start a group chat: a team brings an agent runtime,
a manager and a container per agent, a publish and a span per hop, and pydantic serialisation of
every message between them; for a fixed alternation of two agents that machinery chooses nothing,
and it cost more framework time per turn than the rest of PSE together. Each turn still opens
AutoGen's `invoke_agent` span, as the team's container did, and the cancellation token still
cancels the turn in flight.

When a phase ends is decided by two typed AutoGen termination conditions: `RoleFinished` (the same
`has_tool_calls` test the ToolAgent's parser uses) and `TurnCap` (the cycle's remaining turns);
after the run, their `fired` flags say which one ended it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Sequence

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import ChatAgent, Response, TerminationCondition
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage
from autogen_core import CancellationToken, trace_invoke_agent_span
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
        self.agent = AssistantAgent(
            name=role.name,
            model_client=FailureTrackingClient(role.client, box),
            system_message=role.system_message,
            description=describe(role.name),
            model_context=UnboundedChatCompletionContext(initial_messages=opening),
            model_client_stream=False,
        )
        self.tool_agent = tool_agent

    async def run_stream(
        self, cancellation_token: CancellationToken
    ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage, None]:
        """The phase's events and messages as they come, the role's first; ends after the message on
        which `finished` or `cap` fired. A cancelled token raises CancelledError (see `_tool_turn`)."""
        heard: list[BaseChatMessage] = []  # what the speaker has not seen: the other's last message
        for turn in itertools.count():
            if turn % 2 == 0:
                step = asyncio.ensure_future(_turn(self.agent, heard, cancellation_token))
                cancellation_token.link_future(step)  # a model call in flight is cancelled at once
                items = await step
            else:
                items = await self._tool_turn(heard, cancellation_token)
            for item in items:
                yield item
            message = items[-1]
            assert isinstance(message, BaseChatMessage)  # _turn ends with the response's message
            if await self.finished([message]) is not None or await self.cap([message]) is not None:
                return
            if cancellation_token.is_cancelled():
                raise asyncio.CancelledError("the phase was stopped")
            heard = [message]

    async def _tool_turn(
        self, heard: Sequence[BaseChatMessage], cancellation_token: CancellationToken
    ) -> list[BaseAgentEvent | BaseChatMessage]:
        """The ToolAgent's turn, which a stop does not cancel but waits for, up to `WIND_DOWN_S`.

        Every stop ends the calls in flight itself (the run's deadline and a cancellation kill running
        commands; a cancellation releases a call held for approval), and the executor then records
        how each ended: waiting for that, rather than cancelling the turn, keeps those records in
        the cycle. A turn still busy after `WIND_DOWN_S` (a slow MCP server, a call held at the
        deadline) is left to end on its own, as a group chat leaves it.
        """
        step = asyncio.ensure_future(_turn(self.tool_agent, heard, cancellation_token))
        stopped = asyncio.get_running_loop().create_future()
        cancellation_token.link_future(stopped)
        try:
            await asyncio.wait((step, stopped), return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                await asyncio.wait((step,), timeout=WIND_DOWN_S)
        except asyncio.CancelledError:
            step.cancel()  # the task running the phase was cancelled: nobody waits for the turn
            raise
        finally:
            stopped.cancel()
        if not step.done():
            _left_running.add(step)
            step.add_done_callback(_left_running.discard)
            raise asyncio.CancelledError("the phase was stopped while the ToolAgent worked")
        return step.result()


WIND_DOWN_S = 2.0
"""How long a stopped phase waits for the ToolAgent's turn in flight to end and be recorded."""

_left_running: set[asyncio.Future[list[BaseAgentEvent | BaseChatMessage]]] = set()
"""ToolAgent turns a stopped phase stopped waiting for (a reference, so none is collected mid-way)."""


async def _turn(
    agent: ChatAgent, heard: Sequence[BaseChatMessage], cancellation_token: CancellationToken
) -> list[BaseAgentEvent | BaseChatMessage]:
    """One turn of `agent`: the events it streamed, then its message."""
    items: list[BaseAgentEvent | BaseChatMessage] = []
    with trace_invoke_agent_span(agent_name=agent.name, agent_description=agent.description):
        async for item in agent.on_messages_stream(heard, cancellation_token):
            if isinstance(item, Response):
                items.append(item.chat_message)
                return items
            items.append(item)
    raise RuntimeError(f"{agent.name} ended its turn without a response")
