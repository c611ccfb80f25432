"""Reasoning output: a model's `<think>…</think>` text is its own, never protocol and never passed on.

Reasoning models write their chain of thought inline (`<think>…</think>`, Qwen3, DeepSeek-R1 distills on
llama.cpp and Ollama) or in a separate field (`reasoning_content`, which AutoGen's clients put in
`CreateResult.thought`). Either way PSE moves it to `thought`: the protocol parsers, the ToolAgent and the
other roles see only the answer, and the trace keeps the thought beside the message it came with.
An unclosed `<think>` (the model ran out of tokens while thinking) is thought to the end.
"""

from __future__ import annotations

import re

from autogen_core.models import CreateResult

__all__ = ["split_reasoning"]

_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)


def split_reasoning(result: CreateResult) -> CreateResult:
    """`result` with every `<think>` block of its text moved to `thought` (after any thought it had)."""
    if not isinstance(result.content, str) or "<think>" not in result.content.lower():
        return result
    thoughts = [m.group(1).strip() for m in _THINK.finditer(result.content)]
    answer = _THINK.sub("", result.content).strip()
    thought = "\n\n".join(t for t in [result.thought or "", *thoughts] if t)
    return result.model_copy(update={"content": answer, "thought": thought or None})
