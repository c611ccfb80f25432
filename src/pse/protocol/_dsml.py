"""DSML: the tool-call wire format, scanned. Pure functions (checked against signatures: `_calls`; rendered:
`_dsml_render`; results: `_results`).

Requests, inside any role's message (prose and Markdown fences around them are fine)::

    <tool_calls>
      <invoke name="write_file">
        <parameter name="path">quicksort.py</parameter>
        <parameter name="content">def quicksort(a): return a if len(a) < 2 else ...</parameter>
      </invoke>
    </tool_calls>

Scanning rules (a small scanner, never an XML library, so nothing is ever expanded):

* A parameter body is **raw text** up to the first literal `</parameter>`; `<`, `&`, quotes, blank lines
  and even `<parameter` inside it are data. `&lt;` stays the four characters `&lt;`.
* A body that (after optional whitespace) starts with `<![CDATA[` is one or more adjacent CDATA sections
  followed by optional whitespace and `</parameter>`; the value is their concatenated content. This is how a
  value holding `</parameter>` is written, and `]]>` inside a value is split as `]]]]><![CDATA[>`.
* A raw body is taken as the model meant it (`_normalise`): one Markdown fence around the whole value is
  unwrapped, and a body that starts on the line after its tag loses the indentation of the XML nesting.
  The call says which values were changed and how (`ToolCall.normalised`); CDATA is never changed.
* `string="true"` (and any other attribute but `name`) on a parameter is accepted and ignored: every value
  is text; tools convert.
* `error="why"` on an invoke marks a request whose arguments could not be read where it was made (a native
  call's arguments that are no JSON object, `_native`): it fails as `bad_arguments`, and nothing of it runs.
* Inside `<tool_calls>` only `<invoke>` elements and whitespace may appear; inside `<invoke>` only
  `<parameter>` elements and whitespace. A syntax error (an unclosed tag, stray text) fails its whole
  block: nothing in that block runs, because executing half of a garbled request is worse than none.
  Semantic errors (unknown tool, missing / duplicate / unexpected parameter, over-size value) fail only
  their invoke. More invokes in one message than allowed fail the whole message.
* Text inside `<tool_results>` is never read as requests, and a tag wrapped in single backticks
  (`` `<tool_calls>` ``) is a mention in prose, not a request.
* Every scan is one forward pass over the message (see `_scan`), so no message, however garbled, costs
  more than a read of its length: a scan that rereads the rest per tag would let one message stall the loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from pse.protocol._normalise import normalise_value
from pse.protocol._scan import AttributeScanner, Cursor

__all__ = [
    "CDATA_CLOSE",
    "CDATA_OPEN",
    "RawBlock",
    "RawInvoke",
    "has_tool_calls",
    "read_invokes",
    "request_blocks",
    "scan_blocks",
]

CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"
_ATTRS = AttributeScanner(r"\w:.-")
CDATA_OPENER = re.compile(re.escape(CDATA_OPEN))
CDATA_CLOSER = re.compile(re.escape(CDATA_CLOSE))
_TAG_END = re.compile(">")
_CALLS_OPEN = re.compile(r"<tool_calls(?=[\s>/])")
_RESULTS_OPEN = re.compile(r"<tool_results(?=[\s>/])")
_RESULTS_CLOSE = re.compile(r"</tool_results\s*>")
_CALLS_CLOSE = re.compile(r"</tool_calls\s*>")
_INVOKE_OPEN = re.compile(r"<invoke(?=[\s>/])")
_INVOKE_CLOSE = re.compile(r"</invoke\s*>")
_PARAM_OPEN = re.compile(r"<parameter(?=[\s>/])")
_PARAM_CLOSE = re.compile(r"</parameter\s*>")
_WS = re.compile(r"\s*")


class _SyntaxProblem(Exception):
    """Internal: a syntax error that fails the enclosing block."""


def _attributes(tag_body: str) -> dict[str, str]:
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTRS.pairs(tag_body)}


def _tag_end(text: str, start: int, tag: str) -> int:
    """Index just past the `>` of the tag opening at `start`; attribute values never hold `>`."""
    end = text.find(">", start)
    if end < 0:
        raise _SyntaxProblem(f"the tag <{tag} is never closed with '>'")
    return end + 1


def _is_backticked(text: str, start: int, end: int) -> bool:
    return start > 0 and text[start - 1] == "`" and end < len(text) and text[end] == "`"


class _Requests:
    """Where the request blocks of one message start, found in one forward pass.

    A `<tool_calls` opens a request unless it is inside a `<tool_results>` element (tool output quoted
    back, whose CDATA sections may hold any closing tag) or wrapped in backticks as a mention in prose.
    Each unbounded search has a `Cursor`, so no part of the message is searched twice for the same thing.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._calls = Cursor(text, _CALLS_OPEN)
        self._results_close = Cursor(text, _RESULTS_CLOSE)
        self._cdata_open = Cursor(text, CDATA_OPENER)
        self._cdata_close = Cursor(text, CDATA_CLOSER)
        self._tag_end = Cursor(text, _TAG_END)

    def next_block(self, pos: int) -> int | None:
        """Position of the next `<tool_calls` from `pos` that opens a request; None when there is none."""
        while (calls := self._calls.find(pos)) is not None:
            # Bounded by the request opener, so a message without tool results is not read to its end
            # for one; and linear, since the next search starts past this one's bound or its region.
            results = _RESULTS_OPEN.search(self._text, pos, calls.start())
            if results is not None:
                end = self._end_of_results(results.end())
                if end is None:
                    return None  # an unclosed tool_results swallows the rest: never requests
                pos = end
                continue
            tag_end = self._tag_end.find(calls.start())
            if tag_end is not None and _is_backticked(self._text, calls.start(), tag_end.end()):
                pos = tag_end.end()
                continue
            return calls.start()
        return None

    def _end_of_results(self, pos: int) -> int | None:
        """From `pos`, the end of the first `</tool_results>` outside CDATA; None when there is none."""
        while (close := self._results_close.find(pos)) is not None:
            cdata = self._cdata_open.find(pos)
            if cdata is None or cdata.start() > close.start():
                return close.end()
            cdata_end = self._cdata_close.find(cdata.end())
            if cdata_end is None:
                return None
            pos = cdata_end.end()
        return None


