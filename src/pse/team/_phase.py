"""A phase on AutoGen: one role and the ToolAgent in a `RoundRobinGroupChat`, until the role's final message.

The role speaks; a message holding `<tool_calls>` is answered by the ToolAgent, then the role speaks
again; a message without one is the role's final message (its plan, report, verdict or `<blocked>`)
and ends the phase. No model and no selector picks a speaker: AutoGen's round robin alternates the two.

**Built once, reset per phase.** Each role's group chat (`RoleTeam`: its `AssistantAgent`, or the user's
own `ChatAgent`, beside the ToolAgent) is built the first time the role works in a run and `reset()`
before each of its phases; the role's model context is then opened with what the phase's context
factory built. So a phase costs a reset and a run of AutoGen's team, not a team's construction.

**Ended by AutoGen termination conditions.** `RoleFinished` (the same `has_tool_calls` test the
ToolAgent's parser uses) or `TurnCap` (the cycle's remaining turns); after the run, their `fired`
flags say which one ended it.

**How a stop meets a turn in flight.** Each participant of the team is a `_Seat`: it runs its agent's
turn as a task the phase can see. A stop (the cycle's cancellation token) cancels a model call in
flight at once (the role's agent gets the token). The ToolAgent's turn is not cancelled: every stop
already ends the calls in flight (the deadline and a cancellation kill running commands, a
cancellation releases a held approval) and the executor records how each ended, so the phase waits
for that turn, up to `WIND_DOWN_S`, and keeps its message. A turn still busy after that (a call held
at the deadline) is left to end on its own (`_left_running`). Cancelling the task that runs the phase
cancels both turns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent, BaseChatAgent
from autogen_agentchat.base import ChatAgent, Response, TaskResult
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken, SingleThreadedAgentRuntime
from autogen_core.models import AssistantMessage, LLMMessage
from opentelemetry.trace import NoOpTracerProvider

from pse.protocol import has_tool_calls
from pse.team._clients import FailureBox, FailureTrackingClient
from pse.team._conditions import RoleFinished, TurnCap
from pse.team._team import RoleSetup, describe
from pse.team._withheld import WithholdingContext

__all__ = ["WIND_DOWN_S", "Phase", "RoleTeam"]

WIND_DOWN_S = 2.0
"""How long a stopped phase waits for the ToolAgent's turn in flight to end and be recorded."""


class _Stopped:
    """What a stop puts in a phase's queue of team items (after the items the team sent before it)."""


_STOPPED = _Stopped()

_left_running: set[asyncio.Task[Any]] = set()
"""ToolAgent turns a stopped phase stopped waiting for (a reference, so none is collected mid-way)."""


class _Seat(BaseChatAgent):
    """A participant of a phase's group chat: it runs its agent's turn as a task the phase can see (to wait
    for it, or cancel it), handing the agent the phase's cancellation token."""

    def __init__(self, inner: ChatAgent) -> None:
        super().__init__(inner.name, inner.description)
        self.inner = inner
        self.token = CancellationToken()
        self.turn: asyncio.Task[list[BaseAgentEvent | BaseChatMessage]] | None = None
        self.error: BaseException | None = None
        """What the last turn raised, as raised (AutoGen's runtime hands the team only its text)."""

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        return self.inner.produced_message_types

    async def on_messages(
        self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken
    ) -> Response:
        response: Response | None = None
        async for item in self.on_messages_stream(messages, cancellation_token):
            if isinstance(item, Response):
                response = item
        assert response is not None
        return response

    async def on_messages_stream(
        self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken
    ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage | Response, None]:
        self.turn = asyncio.ensure_future(_turn(self.inner, messages, self.token))
        try:
            items = await self.turn
        except BaseException as exc:
            self.error = exc
            raise
        for item in items[:-1]:
            yield item
        final = items[-1]
        assert isinstance(final, BaseChatMessage)
        if final.source != self.name:
            # Who speaks is the seat PSE put the agent in, never what its message says: the ToolAgent
            # judges a request by its source, so an agent may not speak as another role.
            final = final.model_copy(update={"source": self.name})
        yield Response(chat_message=final)

    async def on_reset(self, cancellation_token: CancellationToken) -> None:
        self.turn, self.error = None, None
        await self.inner.on_reset(cancellation_token)


