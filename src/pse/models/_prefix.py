"""How much of each prompt a provider's prefix cache could serve: the reusable-prefix share.

Providers cache prompt prefixes: a request that starts with what an earlier request to the same model
sent is billed the cached price for that part. `PrefixMeter` measures, offline and with PSE's own
token counter, how many tokens of each prompt repeat the longest prefix already sent to the same model
in the run (whole messages, then the common start of the first message that differs). The figures go
to the run's ledger (`tokens.by_role.*.prefix_counted` / `prefix_reusable`), so a run, `pse stats` and
`make bench` can say how cache-friendly PSE's prompts are, whatever the provider reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage

from pse.models._digest import normalize
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient
from pse.tokens import count_message_tokens, count_tokens

__all__ = ["PrefixClient", "PrefixMeter", "PrefixSink", "common_prefix_tokens"]

PrefixSink = Callable[[str, int, int], None]
"""Receives (role, prompt tokens counted, of them reusable from an earlier prompt) of every call."""
_PER_MESSAGE = count_message_tokens([""])


def _common_chars(a: str, b: str) -> int:
    """Length of the common start of two strings (binary search on slice equality: C speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def common_prefix_tokens(prompt: Sequence[tuple[str, str]], earlier: Sequence[tuple[str, str]]) -> int:
    """Tokens of `prompt` that repeat `earlier`'s start: its identical leading messages in full, then
    the common start of the first message that differs (same speaker only)."""
    tokens = 0
    for (speaker, text), (was_speaker, was_text) in zip(prompt, earlier, strict=False):
        if speaker != was_speaker:
            break
        if text == was_text:
            tokens += count_tokens(text) + _PER_MESSAGE
            continue
        tokens += count_tokens(text[: _common_chars(text, was_text)])
        break
    return tokens


class PrefixMeter:
    """The prompts sent to each model in one run, and the reusable share of each new one."""

    def __init__(self) -> None:
        self._sent: dict[str, list[list[tuple[str, str]]]] = {}
        self._sink: PrefixSink | None = None
        self._held: list[tuple[str, int, int]] = []

    def attach(self, sink: PrefixSink) -> None:
        """From now on every figure goes to `sink` (the ones measured before first)."""
        self._sink = sink
        held, self._held = self._held, []
        for figures in held:
            sink(*figures)

    def remember(self, model: str, messages: Sequence[LLMMessage]) -> None:
        """A prompt that was sent before this process (a resumed run's replayed turn): it is in the
        provider's cache, so later prompts may reuse it, but it is not booked again."""
        self._sent.setdefault(model, []).append(normalize(messages))

    def observe(self, model: str, role: str, messages: Sequence[LLMMessage]) -> tuple[int, int]:
        """Measure one prompt to `model`: (its tokens, of them reusable), and remember it."""
        prompt = normalize(messages)
        counted = count_message_tokens(text for _, text in prompt)
        earlier = self._sent.setdefault(model, [])
        reusable = max((common_prefix_tokens(prompt, was) for was in earlier), default=0)
        earlier.append(prompt)
        if self._sink is None:
            self._held.append((role, counted, reusable))
        else:
            self._sink(role, counted, reusable)
        return counted, reusable


class PrefixClient(WrapperChatCompletionClient):
    """Measures every prompt of one role's client (`PrefixMeter`) before passing the call on."""

    def __init__(self, inner: ChatCompletionClient, role: str, model: str, meter: PrefixMeter) -> None:
        super().__init__(inner)
        self.role, self.model, self.meter = role, model, meter

    async def _create(self, messages: Sequence[LLMMessage], options: CallOptions) -> CreateResult:
        self.meter.observe(self.model, self.role, messages)
        return await super()._create(messages, options)
