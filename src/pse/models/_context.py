"""Context windows: a role's prompt is counted before it is sent, and a call that cannot fit is refused.

A server with a small window (llama.cpp's `n_ctx`, Ollama's `num_ctx`) answers an oversized prompt with
HTTP 400 — or, worse, silently truncates it from the front, where PSE's protocol lives in the system
message. So when a role's window is known (`PSE_MODEL_CONTEXT_TOKENS`, per role
`PSE_<ROLE>_MODEL_CONTEXT_TOKENS`), every prompt is counted with PSE's offline counter (within about
20 % of real tokenizers) and a prompt that cannot fit together with its completion budget stops the
run with a `ContextWindowError` naming the role, the numbers and the fixes, before anything is sent.
A provider's own context-length error is mapped to the same error (see `context_window_error`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.exceptions import ContextWindowError
from pse.models._digest import message_texts
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
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

    def check(self, messages: Sequence[LLMMessage]) -> None:
        """Raise ContextWindowError when the prompt and its completion budget exceed the window."""
        prompt = count_message_tokens(message_texts(messages))
        if prompt + self.completion > self.window:
            raise context_window_error(
                self.role,
                self.model,
                f"the prompt is about {prompt} tokens and {self.completion} are kept for the answer, "
                f"{prompt + self.completion} in all; the window is {self.window}",
            )

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        self.check(messages)
        return await super()._create(messages, options)