class RoleTeam:
    """One role's group chat for a whole run: its agent's seat and the ToolAgent's, ended by the role's
    final message or the turn cap. `Phase` resets it and opens the role's context before each phase.

    Args:
        role: the role's setup; its `agent` (a user's own `ChatAgent`), if any, takes the role's seat,
            else an `AssistantAgent` is built from its system message and client.
        tool_agent: answers the role's tool requests (the run's, or a step's).
    """

    def __init__(self, role: RoleSetup, tool_agent: ChatAgent) -> None:
        self.role = role
        self.client = FailureTrackingClient(role.client, FailureBox())
        self.finished = RoleFinished(role.name)
        self.cap = TurnCap(0)
        self.agent: ChatAgent = role.agent or AssistantAgent(
            name=role.name,
            model_client=self.client,
            system_message=role.system_message,
            description=describe(role.name),
            model_context=WithholdingContext(room=self.cap.room),
            model_client_stream=False,
        )
        self.seat, self.tool_seat = _Seat(self.agent), _Seat(tool_agent)
        # The team's runtime is PSE's, started for each phase and stopped after it: its per-hop spans
        # (publish, process) are not traced; each agent turn still gets AutoGen's `invoke_agent` span.
        self.runtime = SingleThreadedAgentRuntime(
            ignore_unhandled_exceptions=False, tracer_provider=NoOpTracerProvider()
        )
        self.group = RoundRobinGroupChat(
            [self.seat, self.tool_seat],
            termination_condition=self.finished | self.cap,
            runtime=self.runtime,
        )
        self.busy = False
        """A stopped phase left this team's run going (a ToolAgent turn past its wind-down)."""
        self.used = False
        """The team has run a phase (the next one resets it first)."""

    @classmethod
    def of(cls, role: RoleSetup, tool_agent: ChatAgent) -> RoleTeam:
        """The run's team for this role and ToolAgent: built the first time, then the same one (a new one
        when the last is still winding down a stopped phase)."""
        key = id(tool_agent)
        team = role.teams.get(key)
        if team is None or team.busy:
            team = role.teams[key] = cls(role, tool_agent)
        return team


