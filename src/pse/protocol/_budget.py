"""How long each part of a constrained message may be, so that the whole message fits its token limit.

A grammar that bounds only the shape still lets a model ramble *inside* it: a small model at
temperature 0 repeats one clause of a criterion until `max_tokens` cuts it, and the cut message has
no closing tag. `fit_sizes` gives every unbounded part of `turn_grammar` a bound (prose, each text,
the number of plan items, each path and tool-parameter value, the invokes of one message) chosen so
that the *longest* message the grammar accepts is at most `TurnShape.max_chars` characters.
`tests/test_grammar_budget.py` measures that longest message on the generated grammar itself.

The split keeps what a small model writes whole: the most plan items (up to `MAX_PLAN_ITEMS`) whose
texts can still hold `USEFUL_TEXT` characters each (a sentence: a plan cut mid-sentence is worse than a
shorter one), the rest to the texts; and the most invokes per message whose values can still hold
`USEFUL_VALUE` characters each (for a role that writes deliverables, a file of two hundred lines in one
`write_file`; for the others, a command or a test file), else one invoke with the whole room. Tool
values are counted in characters (`_gbnf.chunked`), so the room is used, not divided by the three
characters a `<<x` piece could take.
Without a budget (`max_chars` None) the bounds are generous (`TEXT_CHARS` a text, 16 items), tool
values unbounded: a looping model still closes its tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pse.protocol._tags import BLOCKED_REASONS, SPEC_CONFLICT, VERDICT_STATUSES
from pse.protocol._types import ToolSignature
from pse.roles import SINGLE_AGENT, Role
from pse.tool_names import Tool

__all__ = [
    "CONFLICT_TEST_CHARS",
    "MAX_FINDINGS",
    "MAX_PLAN_ITEMS",
    "PROSE_CHARS",
    "TEXT_CHARS",
    "USEFUL_CHECK_VALUE",
    "USEFUL_FILE",
    "USEFUL_TEXT",
    "USEFUL_VALUE",
    "GrammarSizes",
    "fit_sizes",
]

PROSE_CHARS = 400
"""Most characters of prose before a message's block (the longest in the reference cassettes is 221)."""
MAX_PLAN_ITEMS = 16
"""Most steps, criteria and outputs of one plan under the grammar (ids S1..S16, AC1..AC16)."""
TEXT_CHARS = 1000
"""Most characters of one text (a goal, step, criterion, reason, summary or report line), unbudgeted."""
USEFUL_TEXT = 160
"""Fewest characters a plan item's text is given while the budget allows more items (a sentence)."""
USEFUL_VALUE = 6000
"""Fewest characters each tool-parameter value of a Specialist (or the single agent) is given while the
budget allows more invokes per message: about 200 lines of code (with fewer invokes, more)."""
USEFUL_CHECK_VALUE = 1500
"""The same for the Planner and the Evaluator, whose long values are commands and their own tests: more
calls of one message (a check, a lint, a read) matter more to them than a long value."""
USEFUL_FILE = 3000
"""The same for a Specialist that writes files as file blocks (`_files`): about a hundred lines. Under a
small model's budget (4,096 characters) that is one file a message. Two files of about fifty lines
would save a turn, but a file longer than its share is cut by the grammar and no longer parses, and the
model cannot tell why: Qwen2.5-Coder-1.5B's `roman.py` and `test_roman.py`, written in one message, were
both cut at the same 1,473 characters, and it never wrote either whole again (issue 44). An Evaluator's
tests keep `USEFUL_CHECK_VALUE`, the smaller of the two."""
MAX_FINDINGS = 8
"""Most `<finding>`s of one verdict under the grammar (ids F1..F8); a budget may allow fewer or none."""
FINDING_LINE_DIGITS = 6
"""Most digits of a finding's `line`."""
CONFLICT_TEST_CHARS = 120
"""Most characters of the test a `SPEC_CONFLICT` names (a pytest node id)."""
_MIN_TEXT = 8
_MAX_BUDGETED_TEXT = 300
_PATH_UNITS = 40  # a budgeted output path: at most 2 + 2*40 characters
_WS = 16  # `ws`: at most 16 whitespace characters
_END = 2  # `end`: at most 2
_VALUE_WRAP = 2 * _WS + len("<![CDATA[") + len("]]>")  # a CDATA value's characters beyond its units


