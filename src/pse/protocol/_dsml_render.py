"""DSML written: `<tool_calls>` blocks and invokes that `parse_tool_calls` reads back exactly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pse.protocol._dsml import CDATA_CLOSE, CDATA_OPEN
from pse.protocol._normalise import normalise_value

__all__ = ["render_invoke", "render_tool_calls"]


def _cdata(value: str) -> str:
    return CDATA_OPEN + value.replace(CDATA_CLOSE, "]]]]><![CDATA[>") + CDATA_CLOSE


def render_tool_calls(calls: Sequence[tuple[str, Mapping[str, str]]]) -> str:
    """Render requests as one `<tool_calls>` block that `parse_tool_calls` reads back exactly.

    A value is written raw unless raw text would not round-trip (it holds `</parameter` or `<![CDATA[`, or
    the parser would normalise it: a fenced or block-indented value); then it is written as CDATA
    sections with every `]]>` split.
    """
    invokes = [render_invoke(name, arguments) for name, arguments in calls]
    return "\n".join(["<tool_calls>", *invokes, "</tool_calls>"])


def render_invoke(name: str, arguments: Mapping[str, str], *, error: str | None = None) -> str:
    """One `<invoke>` of a `<tool_calls>` block; with `error`, one that fails as `bad_arguments`, saying why.

    `error` must hold no `"`, `<` or `>` (an attribute value); `pse.protocol._native` writes it.
    """
    lines = [f'<invoke name="{name}" error="{error}">' if error is not None else f'<invoke name="{name}">']
    for pname, value in arguments.items():
        raw_ok = CDATA_OPEN not in value and "</parameter" not in value and normalise_value(value)[1] is None
        body = value if raw_ok else _cdata(value)
        lines.append(f'<parameter name="{pname}">{body}</parameter>')
    lines.append("</invoke>")
    return "\n".join(lines)
