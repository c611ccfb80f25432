"""PSE's chat format for Gemma on llama-cpp-python's server: the system message goes into the first user turn.

Gemma has no system role. llama-cpp-python's own `gemma` format drops system messages, and PSE's
whole protocol (the role's job, the tools, the XML it must write) lives in the system message, so a
model served that way never sees it. `pse-gemma` does what Gemma's own template does: the system
text opens the first user turn. It must be registered in the server's process before the server
loads a model (`python -m pse.local` does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["GEMMA_FORMAT", "gemma_prompt", "register_chat_formats"]

GEMMA_FORMAT = "pse-gemma"
_TURN_START, _TURN_END = "<start_of_turn>", "<end_of_turn>"
_SPEAKERS = {"user": "user", "assistant": "model", "tool": "user"}


def _text(content: object) -> str:
    """A message's text: a string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def gemma_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    """The Gemma prompt of an OpenAI-style message list, ending where the model's turn starts.

    System messages (all of them, in order) open the first user turn; a conversation that starts
    with the model, or holds only system text, gets a user turn of its own for them.
    """
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    turns: list[tuple[str, str]] = [
        (_SPEAKERS.get(str(m.get("role")), "user"), _text(m.get("content")))
        for m in messages
        if m.get("role") != "system"
    ]
    if system:
        if turns and turns[0][0] == "user":
            turns[0] = ("user", f"{system}\n\n{turns[0][1]}")
        else:
            turns.insert(0, ("user", system))
    body = "".join(f"{_TURN_START}{speaker}\n{text}{_TURN_END}\n" for speaker, text in turns)
    return f"{body}{_TURN_START}model\n"


def register_chat_formats() -> None:
    """Register `pse-gemma` with llama-cpp-python (idempotent). Needs the `pse[local]` extra."""
    from llama_cpp import llama_chat_format

    def format_pse_gemma(messages: list[Any], **kwargs: Any) -> llama_chat_format.ChatFormatterResponse:
        return llama_chat_format.ChatFormatterResponse(prompt=gemma_prompt(messages), stop=[_TURN_END])

    handler = llama_chat_format.chat_formatter_to_chat_completion_handler(format_pse_gemma)
    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()  # type: ignore[no-untyped-call, unused-ignore]
    registry.register_chat_completion_handler(GEMMA_FORMAT, handler, overwrite=True)
