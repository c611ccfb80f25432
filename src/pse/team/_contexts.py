"""What each role's model sees when its phase starts: built explicitly, by a context factory.

A phase is one role working with the ToolAgent until its final message. Its model context starts with
an *opening*, and then holds only that phase: the role's own turns and the ToolAgent's results for it.

* `ScopedContexts` (step_buffer mode, the default) gives each role only what its job needs: the task
  message (or the role's own brief) and the *final* messages of the earlier phases of this cycle — the
  plan for the Specialist; the plan and the Specialist's report for the Evaluator — then the role's
  note. On a revise cycle the fixed plan is carried in as the Planner's final and the step_buffer is
  the Specialist's note, so every cycle opens with the same task and plan text (a prefix a provider's
  cache serves). The Evaluator never sees the Specialist's intermediate turns or tool traffic, and no
  cycle sees an earlier one: what crosses is the plan and the step_buffer.
* `HistoryContexts` is the plain-AutoGen baseline, kept for comparison: every role sees the whole run,
  every message of every cycle, in order (its own as assistant turns, the others' as user turns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from autogen_core.models import AssistantMessage, LLMMessage, UserMessage

from pse.roles import TASK_SOURCE

__all__ = ["ContextFactory", "CycleOpening", "HistoryContexts", "ScopedContexts"]


@dataclass(frozen=True)
class CycleOpening:
    """What a cycle starts from: its packet, the roles' briefs, and the final messages so far.

    Attributes:
        packet: the cycle's task message (the task, plus the step_buffer after the first cycle).
        briefs: role → the text that replaces the packet in that role's context.
        finals: (role, text) of every earlier phase's final message in this cycle, in order (first the
            ones carried from an earlier cycle: the fixed plan on a revise).
        notes: role → a message that follows the finals in that role's context (the step_buffer).
    """

    packet: str
    briefs: Mapping[str, str] = field(default_factory=dict)
    finals: Sequence[tuple[str, str]] = ()
    notes: Mapping[str, str] = field(default_factory=dict)


class ContextFactory(Protocol):
    """Builds a role's opening messages and sees every message of the run (to remember, if it wants)."""

    def opening(self, role: str, cycle: CycleOpening) -> list[LLMMessage]:
        """The messages `role`'s model context starts its phase with."""
        ...

    def record(self, source: str, text: str) -> None:
        """A message of the run (the packet as `TASK_SOURCE`, every role and ToolAgent message)."""
        ...


class ScopedContexts:
    """Each role sees its brief or the packet, then the final messages of this cycle's earlier phases."""

    def opening(self, role: str, cycle: CycleOpening) -> list[LLMMessage]:
        """The packet (or `role`'s brief), the earlier phases' final messages, then `role`'s note, as
        user turns: what stays the same from cycle to cycle comes first."""
        first = UserMessage(content=cycle.briefs.get(role, cycle.packet), source=TASK_SOURCE)
        note = cycle.notes.get(role)
        return [
            first,
            *(UserMessage(content=text, source=who) for who, text in cycle.finals),
            *([UserMessage(content=note, source=TASK_SOURCE)] if note else []),
        ]

    def record(self, source: str, text: str) -> None:
        """Nothing crosses between phases but the finals, and between cycles but the packet."""


class HistoryContexts:
    """Every role sees the whole run so far: the baseline plain AutoGen gives."""

    def __init__(self) -> None:
        self._messages: list[tuple[str, str]] = []

    def opening(self, role: str, cycle: CycleOpening) -> list[LLMMessage]:
        """Every message of the run, the role's own as assistant turns."""
        return [
            AssistantMessage(content=text, source=who)
            if who == role
            else UserMessage(content=text, source=who)
            for who, text in self._messages
        ]

    def record(self, source: str, text: str) -> None:
        """Remember it: every later phase of every role sees it."""
        self._messages.append((source, text))