def has_tool_calls(text: str) -> bool:
    """True when the text opens a `<tool_calls` block outside `<tool_results>` (the speaker selector's test).

    Cheap: it does not validate the block, so a malformed request still routes to the ToolAgent, which
    answers it with a precise error.
    """
    return _Requests(text).next_block(0) is not None


def _read_value(text: str, pos: int, pname: str) -> tuple[str, int, str | None]:
    """Read a parameter body from `pos` (just after its open tag); return (value, position after it, what
    normalising the raw body changed)."""
    lead = _WS.match(text, pos)
    assert lead is not None
    if text.startswith(CDATA_OPEN, lead.end()):
        parts: list[str] = []
        cur = lead.end()
        while text.startswith(CDATA_OPEN, cur):
            close = text.find(CDATA_CLOSE, cur + len(CDATA_OPEN))
            if close < 0:
                raise _SyntaxProblem(
                    f"parameter {pname!r}: unclosed <![CDATA[ (no ']]>' before the end of the message)"
                )
            parts.append(text[cur + len(CDATA_OPEN) : close])
            cur = close + len(CDATA_CLOSE)
        trail = _WS.match(text, cur)
        assert trail is not None
        m = _PARAM_CLOSE.match(text, trail.end())
        if m is None:
            raise _SyntaxProblem(
                f"parameter {pname!r}: text after its CDATA section; put the whole value inside "
                "<![CDATA[ ... ]]> followed directly by </parameter>"
            )
        return "".join(parts), m.end(), None
    m = _PARAM_CLOSE.search(text, pos)
    if m is None:
        raise _SyntaxProblem(
            f"unclosed <parameter name={pname!r}> (no </parameter> before the end of the message)"
        )
    value, note = normalise_value(text[pos : m.start()])
    return value, m.end(), note


@dataclass(slots=True)
class RawInvoke:
    """One `<invoke>` as the scanner read it: its tool, its (parameter, value) pairs in order, the error a
    translated request carries (`error="…"`), and what normalising each raw value changed."""

    name: str
    params: list[tuple[str, str]]
    error: str | None = None
    normalised: dict[str, str] | None = None


