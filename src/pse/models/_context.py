"""Context windows: a role's prompt is counted before it is sent, and a call that cannot fit is refused.

A server with a small window (llama.cpp's `n_ctx`, Ollama's `num_ctx`) answers an oversized prompt with
HTTP 400 — or, worse, silently truncates it from the front, where PSE's protocol lives in the system
message. So when a role's window is known (`PSE_MODEL_CONTEXT_TOKENS`, per role
`PSE_<ROLE>_MODEL_CONTEXT_TOKENS`), every prompt is counted with PSE's offline counter (within about
20 % of real tokenizers) before it is sent.

A prompt that does not fit is **compacted** first: the ToolAgent's earlier answers in the role's phase,
oldest first, are cut to a line per result (the tool, its status, how long its output was, that it was
left out), keeping the latest answer whole, until the prompt fits. A role that reads data files one
after another (the 1.5B model on incident-review read three and its prompt outgrew the 16k window) so
goes on with what it needs now and may read an earlier file again. Only when even that cannot fit does
the run stop with a `ContextWindowError` naming the role, the numbers and the fixes. A provider's own
context-length error is mapped to the same error (see `context_window_error`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, UserMessage

from pse.exceptions import ContextWindowError
from pse.models._digest import message_texts
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.protocol import ResultItem, parse_tool_results, render_tool_results
from pse.roles import TOOL_AGENT
from pse.tokens import count_message_tokens

__all__ = ["COMPLETION_RESERVE_TOKENS", "ContextWindowClient", "context_window_error", "is_context_overflow"]

COMPLETION_RESERVE_TOKENS = 256
"""Completion room a prompt must leave when `PSE_MODEL_MAX_TOKENS` does not say how much."""
_OVERFLOW = re.compile(
    r"context.{0,20}length|context window|maximum context|n_ctx|num_ctx|too many tokens|prompt is too long"
    r"|exceeds? the (?:model'?s? )?(?:maximum|context)",
    re.IGNORECASE,
)


def is_context_overflow(message: str) -> bool:
    """Whether a provider's error message says the prompt did not fit the model's context window."""
    return _OVERFLOW.search(message) is not None


def context_window_error(role: str, model: str, detail: str) -> ContextWindowError:
    """The one error a too-long prompt gives, counted by PSE or refused by the provider."""
    upper = role.upper()
    return ContextWindowError(
        f"{role}'s prompt does not fit the context window of its model {model!r}: {detail}. Fix: raise "
        "the window (the server's context size — llama.cpp n_ctx, Ollama num_ctx — and "
        f"PSE_{upper}_MODEL_CONTEXT_TOKENS or PSE_MODEL_CONTEXT_TOKENS to match), or make the prompt "
        "shorter: "
        "lower PSE_STEP_BUFFER_TOKENS or PSE_MODEL_MAX_TOKENS, or shorten the task's prompts; retrying the "
        "same prompt would not help."
    )


class ContextWindowClient(WrapperChatCompletionClient):
    """Refuses a call whose prompt cannot fit `window` tokens with `completion` tokens of answer.

    Args:
        inner: the role's client.
        role / model: for the message.
        window: the model's context window, tokens.
        completion: the completion budget (PSE_MODEL_MAX_TOKENS, else `COMPLETION_RESERVE_TOKENS`).
    """

    def __init__(
        self, inner: ChatCompletionClient, *, role: str, model: str, window: int, completion: int | None
    ) -> None:
        super().__init__(inner)
        self.role, self.model, self.window = role, model, window
        self.completion = completion if completion is not None else COMPLETION_RESERVE_TOKENS

    def _excess(self, messages: Sequence[LLMMessage]) -> tuple[int, int]:
        """(prompt tokens, how many the prompt and its completion budget are over the window)."""
        prompt = count_message_tokens(message_texts(messages))
        return prompt, prompt + self.completion - self.window

    def check(self, messages: Sequence[LLMMessage]) -> None:
        """Raise ContextWindowError when the prompt and its completion budget exceed the window."""
        prompt, over = self._excess(messages)
        if over > 0:
            raise context_window_error(
                self.role,
                self.model,
                f"the prompt is about {prompt} tokens and {self.completion} are kept for the answer, "
                f"{prompt + self.completion} in all; the window is {self.window}",
            )

    def fitted(self, messages: Sequence[LLMMessage]) -> list[LLMMessage]:
        """`messages`, with the ToolAgent's earlier answers cut to a line per result, oldest first, until
        the prompt fits (the latest answer stays whole); raises ContextWindowError when it cannot."""
        fitted = list(messages)
        answers = [i for i, m in enumerate(fitted) if _is_tool_answer(m)][:-1]
        for index in answers:
            if self._excess(fitted)[1] <= 0:
                break
            fitted[index] = _compacted(fitted[index])
        self.check(fitted)
        return fitted

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        return await super()._create(self.fitted(messages), options)


def _is_tool_answer(message: LLMMessage) -> bool:
    return (
        isinstance(message, UserMessage)
        and message.source == TOOL_AGENT
        and isinstance(message.content, str)
        and message.content.lstrip().startswith("<tool_results")
    )


def _compacted(message: LLMMessage) -> LLMMessage:
    """A ToolAgent answer as one line per result: what ran and how it ended, its output left out."""
    assert isinstance(message, UserMessage) and isinstance(message.content, str)
    try:
        requester, results = parse_tool_results(message.content)
    except ValueError:
        return message
    items = [
        ResultItem(
            r.index,
            r.name,
            r.status,
            f"[{len(r.output)} characters of output left out to fit the context window; call the tool "
            "again if you need them]",
        )
        for r in results
    ]
    return message.model_copy(update={"content": render_tool_results(requester, items)})
