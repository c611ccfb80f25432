"""The ToolAgent's answers to one role in a request: what the turn shape reads of what the role did.
Only messages the ToolAgent sent, addressed to the role, count: text a role wrote, or another role's
results, never do."""

from __future__ import annotations

from collections.abc import Sequence

from autogen_core.models import LLMMessage, UserMessage

from pse.protocol import ResultItem, parse_tool_results
from pse.roles import TOOL_AGENT

__all__ = ["answer_texts", "answered"]


def answer_texts(messages: Sequence[LLMMessage], own: str) -> list[str]:
    """The text of each ToolAgent message in `messages` that starts with `own` (`<tool_results
    for="ROLE"`), in order."""
    sent = (m for m in messages if isinstance(m, UserMessage) and m.source == TOOL_AGENT)
    return [text for text in (str(m.content).lstrip() for m in sent) if text.startswith(own)]


def answered(messages: Sequence[LLMMessage], own: str) -> list[ResultItem]:
    """Every result of those messages, in order (a message whose results do not parse gives none)."""
    found: list[ResultItem] = []
    for text in answer_texts(messages, own):
        try:
            found += parse_tool_results(text)[1]
        except ValueError:
            continue
    return found
