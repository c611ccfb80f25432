"""A role whose last write changed nothing samples its calls until it writes something new.

Greedy decoding answers the same request the same way. A user who wants reproducible runs sets
`PSE_MODEL_TEMPERATURE=0` (the HumanEval harness does), and then a revise, whose context differs from
the failed cycle's by a few lines of feedback, gets the failed module back: on HumanEval 0–19 the 1.5B
model wrote a file with the bytes it already held in every one of the five runs it did not pass, told so
each time (`tools.UNCHANGED`, and the write withheld from its view: `team.withhold_broken_writes`); its
`sort_numbers` came back byte for byte in cycles 2 and 3 (HumanEval-19). No message PSE adds moves a
greedy decoder off an answer it has already given twice; a sample can.

So from a write the ToolAgent answered with `UNCHANGED` until the role's next write that changed
something, each of its calls names `RESAMPLE_TEMPERATURE` where the configured temperature is lower.
It decides nothing: the same grammar shapes the turn, the same policy and gates judge what comes of it.
A role cannot start it by writing the words: only the ToolAgent's results to the role are read.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.models._answers import answered
from pse.models._constrained import ConstraintLog
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.tools import UNCHANGED, Tool

__all__ = ["RESAMPLE_TEMPERATURE", "ResamplingClient", "repeated_itself"]

RESAMPLE_TEMPERATURE = 0.8
"""The temperature of a call after a write that changed nothing: PSE's small-model default, the one the
held-out runs measured best (docs/models.md)."""


def repeated_itself(messages: Sequence[LLMMessage], role: str) -> bool:
    """Whether the last `write_file` the ToolAgent answered for `role` in `messages` changed nothing."""
    writes = [r for r in answered(messages, f'<tool_results for="{role}"') if r.name == Tool.WRITE_FILE]
    return bool(writes) and UNCHANGED in writes[-1].output


class ResamplingClient(WrapperChatCompletionClient):
    """Names `RESAMPLE_TEMPERATURE` in each call of `role` made after its write that changed nothing.

    Args:
        inner: the provider's client (an OpenAI-compatible one: the temperature goes with the call).
        role: whose tool results are read.
        temperature: the configured temperature; at or above `RESAMPLE_TEMPERATURE` nothing changes.
        log: notes each such call (role → `RESAMPLED` → calls), beside what its constraint carried.
    """

    RESAMPLED = f"temperature {RESAMPLE_TEMPERATURE} after a write that changed nothing"

    def __init__(
        self, inner: ChatCompletionClient, role: str, temperature: float, log: ConstraintLog | None = None
    ) -> None:
        super().__init__(inner)
        self.role = role
        self.temperature = temperature
        self.log = log

    def _options(self, messages: Sequence[LLMMessage], options: CallOptions) -> CallOptions:
        if self.temperature >= RESAMPLE_TEMPERATURE or not repeated_itself(messages, self.role):
            return options
        if self.log is not None:
            self.log.note(self.role, self.RESAMPLED)
        extra = {**options.extra_create_args, "temperature": RESAMPLE_TEMPERATURE}
        return replace(options, extra_create_args=extra)

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        return await super()._create(messages, self._options(messages, options))

    def _create_stream(
        self, messages: Sequence[LLMMessage], options: CallOptions
    ) -> AsyncGenerator[str | CreateResult, None]:
        return super()._create_stream(messages, self._options(messages, options))
