"""Two tiny protocol exchanges through PSE's own model client, judged by PSE's own parsers.

A tool call (`read_file` of one path, read back with `parse_tool_calls`) and a verdict on one
criterion (`parse_verdict`): what every role and the Evaluator must be able to write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from autogen_core.models import ChatCompletionClient, LLMMessage, SystemMessage, UserMessage

from pse.exceptions import ProtocolError, PSEError
from pse.protocol import DsmlError, ParamSpec, ToolSignature, find_blocked, parse_tool_calls, parse_verdict
from pse.roles import TASK_SOURCE, Role
from pse.tools import Tool

__all__ = ["EXCHANGE_TOOL", "Exchange", "tool_call_exchange", "verdict_exchange"]

_PATH = "notes.txt"
EXCHANGE_TOOL = ToolSignature(Tool.READ_FILE, (ParamSpec("path", max_chars=200),))
"""The one tool both exchanges offer: what a constrained client's grammar allows."""
_TOOL_SYSTEM = f"""You request tools; you never act yourself. Request a tool with exactly this block and \
nothing else, then stop writing:

<tool_calls>
<invoke name="{Tool.READ_FILE}">
<parameter name="path">PATH</parameter>
</invoke>
</tool_calls>"""
_TOOL_USER = f"Read the file {_PATH}."
_VERDICT_SYSTEM = f"""You are the {Role.EVALUATOR}. Judge every criterion against the evidence and answer \
with exactly one verdict block and nothing else:

<verdict status="PASS or PARTIAL or FAIL">
<reason_code>ALL_MET or CRITERIA_UNMET</reason_code>
<criterion id="AC1" met="true or false">what the evidence shows</criterion>
<summary>one sentence</summary>
</verdict>"""
_VERDICT_USER = f"""Criterion AC1: the file {_PATH} exists.
Evidence: <tool_results for="{Role.EVALUATOR}"><result index="1" name="{Tool.READ_FILE}" status="ok">\
hello</result></tool_results>
Give your verdict."""


@dataclass(frozen=True)
class Exchange:
    """One exchange: did the reply parse, why not, and what it cost."""

    valid: bool
    detail: str
    seconds: float
    completion_tokens: int


async def _ask(client: ChatCompletionClient, system: str, user: str) -> tuple[str, float, int] | str:
    """(reply, seconds, completion tokens), or the error text of a failed call."""
    messages: list[LLMMessage] = [
        SystemMessage(content=system),
        UserMessage(content=user, source=TASK_SOURCE),
    ]
    started = time.perf_counter()
    try:
        result = await client.create(messages)
    except PSEError as exc:
        return f"{type(exc).__name__}: {exc}"
    text = result.content if isinstance(result.content, str) else str(result.content)
    return text, time.perf_counter() - started, result.usage.completion_tokens


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:80] + "…" if len(flat) > 80 else flat


async def tool_call_exchange(client: ChatCompletionClient) -> Exchange:
    """Ask for `read_file(notes.txt)`; valid when the reply holds exactly that request, well-formed."""
    asked = await _ask(client, _TOOL_SYSTEM, _TOOL_USER)
    if isinstance(asked, str):
        return Exchange(False, asked, 0.0, 0)
    text, seconds, tokens = asked
    parsed = parse_tool_calls(text, {Tool.READ_FILE: EXCHANGE_TOOL})
    if not parsed.found_block:
        return Exchange(False, f"no <tool_calls> block: {_excerpt(text)!r}", seconds, tokens)
    errors = [item for item in parsed.items if isinstance(item, DsmlError)]
    if errors:
        return Exchange(False, f"{errors[0].kind}: {errors[0].message}", seconds, tokens)
    calls = [(c.name, c.arguments.get("path", "").strip()) for c in parsed.items]
    if calls != [(Tool.READ_FILE, _PATH)]:
        return Exchange(
            False, f"well-formed, but asked for {calls} instead of one read of {_PATH}", seconds, tokens
        )
    return Exchange(True, "well-formed request", seconds, tokens)


async def verdict_exchange(client: ChatCompletionClient) -> Exchange:
    """Ask for a verdict on AC1; valid when `parse_verdict` accepts it and it judges AC1."""
    asked = await _ask(client, _VERDICT_SYSTEM, _VERDICT_USER)
    if isinstance(asked, str):
        return Exchange(False, asked, 0.0, 0)
    text, seconds, tokens = asked
    try:
        verdict = parse_verdict(text)
    except ProtocolError as exc:
        # An Evaluator may end with <blocked> instead (issue 31), and its grammar offers it: well formed,
        # it kept the protocol, though it is not the verdict asked for.
        blocked = _blocked(text) if "<verdict" not in text else None
        if blocked is not None:
            return Exchange(
                False, f"well-formed, but a <blocked> ({blocked}), not a verdict", seconds, tokens
            )
        return Exchange(False, f"{exc}: {_excerpt(text)!r}", seconds, tokens)
    if "AC1" not in {c.id for c in verdict.criteria}:
        return Exchange(False, "a verdict, but it does not judge AC1", seconds, tokens)
    return Exchange(True, f"verdict {verdict.status}", seconds, tokens)


def _blocked(text: str) -> str | None:
    """The reason code of the one well-formed `<blocked>` an Evaluator's answer holds, if it holds one."""
    try:
        found = find_blocked(text, Role.EVALUATOR)
    except ProtocolError:
        return None
    return found.reason_code if found is not None else None