@dataclass(frozen=True)
class GrammarSizes:
    """The bounds `turn_grammar` writes.

    Attributes:
        prose: most characters of prose before the block.
        text: most characters of one text.
        items: most steps, most criteria and most outputs of a plan (and criteria of a verdict without
            a known plan).
        path: most units of an output path (two characters each).
        value: most characters of one tool-parameter value; None: unbounded.
        invokes: most invokes in one message.
        short: most characters of a short value (a parameter with `max_chars`: at most that many).
        goal: most characters of a plan's goal, which says the whole task in a sentence (None: `text`).
        findings: most `<finding>`s of a verdict (an Evaluator told of them): what room the budget
            leaves after the criteria and the summary, never taken from them.
    """

    prose: int
    text: int
    items: int
    path: int
    value: int | None
    invokes: int
    short: int | None = None
    goal: int | None = None
    findings: int = 0


def fit_sizes(
    role: str,
    tools: Sequence[ToolSignature],
    criteria: Sequence[str] | None,
    max_chars: int | None,
    max_invokes: int,
    *,
    files: bool = False,
) -> GrammarSizes:
    """The bounds under which every message `role` may send is at most `max_chars` characters (with
    `files`, a role that writes files as file blocks, each counted as a `write_file` invoke).

    Raises:
        ValueError: no message of this role fits in `max_chars` (the message says how many it needs).
    """
    if max_chars is None:
        return GrammarSizes(
            PROSE_CHARS,
            TEXT_CHARS,
            MAX_PLAN_ITEMS,
            200,
            None,
            max_invokes,
            goal=2 * TEXT_CHARS,
            findings=MAX_FINDINGS,
        )
    sizes = _fit(role, tools, criteria, max_chars, max_invokes, files)
    if sizes is None:
        need = next(
            (n for n in range(max_chars, 1 << 20, 16) if _fit(role, tools, criteria, n, max_invokes, files)),
            None,
        )
        raise ValueError(
            f"{role}'s message may hold {max_chars} characters, too few for any message it may send "
            f"(it needs about {need})"
        )
    return sizes


