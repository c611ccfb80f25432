"""A message's tool requests, checked: each `<invoke>` the scanner read (`_dsml`) against the tools'
signatures, into calls and precise errors (`parse_tool_calls`).

Semantic errors (unknown tool, missing / duplicate / unexpected parameter, over-size value) fail only
their invoke; a syntax error fails its whole block (`_dsml.scan_blocks`); more invokes in one message
than allowed fail the whole message. Never raises on model input.
"""

from __future__ import annotations

from collections.abc import Mapping

from pse.protocol._dsml import RawInvoke, scan_blocks
from pse.protocol._types import DsmlError, ParsedMessage, ToolCall, ToolSignature

__all__ = ["parse_tool_calls"]


def _check_invoke(
    raw: RawInvoke, index: int, tools: Mapping[str, ToolSignature], max_value_bytes: int
) -> ToolCall | DsmlError:
    sig = tools.get(raw.name)
    given = dict(raw.params)
    if sig is None:
        known = ", ".join(sorted(tools)) or "(none)"
        return DsmlError(
            index, "unknown_tool", f"unknown tool {raw.name!r}; the tools are: {known}", raw.name, given
        )
    if raw.error is not None:
        return DsmlError(
            index, "bad_arguments", f"{raw.name}: {raw.error}; usage: {sig.usage()}", raw.name, given
        )
    seen: set[str] = set()
    for pname, value in raw.params:
        if pname in seen:
            return DsmlError(
                index,
                "duplicate_parameter",
                f"{raw.name}: parameter {pname!r} is given twice; give each parameter once",
                raw.name,
                given,
            )
        seen.add(pname)
        size = len(value.encode("utf-8"))
        if size > max_value_bytes:
            return DsmlError(
                index,
                "value_too_large",
                f"{raw.name}: parameter {pname!r} is {size} bytes; the limit is {max_value_bytes} bytes. "
                "Split the work into smaller pieces.",
                raw.name,
                {k: v[:200] for k, v in given.items()},
            )
    accepted = {p.name for p in sig.params}
    unexpected = [p for p in given if p not in accepted]
    if unexpected:
        return DsmlError(
            index,
            "unexpected_parameter",
            f"{raw.name}: unexpected parameter {unexpected[0]!r}; usage: {sig.usage()}",
            raw.name,
            given,
        )
    arguments: dict[str, str] = {}
    for p in sig.params:
        if p.name in given:
            arguments[p.name] = given[p.name]
        elif p.required:
            hint = ""
            if any(f'name="{p.name}"' in v or f"name='{p.name}'" in v for v in given.values()):
                hint = f' (another value contains <parameter name="{p.name}">: a missing </parameter>?)'
            return DsmlError(
                index,
                "missing_parameter",
                f"{raw.name}: missing required parameter {p.name!r}{hint}; usage: {sig.usage()}",
                raw.name,
                given,
            )
        else:
            arguments[p.name] = p.default if p.default is not None else ""
    notes = {name: note for name, note in (raw.normalised or {}).items() if name in arguments}
    return ToolCall(index, raw.name, arguments, notes)


def parse_tool_calls(
    text: str, tools: Mapping[str, ToolSignature], *, max_invokes: int = 16, max_value_bytes: int = 1_000_000
) -> ParsedMessage:
    """Parse every `<tool_calls>` block of a message into calls and precise errors, in order.

    Never raises on model input: every problem becomes a `DsmlError` item the requester will see.

    Args:
        text: the whole message.
        tools: the registered tools by name (anything else is an `unknown_tool` error).
        max_invokes: most invokes the message may hold; more fail the whole message (`too_many_invokes`).
        max_value_bytes: largest parameter value in UTF-8 bytes (`value_too_large`).
    """
    items: list[ToolCall | DsmlError] = []
    raw_count = 0
    found = False
    for block_no, (_, _, invokes) in enumerate(scan_blocks(text), start=1):
        found = True
        if isinstance(invokes, str):
            items.append(
                DsmlError(
                    len(items) + 1,
                    "syntax",
                    f"<tool_calls> block {block_no}: {invokes}. Nothing in this block was run; "
                    "close every tag and send the block again.",
                )
            )
            break
        if not invokes:
            items.append(
                DsmlError(len(items) + 1, "empty_block", f"<tool_calls> block {block_no} holds no <invoke>")
            )
        for raw in invokes:
            raw_count += 1
            items.append(_check_invoke(raw, len(items) + 1, tools, max_value_bytes))
    if raw_count > max_invokes:
        message = (
            f"too many invokes: the message holds {raw_count}, at most {max_invokes} are allowed "
            "per message. Nothing was run; send fewer requests per message."
        )
        return ParsedMessage((DsmlError(1, "too_many_invokes", message),), found)
    return ParsedMessage(tuple(items), found)
