"""Tool results, from the ToolAgent back to the requester: render, read back, and cap their size.

    <tool_results for="Specialist">
      <result index="1" name="write_file" status="ok">wrote quicksort.py (412 bytes)</result>
    </tool_results>

Each `<result>` body is raw text when it holds no `<`, `&` or `]]>`; otherwise it is one CDATA section
with every `]]>` split as `]]]]><![CDATA[>`. So output can never close a `<result>` or `<tool_results>`
early, and a scanner that skips CDATA (the request finder in `_dsml`) finds the real closing tag.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pse.events import ToolStatus
from pse.protocol._scan import AttributeScanner

__all__ = ["ResultItem", "parse_tool_results", "render_tool_results", "truncate_text"]

_CDATA_OPEN = "<![CDATA["
_CDATA_CLOSE = "]]>"
_ATTRS = AttributeScanner(r"\w:.-")
_RESULTS_OPEN = re.compile(r"<tool_results(?=[\s>/])")
_RESULTS_CLOSE = re.compile(r"</tool_results\s*>")
_RESULT_OPEN = re.compile(r"<result(?=[\s>/])")
_RESULT_CLOSE = re.compile(r"</result\s*>")
_WS = re.compile(r"\s*")


@dataclass(frozen=True, slots=True)
class ResultItem:
    """One `<result>` to render (or as parsed back)."""

    index: int
    name: str
    status: ToolStatus
    output: str
    ms: int | None = None


def _attributes(tag_body: str) -> dict[str, str]:
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTRS.pairs(tag_body)}


def _cdata(value: str) -> str:
    return _CDATA_OPEN + value.replace(_CDATA_CLOSE, "]]]]><![CDATA[>") + _CDATA_CLOSE


def _escape_attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _unescape_attr(value: str) -> str:
    return value.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _result_body(output: str) -> str:
    if "<" in output or "&" in output or _CDATA_CLOSE in output:
        return _cdata(output)
    return output


def render_tool_results(requester: str, items: Sequence[ResultItem]) -> str:
    """Render results addressed to `requester`; bodies use the escaping rule in the module docstring."""
    lines = [f'<tool_results for="{_escape_attr(requester)}">']
    for it in items:
        ms = f' ms="{it.ms}"' if it.ms is not None else ""
        lines.append(
            f'<result index="{it.index}" name="{_escape_attr(it.name)}" status="{it.status}"{ms}>'
            f"{_result_body(it.output)}</result>"
        )
    lines.append("</tool_results>")
    return "\n".join(lines)


def parse_tool_results(text: str) -> tuple[str, list[ResultItem]]:
    """Read back the first `<tool_results>` rendered by `render_tool_results` (for tests and trace tools).

    Raises:
        ValueError: the text holds no complete `<tool_results>` element.
    """
    opening = _RESULTS_OPEN.search(text)
    if opening is None:
        raise ValueError("no <tool_results> element in the text")
    head_end = _end_of_tag(text, opening.start(), "tool_results")
    requester = _unescape_attr(_attributes(text[opening.start() : head_end]).get("for", ""))
    items: list[ResultItem] = []
    cur = head_end
    while True:
        cur = _WS.match(text, cur).end()  # type: ignore[union-attr]
        if _RESULTS_CLOSE.match(text, cur):
            return requester, items
        if not _RESULT_OPEN.match(text, cur):
            raise ValueError(f"unexpected text at offset {cur} inside <tool_results>")
        tag_end = _end_of_tag(text, cur, "result")
        attrs = {k: _unescape_attr(v) for k, v in _attributes(text[cur:tag_end]).items()}
        if text.startswith(_CDATA_OPEN, tag_end):
            value, after = _read_cdata_run(text, tag_end)
        else:
            after = text.find("<", tag_end)
            if after < 0:
                raise ValueError(f"result {attrs.get('index')} is not closed by </result>")
            value = text[tag_end:after]
        close = _RESULT_CLOSE.match(text, after)
        if close is None:
            raise ValueError(f"result {attrs.get('index')} is not closed by </result>")
        ms = attrs.get("ms")
        items.append(
            ResultItem(
                int(attrs.get("index", "0")),
                attrs.get("name", ""),
                attrs.get("status", "error"),  # type: ignore[arg-type]
                value,
                int(ms) if ms else None,
            )
        )
        cur = close.end()


def _end_of_tag(text: str, start: int, tag: str) -> int:
    """Index just past the `>` of the tag opening at `start` (`_tag_end` for `parse_tool_results`).

    A tag with no `>` is an error, never index 0: reading on from the start of the text would send the
    reader back, and a forged result could make it go round forever.
    """
    end = text.find(">", start)
    if end < 0:
        raise ValueError(f"the tag <{tag} at offset {start} is never closed with '>'")
    return end + 1


def _read_cdata_run(text: str, pos: int) -> tuple[str, int]:
    parts: list[str] = []
    while text.startswith(_CDATA_OPEN, pos):
        close = text.find(_CDATA_CLOSE, pos + len(_CDATA_OPEN))
        if close < 0:
            raise ValueError("unclosed CDATA section")
        parts.append(text[pos + len(_CDATA_OPEN) : close])
        pos = close + len(_CDATA_CLOSE)
    return "".join(parts), pos


def truncate_text(text: str, limit: int) -> tuple[str, int]:
    """Cap `text` at about `limit` characters, keeping its head and tail around a visible marker.

    The tail is kept because the end of a command's output (pytest's summary, a traceback's last line)
    usually matters most. Returns (text, number of characters removed); 0 means untouched.
    """
    if len(text) <= limit:
        return text, 0
    keep = max(limit - 48, 0)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    removed = len(text) - head - tail
    tail_text = text[len(text) - tail :] if tail else ""
    return f"{text[:head]}\n[… truncated {removed} characters …]\n{tail_text}", removed
