"""The termination conditions that end a phase: the role's final message, or the cycle's turn cap."""

from __future__ import annotations

from collections.abc import Sequence

from autogen_agentchat.base import TerminationCondition
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage

from pse.protocol import has_tool_calls

__all__ = ["FINAL_TURNS", "RoleFinished", "TurnCap"]

FINAL_TURNS = 3
"""The fewest messages a phase ends in with a final on evidence of the role's own: its tool call, the
ToolAgent's answer, its final. A role with less room than that in its phase is told it has its last
turn (`WithholdingContext`), and a phase leaves this many to each phase after it in the cycle."""


class _Condition(TerminationCondition):
    """A termination condition that remembers whether it fired, until the phase rearms it.

    AutoGen resets a team's condition when a run ends; what a phase's conditions remember (`fired`) is
    what the engine reads after the run, so AutoGen's reset only disarms them and `rearm` starts anew.
    """

    def __init__(self) -> None:
        self.fired = False
        self._armed = True

    @property
    def terminated(self) -> bool:
        return self.fired and self._armed

    async def reset(self) -> None:
        self._armed = False

    def rearm(self) -> None:
        self.fired, self._armed = False, True


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

    def rearm(self, limit: int | None = None) -> None:
        super().rearm()
        self.count = 0
        self.limit = self.limit if limit is None else limit

    def room(self) -> int:
        """How many more messages the phase may hold before the cap fires."""
        return self.limit - self.count

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        self.count += sum(1 for m in messages if isinstance(m, BaseChatMessage))
        if self.count >= self.limit:
            self.fired = True
            return StopMessage(content=f"turn cap of {self.limit} reached", source="TurnCap")
        return None
