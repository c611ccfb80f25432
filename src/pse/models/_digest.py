"""What a request *is*, for strict replay: normalized messages, their digests, excerpts and texts.

A request is normalized to one `(speaker, text)` pair per message: `system`,
`user:<source>`, `assistant:<source>` or `tool`, with the message's text, scrubbed of
secrets (`pse.models._scrub`). Nothing else goes in (no ids, no times, no model name, no
sampling settings), so the same prompt gives the same digest in any run on any machine, as
long as the engine keeps run-specific values (run id, absolute paths, clocks) out of the
prompt text itself.

The speaker also says who wrote a message: the ToolAgent's `<tool_results>` (`user:ToolAgent`)
and native tool results (`tool`) are *tool output*, what real commands printed; everything else
is what PSE authored (prompts, the task, the step_buffer) or a model's replayed reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from autogen_core import FunctionCall, Image
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from pse.models._format import MessageDigest, RecordedRequest
from pse.models._scrub import Scrubber
from pse.roles import TOOL_AGENT

__all__ = [
    "TOOL_OUTPUT_SPEAKERS",
    "digest_of",
    "excerpt",
    "message_texts",
    "normalize",
    "recorded_request",
    "request_digest",
    "scrubbed",
]

_EXCERPT_CHARS = 160  # each of head and tail kept in an excerpt
TOOL_OUTPUT_SPEAKERS = frozenset({"tool", f"user:{TOOL_AGENT}"})
"""The speakers whose messages are tool output: what real tools printed, not what PSE authored."""


def _text(message: LLMMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, Image):
            parts.append("<image>")
        elif isinstance(part, FunctionCall):  # ids differ per run; name and arguments are what the model sees
            parts.append(json.dumps({"name": part.name, "arguments": part.arguments}, sort_keys=True))
        else:
            parts.append(json.dumps(part.model_dump(exclude={"call_id"}), sort_keys=True))
    return "\n".join(parts)


def _speaker(message: LLMMessage) -> str:
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, UserMessage):
        return f"user:{message.source}"
    if isinstance(message, AssistantMessage):
        return f"assistant:{message.source}"
    return "tool"


def normalize(messages: Sequence[LLMMessage]) -> list[tuple[str, str]]:
    """The `(speaker, text)` pairs a digest is computed from."""
    return [(_speaker(m), _text(m)) for m in messages]


def message_texts(messages: Sequence[LLMMessage]) -> list[str]:
    """Each message's text, as the offline token counter sees it."""
    return [_text(m) for m in messages]


def _hash(data: str) -> str:
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def excerpt(text: str) -> str:
    """Head and tail of `text`, at most about 330 characters."""
    if len(text) <= 2 * _EXCERPT_CHARS + 10:
        return text
    return f"{text[:_EXCERPT_CHARS]} […{len(text) - 2 * _EXCERPT_CHARS} chars…] {text[-_EXCERPT_CHARS:]}"


def scrubbed(messages: Sequence[LLMMessage], scrubber: Scrubber | None = None) -> list[tuple[str, str]]:
    """`normalize(messages)` with every text scrubbed: what digests are taken of, when recording and
    when replaying (default scrubber: key shapes and secret-looking environment variables)."""
    scrub = scrubber or Scrubber()
    return [(speaker, scrub.text(text)) for speaker, text in normalize(messages)]


def request_digest(pairs: Sequence[tuple[str, str]]) -> str:
    """The digest of a whole request, from its scrubbed `(speaker, text)` pairs."""
    return _hash(json.dumps(list(pairs), ensure_ascii=False))


def digest_of(text: str) -> str:
    """The short digest of one message's (scrubbed) text, as a cassette stores it."""
    return _hash(text)[:16]


def recorded_request(
    messages: Sequence[LLMMessage], scrubber: Scrubber | None = None, *, kept: set[str] | None = None
) -> RecordedRequest:
    """The digest, per-message digests and scrubbed excerpts of one request, as a cassette stores it.

    Args:
        messages: the request.
        scrubber: what removes secrets (default: key shapes and secret-looking environment variables).
        kept: digests of the tool-output texts the cassette holds already. Given, each tool-output
            message not among them is kept whole (`text`), once per cassette, and its digest added:
            a replay that sees different tool output can then show the whole difference.
    """
    pairs = scrubbed(messages, scrubber)
    digests = [
        MessageDigest(speaker=s, digest=digest_of(t), chars=len(t), excerpt=excerpt(t)) for s, t in pairs
    ]
    if kept is not None:
        for message, (speaker, text) in zip(digests, pairs, strict=True):
            if speaker in TOOL_OUTPUT_SPEAKERS and message.digest not in kept:
                kept.add(message.digest)
                message.text = text
    return RecordedRequest(
        digest=request_digest(pairs),
        excerpt=excerpt(pairs[-1][1]) if pairs else "",
        messages=digests,
    )
