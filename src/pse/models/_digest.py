"""What a request *is*, for strict replay: normalized messages, their digests, excerpts and a readable diff.

A request is normalized to one `(speaker, text)` pair per message: `system`,
`user:<source>`, `assistant:<source>` or `tool`, with the message's text. Nothing
else goes in (no ids, no times, no model name, no sampling settings), so the same
prompt gives the same digest in any run on any machine, as long as the engine keeps
run-specific values (run id, absolute paths, clocks) out of the prompt text itself.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Sequence

from autogen_core import FunctionCall, Image
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from pse.models._format import MessageDigest, RecordedRequest

__all__ = ["describe_mismatch", "message_texts", "normalize", "recorded_request", "scrub_secrets"]

_EXCERPT_CHARS = 160  # each of head and tail kept in an excerpt
_SECRET = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}"  # OpenAI / DeepSeek / Anthropic style keys
    r"|\bBearer\s+[A-Za-z0-9._\-]{16,}"
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
)


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


def scrub_secrets(text: str, known: Iterable[str] = ()) -> str:
    """Replace known secrets and anything shaped like an API key or bearer token with `***`."""
    for secret in known:
        if secret:
            text = text.replace(secret, "***")
    return _SECRET.sub("***", text)


def recorded_request(messages: Sequence[LLMMessage], secrets: Iterable[str] = ()) -> RecordedRequest:
    """The digest, per-message digests and scrubbed excerpts of one request, as a cassette stores them."""
    pairs = normalize(messages)
    known = list(secrets)
    return RecordedRequest(
        digest=_hash(json.dumps(pairs, ensure_ascii=False)),
        excerpt=scrub_secrets(excerpt(pairs[-1][1]), known) if pairs else "",
        messages=[
            MessageDigest(
                speaker=s, digest=_hash(t)[:16], chars=len(t), excerpt=scrub_secrets(excerpt(t), known)
            )
            for s, t in pairs
        ],
    )


def describe_mismatch(recorded: RecordedRequest, messages: Sequence[LLMMessage]) -> str | None:
    """None when `messages` match the recorded digest, else a readable account of what differs."""
    incoming = recorded_request(messages)
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
