"""A role's model context that withholds the content of a write that did not stand: a Python file that
was not code to run, a write the ToolAgent refused, or one that changed nothing.

A small model shown its own broken file copies it: asked to write the file again, Qwen2.5-Coder-1.5B
wrote the same stray `]` on every turn of a cycle (issue 29's run 11), told the error, the line, or both.
Given the same turn with that write's content withheld, it wrote the file anew, and it parsed. So a
role's model sees, in place of such a content, a short placeholder (`WITHHELD`; a file-block role sees
no block at all, `FencedWritesClient`), and the ToolAgent's note (path, error, line) stays as it was:
what to fix without the text to copy.

A write the ToolAgent refused (its result is not `ok`: nothing was written) is withheld the same way.
At temperature 0 the 1.5B model's Evaluator wrote the same test file seven times in one cycle, each
refused as a copy of the Specialist's tests, until the turn cap (heldout-11, slugify): what it was shown
of its refused write is what it wrote again. So is a write of the very bytes its file held (it changed
nothing): shown it, a model told to change the file copies it once more.

Only the model's view changes: the messages the context holds, the trace and the files are the role's
own. A write is withheld when the ToolAgent's result for that very invoke (same index, `write_file`)
is not `ok`, or says its path does not parse as Python or reads a name nothing in it binds
(`_not_code`), or that it changed nothing (`_unchanged`); a message PSE cannot read back as invokes is
left whole.

The same view ends with PSE's notice of a role's last turn in its phase (`LAST_TURN_NOTICE`) when the
phase's turn cap leaves room for no tool call and its answer before a final: at the cap the phase ends
TIMEOUT, and held-out roman and csv-mean ended so with a right module on disk and no verdict.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import AssistantMessage, LLMMessage, UserMessage

from pse.protocol import parse_tool_results, read_invokes, render_tool_calls
from pse.roles import LAST_TURN, TASK_SOURCE
from pse.team._conditions import FINAL_TURNS
from pse.tools import EVALUATION_PREFIX, NOT_BOUND, NOT_PYTHON, UNCHANGED, WITHHELD, Tool

__all__ = ["LAST_TURN_NOTICE", "WITHHELD", "WithholdingContext", "withhold_broken_writes"]

_REFUSED = re.compile(r'name="write_file" status="(?!ok")')
"""A write_file result that is not `ok` (a cheap look before the results are parsed)."""


LAST_TURN_NOTICE = (
    f"{LAST_TURN}: a tool call now would get no answer before the turn cap. Send your final message now"
    " (your plan, report or verdict), on what you have."
)
"""What ends a role's request when its phase has room for one message of its own only (`room`)."""


class WithholdingContext(UnboundedChatCompletionContext):
    """AutoGen's unbounded context, seen through `withhold_broken_writes`, and ended with
    `LAST_TURN_NOTICE` when `room` (the messages the phase may still hold) is under `FINAL_TURNS`: a
    tool call then would be answered by the ToolAgent and the cap would end the phase with no final.
    The notice is in the model's view only, as the withheld writes are; the turn's shape reads it and
    offers no tool (`models._turn_shape`), so a grammar makes the final what the model sends."""

    def __init__(self, room: Callable[[], int] | None = None) -> None:
        super().__init__()
        self._room = room

    async def get_messages(self) -> list[LLMMessage]:
        view = withhold_broken_writes(self._messages)
        if self._room is not None and 0 < self._room() < FINAL_TURNS:  # 0: the phase is over
            view.append(UserMessage(content=LAST_TURN_NOTICE, source=TASK_SOURCE))
        return view


def withhold_broken_writes(messages: list[LLMMessage]) -> list[LLMMessage]:
    """`messages` with each write the next result refuses, says is not code to run, or says changed
    nothing, shown as `WITHHELD`."""
    view = list(messages)
    for i in range(len(view) - 1):
        message, answer = view[i], view[i + 1]
        if (
            isinstance(message, AssistantMessage)
            and isinstance(message.content, str)
            and isinstance(answer.content, str)
            and _may_withhold(answer.content)
        ):
            view[i] = _withheld(message, answer.content)
    return view


def _may_withhold(answer: str) -> bool:
    """A cheap look, before the results are parsed: a write refused, a note that a file is not code, or
    that a write changed nothing."""
    return (
        any(note in answer for note in (NOT_PYTHON, NOT_BOUND, UNCHANGED))
        or _REFUSED.search(answer) is not None
    )


def _as_noted(path: str) -> str:
    """`path` as the ToolAgent's notes name a file: within its area, normalized."""
    return posixpath.normpath(path.strip().removeprefix(EVALUATION_PREFIX).lstrip("/"))


def _not_code(path: str, note: str) -> bool:
    """Whether the ToolAgent's result for the write of `path` says the file is not code to run: it does
    not parse, or it reads a name nothing in it binds (what PSE could bind, it bound at the write). The
    1.5B model wrote `roman.py` as `obj['python_code']` and, told the name was never bound, wrote the
    same 19 bytes twice more (heldout-9).

    The note names the file within its area (`test_x.py` for `@evaluation/test_x.py`, `x.py` for
    `./x.py`): read by that name, or the Evaluator is shown its own test file that did not parse and
    writes it again, byte for byte (held-out roman: the same 1,474 bytes five times, heldout-15)."""
    rel = _as_noted(path)
    return f"{rel} {NOT_PYTHON}" in note or (f"{rel} uses " in note and NOT_BOUND in note)


def _unchanged(path: str, note: str) -> bool:
    """Whether the ToolAgent's result for the write of `path` says it wrote the very bytes the file held.
    Shown its no-op write of a file a revise was to write again, a model copies those bytes once more:
    the 1.5B model wrote code-delivery's `quicksort.py` back byte for byte, as the review failed it."""
    rel = _as_noted(path)
    return f"{rel} already held exactly these bytes: {UNCHANGED}" in note


def _withheld(message: AssistantMessage, answer: str) -> AssistantMessage:
    assert isinstance(message.content, str)
    invokes = read_invokes(message.content)
    try:
        _, results = parse_tool_results(answer)
    except ValueError:
        return message
    if not invokes or len(invokes) != len(results):
        return message  # not one result per invoke: which result answers which invoke is unknown
    broken = {
        r.index
        for r, (name, params) in zip(results, invokes, strict=True)
        if r.name == name == Tool.WRITE_FILE
        and (
            r.status != "ok"
            or _not_code(dict(params).get("path", ""), r.output)
            or _unchanged(dict(params).get("path", ""), r.output)
        )
    }
    if not broken:
        return message
    calls = [
        (name, {p: WITHHELD if n in broken and p == "content" else v for p, v in params})
        for n, (name, params) in enumerate(invokes, start=1)
    ]
    prose = message.content[: message.content.find("<tool_calls")].rstrip()
    content = (prose + "\n\n" if prose else "") + render_tool_calls(calls)
    return message.model_copy(update={"content": content})
