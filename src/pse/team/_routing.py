"""Deterministic speaker order and cycle end: plain functions over the thread, no model involved.

Order: the cycle's first speaker (Planner, or Specialist on a revise cycle) → Specialist → Evaluator,
with one hop: after a message holding `<tool_calls>` the ToolAgent speaks, then the requester again.
A cycle ends when the Evaluator speaks without tool calls (its verdict turn), when the Planner or the
Specialist writes `<blocked>`, or when the Planner finishes a turn without a plan.
"""

from __future__ import annotations

from collections.abc import Sequence

from autogen_agentchat.base import TerminationCondition
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage

from pse.protocol import has_tool_calls, strip_tool_traffic
from pse.roles import TASK_SOURCE, TOOL_AGENT, Role

__all__ = ["TASK_SOURCE", "TOOL_AGENT", "CycleEnd", "cycle_end_reason", "next_speaker"]

_AFTER: dict[str, str] = {
    Role.PLANNER: Role.SPECIALIST,
    Role.SPECIALIST: Role.EVALUATOR,
    Role.EVALUATOR: Role.PLANNER,
}


def _chat(thread: Sequence[BaseAgentEvent | BaseChatMessage]) -> list[BaseChatMessage]:
    return [m for m in thread if isinstance(m, BaseChatMessage)]


def next_speaker(thread: Sequence[BaseAgentEvent | BaseChatMessage], first_speaker: str) -> str:
    """Name the agent that speaks after the last message of `thread`."""
    chat = _chat(thread)
    if not chat or chat[-1].source == TASK_SOURCE:
        return first_speaker
    last = chat[-1]
    if last.source == TOOL_AGENT:
        # The requester is the author of the message the ToolAgent answered.
        return chat[-2].source if len(chat) >= 2 else first_speaker
    if has_tool_calls(last.to_text()):
        return TOOL_AGENT
    return _AFTER.get(last.source, first_speaker)


def cycle_end_reason(message: BaseChatMessage) -> str | None:
    """Why this message ends the cycle, or None when the cycle goes on."""
    if message.source in (TASK_SOURCE, TOOL_AGENT):
        return None
    text = message.to_text()
    if has_tool_calls(text):
        return None
    visible = strip_tool_traffic(text)
    if message.source == Role.EVALUATOR:
        return "evaluator finished its review"
    if "<blocked" in visible:
        return f"{message.source} is blocked"
    if message.source == Role.PLANNER and "<plan" not in visible:
        return "planner ended its turn without a plan"
    return None


class CycleEnd(TerminationCondition):
    """Stops the group chat at the end of a cycle (see the module docstring). Ignores the task message."""

    def __init__(self) -> None:
        self._terminated = False

    @property
    def terminated(self) -> bool:
        return self._terminated

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        for message in _chat(messages):
            reason = cycle_end_reason(message)
            if reason is not None:
                self._terminated = True
                return StopMessage(content=reason, source="CycleEnd")
        return None

    async def reset(self) -> None:
        self._terminated = False