class Phase:
    """One role's phase: its team, reset and its context opened with `opening`, beside the ToolAgent.

    Args:
        role: who works.
        opening: the messages the role's model context starts with (a user's own agent gets them as the
            task of the team's run).
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
        self.team = RoleTeam.of(role, tool_agent)
        self.opening = opening
        self.box = box
        self.max_turns = max_turns

    @property
    def agent(self) -> ChatAgent:
        return self.team.agent

    @property
    def finished(self) -> RoleFinished:
        return self.team.finished

    @property
    def cap(self) -> TurnCap:
        return self.team.cap

    async def _open(self, token: CancellationToken) -> list[BaseChatMessage] | None:
        """Reset the team and open the role's context; the task messages of the run (a user's own agent
        gets its opening so, PSE's `AssistantAgent` has it in its model context: no task message)."""
        team = self.team
        if team.used:  # a fresh team needs no reset: its first run starts from the beginning
            await team.group.reset()
        team.used = True
        team.finished.rearm()
        team.cap.rearm(self.max_turns)
        team.client.box = self.box
        team.seat.token = team.tool_seat.token = token
        if isinstance(team.agent, AssistantAgent) and team.role.agent is None:
            for message in self.opening:
                await team.agent.model_context.add_message(message)
            return None
        return [
            TextMessage(
                source=getattr(m, "source", "user") or "user",
                content=m.content if isinstance(m.content, str) else str(m.content),
            )
            for m in self.opening
            if not isinstance(m, AssistantMessage)
        ]

    async def run_stream(
        self, cancellation_token: CancellationToken
    ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage, None]:
        """The phase's events and messages as they come, the role's first; ends after the message on
        which `finished` or `cap` fired. A cancelled token raises CancelledError (module docstring)."""
        team = self.team
        team.runtime.start()
        items: asyncio.Queue[BaseAgentEvent | BaseChatMessage | TaskResult | BaseException | _Stopped] = (
            asyncio.Queue()
        )

        async def pump() -> None:
            try:
                async for item in team.group.run_stream(task=task, output_task_messages=False):
                    await items.put(item)
            except BaseException as exc:  # the team's failure reaches the phase as an item
                await items.put(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise

        try:
            task = await self._open(cancellation_token)
        except BaseException:
            await team.runtime.stop()
            raise
        running = asyncio.create_task(pump())
        # A stop joins the queue behind whatever the team sent before it: those items come first.
        cancellation_token.add_callback(lambda: items.put_nowait(_STOPPED))
        tool_turn = ended = False
        try:
            while True:
                item = await items.get()
                if isinstance(item, _Stopped):
                    if tool_turn and team.tool_seat.turn is not None:
                        for kept in await self._wind_down(items, running):
                            yield kept
                    raise asyncio.CancelledError("the phase was stopped")
                if isinstance(item, TaskResult):
                    ended = True
                    return
                if isinstance(item, BaseException):
                    raise self._failure(item)
                yield item
                if isinstance(item, BaseChatMessage):
                    tool_turn = item.source == team.role.name and has_tool_calls(item.to_text())
        finally:
            if not team.busy:
                await self._close(running, ended)

    async def _close(self, running: asyncio.Task[None], ended: bool) -> None:
        """End the phase's team run: after its natural end, let the runtime finish what it holds; after
        a stop, a failure or the cancellation of the task running the phase, cut every turn short."""
        team = self.team
        if ended:
            with contextlib.suppress(Exception):
                await running
            with contextlib.suppress(Exception):
                await team.runtime.stop_when_idle()
            return
        for seat in (team.seat, team.tool_seat):
            if seat.turn is not None and not seat.turn.done():
                seat.turn.cancel()
        running.cancel()
        with contextlib.suppress(BaseException):
            await running
        with contextlib.suppress(Exception):
            await team.runtime.stop()

    def _failure(self, exc: BaseException) -> BaseException:
        """What the phase raises when the team's run failed: the exception a turn raised, as raised (a
        model's typed failure, a refused call), else the team's own."""
        for seat in (self.team.seat, self.team.tool_seat):
            if seat.error is not None:
                return seat.error
        return exc

    async def _wind_down(
        self, items: asyncio.Queue[Any], running: asyncio.Task[None]
    ) -> list[BaseAgentEvent | BaseChatMessage]:
        """A stop came while the ToolAgent worked: wait for its message (up to `WIND_DOWN_S`) and return
        it to keep; the team's run then ends on its own (the next model call is refused by the closed
        box). A turn still busy is left to end on its own, and the phase is stopped without it."""
        team = self.team
        turn = team.tool_seat.turn
        assert turn is not None
        loop = asyncio.get_running_loop()
        until = loop.time() + WIND_DOWN_S
        await asyncio.wait((turn,), timeout=WIND_DOWN_S)
        if turn.done():
            kept: list[BaseAgentEvent | BaseChatMessage] = []
            while loop.time() < until:
                try:
                    item = await asyncio.wait_for(items.get(), until - loop.time())
                except TimeoutError:
                    break
                if item is _STOPPED:
                    continue
                if not isinstance(item, BaseAgentEvent | BaseChatMessage):
                    break
                kept.append(item)
                if isinstance(item, BaseChatMessage) and item.source == team.tool_seat.name:
                    break
            return kept
        team.busy = True  # the next phase of this role gets a new team; this one ends on its own
        _left_running.add(turn)
        turn.add_done_callback(_left_running.discard)
        turn.add_done_callback(lambda _: asyncio.ensure_future(self._settle(running)))
        raise asyncio.CancelledError("the phase was stopped while the ToolAgent worked")

    async def _settle(self, running: asyncio.Task[None]) -> None:
        """A ToolAgent turn left running has ended: end its team's run too (the role's next turn is
        refused by the closed box) and stop the team's runtime."""
        self.team.busy = False
        await self._close(running, ended=False)


async def _turn(
    agent: ChatAgent, heard: Sequence[BaseChatMessage], cancellation_token: CancellationToken
) -> list[BaseAgentEvent | BaseChatMessage]:
    """One turn of `agent`: the events it streamed, then its message."""
    items: list[BaseAgentEvent | BaseChatMessage] = []
    async for item in agent.on_messages_stream(heard, cancellation_token):
        if isinstance(item, Response):
            items.append(item.chat_message)
            return items
        items.append(item)
    raise RuntimeError(f"{agent.name} ended its turn without a response")
