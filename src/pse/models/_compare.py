"""Strict replay's comparison: how a request differs from the recorded one, and whether only tool output did.

A request is compared message by message. Its *layout* — how many messages, and who sent each: the
order of the roles, the ToolAgent's turns — is PSE's doing, and so is the text of every message
that is not tool output (system prompts, the task message, the step_buffer, the plan, the replayed
replies). Tool output (`TOOL_OUTPUT_SPEAKERS`) is what real commands printed; a difference there is
*drift*. A cassette whose request holds only its digest (no per-message detail) cannot tell them
apart: any difference there counts as PSE's.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autogen_core.models import LLMMessage

from pse.models._digest import TOOL_OUTPUT_SPEAKERS, digest_of, excerpt, request_digest, scrubbed
from pse.models._format import RecordedRequest
from pse.models._scrub import Scrubber

__all__ = ["MAX_DIFF_LINES", "MessageChange", "RequestDifference", "compare_request"]

MAX_DIFF_LINES = 60
"""Most lines of one message's diff kept (in an error or a drift record); each line at most 400 chars."""
_LINE_CHARS = 400


@dataclass(frozen=True)
class MessageChange:
    """One message whose text differs from the recorded one (same position, same speaker)."""

    index: int
    speaker: str
    recorded_chars: int
    chars: int
    recorded_digest: str
    digest: str
    diff: str

    @property
    def tool_output(self) -> bool:
        """The message is tool output, not something PSE authored."""
        return self.speaker in TOOL_OUTPUT_SPEAKERS


@dataclass(frozen=True)
class RequestDifference:
    """How a request differs from the recorded one.

    Attributes:
        layout: messages added, missing or sent by someone else (never drift), or why there is no detail.
        changes: messages whose text changed, in order.
    """

    layout: tuple[str, ...]
    changes: tuple[MessageChange, ...]

    @property
    def drift_only(self) -> bool:
        """Only tool output differs: everything PSE authored is as recorded."""
        return not self.layout and all(change.tool_output for change in self.changes)

    def describe(self) -> str:
        """A readable account: one line per difference, each changed message with its diff."""
        lines = list(self.layout)
        for change in self.changes:
            what = " (tool output)" if change.tool_output else ""
            lines.append(
                f"message {change.index} ({change.speaker}){what} changed: "
                f"{change.recorded_chars} chars recorded, {change.chars} now"
            )
            lines.extend(f"    {line}" for line in change.diff.splitlines())
        return "\n".join(lines)


def compare_request(
    recorded: RecordedRequest,
    messages: Sequence[LLMMessage],
    scrubber: Scrubber | None = None,
    texts: Mapping[str, str] | None = None,
) -> RequestDifference | None:
    """None when `messages` match the recorded request, else how they differ.

    Args:
        recorded: the request the turn was recorded for.
        messages: the request now.
        scrubber: scrubs the messages as the recorder scrubbed them (digests are of scrubbed text).
        texts: whole recorded texts by message digest (tool output), for a full diff instead of excerpts.
    """
    pairs = scrubbed(messages, scrubber)
    if request_digest(pairs) == recorded.digest:
        return None
    if not recorded.messages:
        detail = (
            "the request differs from the recorded one (the cassette holds only its digest, so no detail)"
        )
        return RequestDifference((detail,), ())
    layout: list[str] = []
    changes: list[MessageChange] = []
    if len(recorded.messages) != len(pairs):
        layout.append(f"recorded request had {len(recorded.messages)} message(s), this one has {len(pairs)}")
    for index, (old, (speaker, text)) in enumerate(zip(recorded.messages, pairs, strict=False), start=1):
        digest = digest_of(text)
        if old.speaker != speaker:
            layout.append(f"message {index}: speaker was {old.speaker}, now {speaker}")
        elif old.digest != digest:
            whole = old.text if old.text is not None else (texts or {}).get(old.digest)
            diff = _diff(whole, old.excerpt, text)
            changes.append(MessageChange(index, speaker, old.chars, len(text), old.digest, digest, diff))
    for index, (speaker, text) in enumerate(
        pairs[len(recorded.messages) :], start=len(recorded.messages) + 1
    ):
        layout.append(f"message {index} ({speaker}) is new: {excerpt(text)[:200]!r}")
    for index, gone in enumerate(recorded.messages[len(pairs) :], start=len(pairs) + 1):
        layout.append(f"message {index} ({gone.speaker}) is missing: {gone.excerpt[:200]!r}")
    return RequestDifference(tuple(layout), tuple(changes))


def _diff(recorded_text: str | None, recorded_excerpt: str, text: str) -> str:
    """A unified diff, recorded → now: of the whole texts when the cassette kept one, else of excerpts."""
    if recorded_text is not None:
        old, new = recorded_text.splitlines(), text.splitlines()
    else:
        old, new = recorded_excerpt.splitlines(), excerpt(text).splitlines()
    lines = list(difflib.unified_diff(old, new, "recorded", "now", lineterm="", n=2))
    if not lines:
        if recorded_text is not None:
            return "(only line endings or a trailing newline differ)"
        return "(the change is in the middle of the message, beyond the recorded excerpt)"
    kept = [line if len(line) <= _LINE_CHARS else line[:_LINE_CHARS] + "…" for line in lines[:MAX_DIFF_LINES]]
    if len(lines) > MAX_DIFF_LINES:
        kept.append(f"… {len(lines) - MAX_DIFF_LINES} more diff line(s)")
    return "\n".join(kept)