def _parse_invoke(text: str, pos: int) -> tuple[RawInvoke, int]:
    """Parse one `<invoke ...>...</invoke>` starting at `pos` (at `<invoke`)."""
    end = _tag_end(text, pos, "invoke")
    tag = text[pos:end]
    attributes = _attributes(tag)
    name = attributes.get("name")
    if not name:
        raise _SyntaxProblem(f'{tag!r} has no name attribute; write <invoke name="TOOL">')
    error = attributes.get("error")
    if tag.rstrip(">").rstrip().endswith("/"):
        return RawInvoke(name, [], error), end
    params: list[tuple[str, str]] = []
    normalised: dict[str, str] = {}
    cur = end
    while True:
        cur = _WS.match(text, cur).end()  # type: ignore[union-attr]
        if _INVOKE_CLOSE.match(text, cur):
            closed = _INVOKE_CLOSE.match(text, cur).end()  # type: ignore[union-attr]
            return RawInvoke(name, params, error, normalised), closed
        if _PARAM_OPEN.match(text, cur):
            ptag_end = _tag_end(text, cur, "parameter")
            ptag = text[cur:ptag_end]
            pname = _attributes(ptag).get("name")
            if not pname:
                raise _SyntaxProblem(
                    f'{ptag!r} in invoke {name!r} has no name attribute; write <parameter name="P">'
                )
            if ptag.rstrip(">").rstrip().endswith("/"):
                params.append((pname, ""))
                cur = ptag_end
                continue
            value, cur, note = _read_value(text, ptag_end, pname)
            params.append((pname, value))
            if note is not None:
                normalised[pname] = note
            continue
        if cur >= len(text):
            raise _SyntaxProblem(
                f"unclosed <invoke name={name!r}> (no </invoke> before the end of the message)"
            )
        snippet = text[cur : cur + 40].split("\n")[0]
        raise _SyntaxProblem(
            f"unexpected text {snippet!r} inside <invoke name={name!r}>; "
            "only <parameter> elements belong there"
        )


def _parse_block(text: str, start: int) -> tuple[list[RawInvoke], int]:
    """Parse one `<tool_calls>` block starting at `start`; return its invokes and the position after it.

    Linear in the block: every `>` and closing tag is searched from the current position only, and a miss
    is a syntax error that ends the message's parse, so no search is ever repeated from an earlier place.
    """
    cur = _tag_end(text, start, "tool_calls")
    if text[start:cur].rstrip(">").rstrip().endswith("/"):
        return [], cur
    invokes: list[RawInvoke] = []
    while True:
        cur = _WS.match(text, cur).end()  # type: ignore[union-attr]
        close = _CALLS_CLOSE.match(text, cur)
        if close:
            return invokes, close.end()
        if _INVOKE_OPEN.match(text, cur):
            invoke, cur = _parse_invoke(text, cur)
            invokes.append(invoke)
            continue
        if cur >= len(text):
            raise _SyntaxProblem("unclosed <tool_calls> (no </tool_calls> before the end of the message)")
        snippet = text[cur : cur + 40].split("\n")[0]
        raise _SyntaxProblem(
            f"unexpected text {snippet!r} inside <tool_calls>; only <invoke> elements belong there"
        )


def scan_blocks(text: str) -> Iterator[tuple[int, int, list[RawInvoke] | str]]:
    """Each `<tool_calls>` block of the message, in order, as (start, end, its invokes); a block that does
    not parse is (start, len(text), why) and ends the scan: after an unclosed tag the rest of the message
    cannot be trusted to be requests."""
    requests, pos = _Requests(text), 0
    while (start := requests.next_block(pos)) is not None:
        try:
            invokes, pos = _parse_block(text, start)
        except _SyntaxProblem as exc:
            yield start, len(text), str(exc)
            return
        yield start, pos, invokes


RawBlock = tuple[int, int, list[tuple[str, list[tuple[str, str]], str | None]]]
"""A `<tool_calls>` block as `request_blocks` reads it: (start, end, [(tool, [(parameter, value)],
error)])."""


def request_blocks(text: str) -> list[RawBlock] | None:
    """Every `<tool_calls>` block of the message as (start, end, its invokes as (tool, [(parameter, value)],
    error)), values read as `parse_tool_calls` reads them; None when a block does not parse."""
    blocks: list[RawBlock] = []
    for start, end, invokes in scan_blocks(text):
        if isinstance(invokes, str):
            return None
        blocks.append((start, end, [(item.name, item.params, item.error) for item in invokes]))
    return blocks


def read_invokes(text: str) -> list[tuple[str, list[tuple[str, str]]]] | None:
    """Every invoke of the message's blocks as (tool, [(parameter, value)]), unchecked against any
    signature, values read as `parse_tool_calls` reads them; None when a block does not parse."""
    blocks = request_blocks(text)
    return (
        None
        if blocks is None
        else [(name, params) for _, _, invokes in blocks for name, params, _ in invokes]
    )
