"""A phase drives its role's AssistantAgent and the ToolAgent in turn, with no group chat between them.

What the engine relies on: strict alternation (the ToolAgent hears only the role's last message, the
role hears only the results), the end on the role's final message or the turn cap, and how a stop
meets a turn in flight: a model call is cancelled at once; the ToolAgent's turn is waited for (its
calls are being ended by the stop itself, and their records belong to the cycle), up to
`WIND_DOWN_S`, and cancelled with the task that runs the phase.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest
from autogen_agentchat.agents import BaseChatAgent
from autogen_agentchat.base import Response
from autogen_agentchat.messages import BaseChatMessage, TextMessage
from autogen_core import CancellationToken
from autogen_core.models import UserMessage

import pse.team._phase as phase_module
from pse.models import Cassette, CassettePlayer, ScriptedChatCompletionClient
from pse.roles import TASK_SOURCE, TOOL_AGENT
from pse.team import FailureBox, Phase, RoleSetup

CALL = '<tool_calls><invoke name="read_file"><parameter name="path">a.txt</parameter></invoke></tool_calls>'


class FakeToolAgent(BaseChatAgent):
    """Answers every request with a numbered result, after `hold` (an event it waits for, if set)."""

    def __init__(self, hold: asyncio.Event | None = None) -> None:
        super().__init__(TOOL_AGENT, "answers tool calls")
        self.heard: list[list[str]] = []
        self.hold = hold
        self.cancelled = False
        self.finished = 0

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        return (TextMessage,)

    async def on_messages(self, messages: Sequence[BaseChatMessage], token: CancellationToken) -> Response:
        self.heard.append([f"{m.source}: {m.to_text()}" for m in messages])
        try:
            if self.hold is not None:
                await self.hold.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished += 1
        return Response(chat_message=TextMessage(source=self.name, content=f"result {len(self.heard)}"))

    async def on_reset(self, token: CancellationToken) -> None:
        pass


def _phase(replies: list[str], tools: BaseChatAgent, *, latency_s: float = 0.0, max_turns: int = 20) -> Phase:
    cassette = Cassette.model_validate(
        {"version": 1, "turns": [{"role": "Specialist", "content": r} for r in replies]}
    )
    player = CassettePlayer(cassette, strict=False)
    player.latency_s = latency_s
    role = RoleSetup("Specialist", "You execute.", ScriptedChatCompletionClient(player, "Specialist"))
    opening = [UserMessage(content="the task", source=TASK_SOURCE)]
    return Phase(role, opening, tools, FailureBox(), max_turns)


async def _collect(phase: Phase, token: CancellationToken) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    async for item in phase.run_stream(token):
        if isinstance(item, BaseChatMessage):
            seen.append((item.source, item.to_text()))
    return seen


async def test_the_role_and_the_tool_agent_alternate_until_the_final_message() -> None:
    tools = FakeToolAgent()
    phase = _phase([CALL, CALL, "done: the report"], tools)
    seen = await _collect(phase, CancellationToken())
    assert seen == [
        ("Specialist", CALL),
        (TOOL_AGENT, "result 1"),
        ("Specialist", CALL),
        (TOOL_AGENT, "result 2"),
        ("Specialist", "done: the report"),
    ]
    # The ToolAgent hears only the request it answers; the role's context got each result as a user turn.
    assert tools.heard == [[f"Specialist: {CALL}"], [f"Specialist: {CALL}"]]
    context = await phase.agent.model_context.get_messages()
    assert [(type(m).__name__, m.content) for m in context] == [
        ("UserMessage", "the task"),
        ("AssistantMessage", CALL),
        ("UserMessage", "result 1"),
        ("AssistantMessage", CALL),
        ("UserMessage", "result 2"),
        ("AssistantMessage", "done: the report"),
    ]
    assert phase.finished.fired and not phase.cap.fired


async def test_the_turn_cap_ends_a_phase_that_never_finishes() -> None:
    phase = _phase([CALL] * 10, FakeToolAgent(), max_turns=3)
    seen = await _collect(phase, CancellationToken())
    assert [s for s, _ in seen] == ["Specialist", TOOL_AGENT, "Specialist"]
    assert phase.cap.fired and not phase.finished.fired


async def test_a_stop_cancels_a_model_call_in_flight_at_once() -> None:
    phase = _phase(["never sent"], FakeToolAgent(), latency_s=60)
    token = CancellationToken()
    asyncio.get_running_loop().call_later(0.05, token.cancel)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(_collect(phase, token), timeout=10)  # not the 60 s of the model's latency


async def test_a_stop_waits_for_the_tool_agent_turn_and_keeps_its_result() -> None:
    hold = asyncio.Event()
    tools = FakeToolAgent(hold)
    phase = _phase([CALL, "never asked"], tools)
    token = CancellationToken()
    seen: list[tuple[str, str]] = []

    async def stop_then_release() -> None:
        await asyncio.sleep(0.05)
        token.cancel()  # the stop kills the command in flight: its result comes back soon after
        await asyncio.sleep(0.05)
        hold.set()

    async def consume() -> None:
        async for item in phase.run_stream(token):
            if isinstance(item, BaseChatMessage):
                seen.append((item.source, item.to_text()))

    stopper = asyncio.ensure_future(stop_then_release())
    with pytest.raises(asyncio.CancelledError):
        await consume()
    await stopper
    assert seen == [("Specialist", CALL), (TOOL_AGENT, "result 1")]  # the result is in; no turn after it
    assert not tools.cancelled and tools.finished == 1


async def test_a_tool_agent_turn_busy_past_the_wind_down_is_left_to_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(phase_module, "WIND_DOWN_S", 0.05)
    hold = asyncio.Event()
    tools = FakeToolAgent(hold)
    phase = _phase([CALL, "never asked"], tools)
    token = CancellationToken()
    asyncio.get_running_loop().call_later(0.05, token.cancel)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(_collect(phase, token), timeout=10)
    assert tools.finished == 0 and not tools.cancelled  # still held, not cut off mid-call
    hold.set()
    for _ in range(50):
        if tools.finished:
            break
        await asyncio.sleep(0.01)
    assert tools.finished == 1 and not phase_module._left_running


async def test_cancelling_the_task_that_runs_a_phase_cancels_the_tool_agent_turn() -> None:
    tools = FakeToolAgent(asyncio.Event())  # never released
    phase = _phase([CALL, "never asked"], tools)
    running = asyncio.ensure_future(_collect(phase, CancellationToken()))
    deadline = time.monotonic() + 30
    while not tools.heard:
        assert time.monotonic() < deadline, "the ToolAgent never got its turn"
        await asyncio.sleep(0.01)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await asyncio.sleep(0)
    assert tools.cancelled


async def test_a_role_with_no_room_for_a_call_and_its_answer_is_told_it_has_its_last_turn() -> None:
    """The cap counts every message of the phase: a tool call sent with less than `FINAL_TURNS` of room
    left is answered and then the cap ends the phase with no final (TIMEOUT, held-out roman and
    csv-mean). That request ends with PSE's notice of a last turn; the ones before it do not."""
    from pse.team import FINAL_TURNS, LAST_TURN_NOTICE
    from pse.testing import ScriptedModel

    assert FINAL_TURNS == 3
    model = ScriptedModel([CALL, CALL, "done: the report"])
    role = RoleSetup("Specialist", "You execute.", model)
    phase = Phase(
        role, [UserMessage(content="the task", source=TASK_SOURCE)], FakeToolAgent(), FailureBox(), 5
    )
    seen = await _collect(phase, CancellationToken())
    assert [s for s, _ in seen] == ["Specialist", TOOL_AGENT, "Specialist", TOOL_AGENT, "Specialist"]
    lasts = [request[-1].content for request in model.requests]
    assert [text == LAST_TURN_NOTICE for text in lasts] == [False, False, True]  # room 5, 3, then 1
    assert phase.finished.fired  # the cap fired on the same message: the final ends the phase all the same
    # What the role's context holds is unchanged: the notice is in the model's view only.
    held = [m.content for m in await phase.agent.model_context.get_messages()]
    assert LAST_TURN_NOTICE not in held[:-1] and held[-1] == "done: the report"