def _fit(
    role: str,
    tools: Sequence[ToolSignature],
    criteria: Sequence[str] | None,
    max_chars: int,
    max_invokes: int,
    files: bool = False,
) -> GrammarSizes | None:
    prose = min(PROSE_CHARS, max_chars // 8)
    room = max_chars - prose - _END  # for the one block after the prose
    path = max(4, min(_PATH_UNITS, room // 40))
    if role == Role.PLANNER:
        items, text = _plan(room, path)
        text = min(text, room - _BLOCKED)
    elif role == Role.SPECIALIST:
        items, text = 1, min(_MAX_BUDGETED_TEXT, (room - _REPORT_OVERHEAD) // 4, room - _CONFLICT)
    elif role in (Role.EVALUATOR, SINGLE_AGENT):
        items, text = _verdict(room, criteria)
        text = min(text, room - _CONFLICT)
    else:
        raise ValueError(f"unknown role {role!r}")
    if text < _MIN_TEXT:
        return None
    findings = _findings(room, criteria, items, text, path) if role in (Role.EVALUATOR, SINGLE_AGENT) else 0
    invokes, value, short = 1, None, max(_MIN_TEXT, room // 8)
    if tools:
        useful = USEFUL_VALUE if role in (Role.SPECIALIST, SINGLE_AGENT) else USEFUL_CHECK_VALUE
        useful = min(useful, USEFUL_FILE) if files else useful
        calls = _calls(room, tools, max_invokes, short, useful, path if files else None)
        if calls is None:
            return None
        invokes, value = calls
    goal = 2 * text if role == Role.PLANNER else None
    return GrammarSizes(prose, text, items, path, value, invokes, short, goal, findings)


# Longest texts of the fixed parts (see `_grammar.py`): `<plan>` ws `<goal>` … `</goal>` ws … `</plan>`.
_PLAN_OVERHEAD = len("<plan>") + _WS + len("<goal></goal>") + _WS + len("</plan>")  # the goal: two texts
_STEP = len(f'<step id="S{MAX_PLAN_ITEMS}"></step>') + _WS
_CRITERION = len(f'<criterion id="AC{MAX_PLAN_ITEMS}"></criterion>') + _WS
_OUTPUT = len('<output path=""/>') + 2 + _WS  # and two characters per path unit
_REPORT_OVERHEAD = len("<report>\n</report>") + sum(
    len(f"{label}:\n") for label in ("Artifacts", "Evidence", "Assumptions", "Unresolved")
)


_BLOCKED = len('<blocked reason_code=""></blocked>') + max(map(len, BLOCKED_REASONS))
_CONFLICT = len(f'<blocked reason_code="{SPEC_CONFLICT}" test=""></blocked>') + CONFLICT_TEST_CHARS


def _plan(room: int, path: int) -> tuple[int, int]:
    """(items, text) of a plan: each of `items` steps, criteria and outputs, and the goal (twice a text),
    in `room`."""

    def text_for(items: int) -> int:
        fixed = _PLAN_OVERHEAD + items * (_STEP + _CRITERION + _OUTPUT + 2 * path)
        return (room - fixed) // (2 * items + 2)  # the goal (two texts) and each step and criterion

    items = next((n for n in range(MAX_PLAN_ITEMS, 0, -1) if text_for(n) >= USEFUL_TEXT), 1)
    return items, min(_MAX_BUDGETED_TEXT, text_for(items))


_VERDICT_OVERHEAD = (
    len('<verdict status="">')
    + max(map(len, VERDICT_STATUSES))
    + _WS
    + len("<reason_code></reason_code>")
    + 40  # the reason code
    + _WS
    + len("<summary></summary>")
    + _WS
    + len("</verdict>")
)
_JUDGED = len('<criterion id="" met="false"></criterion>') + _WS
_ANY_ID = 16  # a criterion id when no plan is known: at most 16 characters


def _verdict(room: int, criteria: Sequence[str] | None) -> tuple[int, int]:
    """(items, text) of a verdict: the plan's criteria (or up to `items` of any ids) and the summary."""
    if criteria:
        ids = sum(len(c) for c in criteria)
        return len(criteria), min(
            _MAX_BUDGETED_TEXT,
            (room - _VERDICT_OVERHEAD - len(criteria) * _JUDGED - ids) // (len(criteria) + 1),
        )
    per = _JUDGED + _ANY_ID
    items = next(
        (
            n
            for n in range(MAX_PLAN_ITEMS, 0, -1)
            if (room - _VERDICT_OVERHEAD - n * per) // (n + 1) >= USEFUL_TEXT
        ),
        1,
    )
    return items, min(_MAX_BUDGETED_TEXT, (room - _VERDICT_OVERHEAD - items * per) // (items + 1))


_FINDING = (
    len(f'<finding id="F{MAX_FINDINGS}" severity="medium" criterion="" path="" line=""></finding>') + _WS
)


def _findings(room: int, criteria: Sequence[str] | None, items: int, text: int, path: int) -> int:
    """How many findings fit in what a verdict of `items` criteria and texts of `text` characters leaves
    of `room`: each a text, its criterion id, a path of `path` units and a line number."""
    judged = len(criteria) * _JUDGED + sum(map(len, criteria)) if criteria else items * (_JUDGED + _ANY_ID)
    left = room - _VERDICT_OVERHEAD - judged - (items + 1) * text
    cid = max(map(len, criteria)) if criteria else _ANY_ID
    per = _FINDING + cid + 2 + 2 * path + FINDING_LINE_DIGITS + text
    return max(0, min(MAX_FINDINGS, left // per))


_CALLS_OVERHEAD = len("<tool_calls></tool_calls>") + _WS


def _invoke_overhead(tool: ToolSignature, short: int) -> int:
    """An invoke's longest text but for its long values (short ones count in full)."""
    params = sum(
        len(f'<parameter name="{p.name}"></parameter>') + _WS + min(p.max_chars or 0, short)
        for p in tool.params
    )
    return len(f'<invoke name="{tool.name}"></invoke>') + _WS + params + _WS  # + the ws after it


def _long(tool: ToolSignature) -> int:
    return sum(1 for p in tool.params if p.max_chars is None)


FILE_OVERHEAD = 55
"""A file block's longest text but for its path and content (`_files.file_rules`): the line break and
whitespace before it, the path's first character and extension, two fences, the language word, the first
characters of its content."""


def _calls(
    room: int,
    tools: Sequence[ToolSignature],
    max_invokes: int,
    short: int,
    useful: int,
    file_path: int | None = None,
) -> tuple[int, int] | None:
    """(invokes, value characters): the most invokes whose every value can still hold `useful`
    characters (a file's content is what a Specialist's budget is for), else one invoke of at least 8.
    With `file_path` (a role that writes file blocks, paths of that many units), `write_file` is written
    as a file block: an item of a message is a block or an invoke, and a block's overhead is its own."""

    def units_for(invokes: int) -> int:
        per_invoke = (room - _CALLS_OVERHEAD) // invokes
        free = [
            (per_invoke - _invoke_overhead(t, short), _long(t))
            for t in tools
            if file_path is None or t.name != Tool.WRITE_FILE
        ]
        if file_path is not None:
            free.append((per_invoke - FILE_OVERHEAD - 2 * file_path, 1))
        if any(chars < 0 for chars, _ in free):
            return -1
        return min((chars // n - _VALUE_WRAP for chars, n in free if n), default=_MIN_TEXT)

    invokes = next((n for n in range(max_invokes, 1, -1) if units_for(n) >= useful), 1)
    units = units_for(invokes)
    return (invokes, units) if units >= _MIN_TEXT else None
