"""What a request *is*, for strict replay: normalized messages, their digests, excerpts and a readable diff.

A request is normalized to one `(speaker, text)` pair per message: `system`,
`user:<source>`, `assistant:<source>` or `tool`, with the message's text, scrubbed of
secrets (`pse.models._scrub`) on recording and replay alike. Nothing else goes in (no ids,
no times, no model name, no sampling settings), so the same prompt gives the same digest in
any run on any machine, as long as the engine keeps run-specific values (run id, absolute
paths, clocks) out of the prompt text itself.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Sequence

from autogen_core import FunctionCall, Image
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from pse.models._format import MessageDigest, RecordedRequest
from pse.models._scrub import Scrubber

__all__ = [
    "describe_mismatch",
    "digest_of",
    "excerpt",
    "message_texts",
    "normalize",
    "recorded_request",
    "request_digest",
    "scrubbed",
]

_EXCERPT_CHARS = 160  # each of head and tail kept in an excerpt


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


def recorded_request(messages: Sequence[LLMMessage], scrubber: Scrubber | None = None) -> RecordedRequest:
    """The digest, per-message digests and scrubbed excerpts of one request, as a cassette stores it.

    Args:
        messages: the request.
        scrubber: what removes secrets (default: key shapes and secret-looking environment variables).
    """
    pairs = scrubbed(messages, scrubber)
    return RecordedRequest(
        digest=request_digest(pairs),
        excerpt=excerpt(pairs[-1][1]) if pairs else "",
        messages=[
            MessageDigest(speaker=s, digest=digest_of(t), chars=len(t), excerpt=excerpt(t)) for s, t in pairs
        ],
    )


def describe_mismatch(
    recorded: RecordedRequest, messages: Sequence[LLMMessage], scrubber: Scrubber | None = None
) -> str | None:
    """None when `messages` match the recorded digest, else a readable account of what differs."""
    incoming = recorded_request(messages, scrubber)
    if incoming.digest == recorded.digest:
        return None
    if not recorded.messages:
        return "the request differs from the recorded one (the cassette holds only its digest, so no detail)"
    lines: list[str] = []
    if len(recorded.messages) != len(incoming.messages):
        lines.append(
            f"recorded request had {len(recorded.messages)} message(s), this one has {len(incoming.messages)}"
        )
    for index, (old, new) in enumerate(zip(recorded.messages, incoming.messages, strict=False), start=1):
        if old.speaker != new.speaker:
            lines.append(f"message {index}: speaker was {old.speaker}, now {new.speaker}")
        elif old.digest != new.digest:
            lines.append(
                f"message {index} ({new.speaker}) changed: {old.chars} chars recorded, {new.chars} now"
            )
            diff = difflib.unified_diff(
                old.excerpt.splitlines(), new.excerpt.splitlines(), "recorded", "now", lineterm="", n=2
            )
            body = "\n".join(f"    {line}" for line in diff)
            lines.append(
                body or "    (the change is in the middle of the message, beyond the recorded excerpt)"
            )
    for index, extra in enumerate(
        incoming.messages[len(recorded.messages) :], start=len(recorded.messages) + 1
    ):
        lines.append(f"message {index} ({extra.speaker}) is new: {extra.excerpt[:200]!r}")
    for index, gone in enumerate(
        recorded.messages[len(incoming.messages) :], start=len(incoming.messages) + 1
    ):
        lines.append(f"message {index} ({gone.speaker}) is missing: {gone.excerpt[:200]!r}")
    return "\n".join(lines)
