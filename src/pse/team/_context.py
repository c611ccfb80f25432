"""Role-scoped model contexts: each role's model sees only what its job needs.

A role's context keeps its own turns, the task message (replaced by the role's own brief when
one is given), the *final* messages of the other roles (no message holding `<tool_calls>`),
and the tool results addressed to it. So the Evaluator never sees the Specialist's
intermediate turns or tool traffic, only the plan and the Specialist's report, and the
Specialist never sees the Planner's exploration.
"""

from __future__ import annotations

import re

from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import LLMMessage, UserMessage

from pse.protocol import has_tool_calls
from pse.team._routing import TASK_SOURCE, TOOL_AGENT

__all__ = ["ScopedContext"]

# Linear on any text: only the last `for="` can lack a closing quote, and possessive runs never backtrack.
_RESULTS_FOR = re.compile(r"<tool_results\s++for=\"([^\"]++)\"")


class ScopedContext(UnboundedChatCompletionContext):
    """An unbounded context that admits only the messages its role may see.

    Args:
        role: the role this context belongs to.
        brief: replaces the task message's text for this role (None keeps the task message as sent).
    """

    def __init__(self, role: str, brief: str | None = None) -> None:
        super().__init__()
        self._role = role
        self._brief = brief
        self.dropped = 0

    async def add_message(self, message: LLMMessage) -> None:
        admitted = self._admit(message)
        if admitted is None:
            self.dropped += 1
            return
        await super().add_message(admitted)

    def _admit(self, message: LLMMessage) -> LLMMessage | None:
        if not isinstance(message, UserMessage) or not isinstance(message.content, str):
            return message  # the role's own turns (AssistantMessage) and anything non-textual we never send
        source = message.source
        if source == TASK_SOURCE:
            return message if self._brief is None else UserMessage(content=self._brief, source=TASK_SOURCE)
        if source == TOOL_AGENT:
            match = _RESULTS_FOR.search(message.content)
            return message if match is not None and match.group(1) == self._role else None
        if source == self._role:
            return message
        return None if has_tool_calls(message.content) else message
