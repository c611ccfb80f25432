"""A tool-parameter value as the model meant it: its Markdown fence and its XML nesting taken off.

Small models write a file's content the way they would show it in a chat: inside a Markdown fence
(```` ```python ````), and on lines of their own indented to the depth of the `<parameter>` tag::

    <parameter name="content">
          ```python
          def f():
              return 1
          ```
        </parameter>

Written as it stands, that file starts with a blank line, holds a fence and is indented six spaces:
Python cannot import it. `normalise_value` turns such a raw body into what was meant (`def f():\\n
return 1\\n`), and says what it changed, so the trace can record it:

* **Nesting.** A *block* body (one that starts with a line break: the value begins on the line after
  its opening tag) loses that first line break, the indentation common to all its non-blank lines,
  and the whitespace of its closing tag's line (it ends with one line break).
* **Markup.** A body whose first line is only `<code>` or `<pre>` (and whose last, if any, only its
  closing tag) is the code inside: Qwen2.5-Coder-1.5B wrapped a whole module so, and under a grammar a
  value cannot close it (no `</`).
* **Fence.** A body whose whole text, spaces aside, is one fenced block (a line of three or more
  backticks or tildes with an optional info word, the content, and a line closing that fence, no other
  closing line between) becomes the content, without the fence's own indentation, ending with one
  line break. A body that opens a fence and never closes it (a value the token limit cut inside the
  model's block) loses the opening line.

Nothing else is ever changed: a value that starts on the tag's line is not dedented, a fence with text
before or after it is kept, and CDATA is the model's exact text (never normalised). `render_tool_calls`
writes as CDATA every value this would change, so rendering and parsing still round-trip exactly.
"""

from __future__ import annotations

import re

__all__ = ["normalise_value"]

_FENCE_OPEN = re.compile(r"(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[ \t]*")
_BLOCK_START = re.compile(r"[ \t]*\r?\n")


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _common_indent(lines: list[str]) -> str:
    """The longest run of leading spaces and tabs every non-blank line starts with."""
    indents = [_indent_of(line) for line in lines if line.strip()]
    if not indents:
        return ""
    common = indents[0]
    for indent in indents[1:]:
        while not indent.startswith(common):
            common = common[:-1]
    return common


def _dedent_block(value: str) -> tuple[str, str | None]:
    """A block body without its first line break, common indentation and closing tag's line."""
    start = _BLOCK_START.match(value)
    if start is None:
        return value, None
    lines = value[start.end() :].split("\n")
    if len(lines) > 1 and not lines[-1].strip():
        lines[-1] = ""  # the closing tag's line: its indentation is the tag's, not the content's
    indent = _common_indent(lines)
    body = "\n".join(line[len(indent) :] if line.strip() else line.strip(" \t") for line in lines)
    note = "the line break after the opening tag"
    if indent:
        note += f" and {_describe(indent)} of indentation common to every line"
    return body, f"removed {note}"


def _describe(indent: str) -> str:
    spaces, tabs = indent.count(" "), indent.count("\t")
    parts = [f"{spaces} space{'s' if spaces != 1 else ''}"] if spaces else []
    parts += [f"{tabs} tab{'s' if tabs != 1 else ''}"] if tabs else []
    return " and ".join(parts)


def _unfence(value: str) -> tuple[str, str | None]:
    """The content of a value that is exactly one fenced block, spaces aside; else the value."""
    lines = value.strip("\r\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) < 2:
        return value, None
    opening = _FENCE_OPEN.fullmatch(lines[0].rstrip("\r"))
    if opening is None:
        return value, None
    fence = opening["fence"]
    closing = re.compile(rf"[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*\r?")
    if closing.fullmatch(lines[-1]) is None:
        if any(closing.fullmatch(line) for line in lines[1:]):
            return value, None  # a block closed before the end: text follows it
        # Opened and never closed: the value was cut (at the token limit) inside the model's block.
        body = "\n".join(lines[1:]) + "\n"
        return body, f"removed the opening {fence}{opening['info']} line of a fence never closed"
    inner = lines[1:-1]
    if any(closing.fullmatch(line) for line in inner):
        return value, None  # two blocks, or a block and text: not one fenced block
    # The fence's own indentation (of its closing line, which a model puts where the block sits) is
    # not the content's: CommonMark strips it from every content line that has it.
    indent = min(_indent_of(lines[-1]), _common_indent(inner), key=len)
    content = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in inner)
    note = f"unwrapped the enclosing {fence}{opening['info']} fence"
    if indent:
        note += f" and removed its {_describe(indent)} of indentation"
    return content + "\n" if inner else "", note


_MARKUP_OPEN = re.compile(r"[ \t]*(<pre>[ \t]*<code>|<code>|<pre>)[ \t]*\r?")
_MARKUP_CLOSE = re.compile(r"[ \t]*(</code>[ \t]*</pre>|</code>|</pre>)[ \t]*\r?")


def _unmark(value: str) -> tuple[str, str | None]:
    """A value whose first line is only an HTML `<code>` or `<pre>` tag (and whose last line, if any, is
    only its closing tag): the code inside. A grammar-bound value cannot hold `</`, so the model that
    opens `<code>` there never closes it."""
    lines = value.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return value, None
    opening = _MARKUP_OPEN.fullmatch(lines[first])
    if opening is None:
        return value, None
    rest = lines[first + 1 :]
    last = next((i for i in range(len(rest) - 1, -1, -1) if rest[i].strip()), None)
    if last is not None and _MARKUP_CLOSE.fullmatch(rest[last]):
        rest = rest[:last] + rest[last + 1 :]
    if any("</code>" in line or "</pre>" in line or "<code>" in line for line in rest):
        return value, None  # markup inside: an HTML file, not a wrapped one
    return "\n".join(rest).lstrip("\n"), f"removed the enclosing {opening.group(1)} tag"


def normalise_value(value: str) -> tuple[str, str | None]:
    """`value` as the model meant it, and what was changed (None: nothing).

    The value is a parameter's raw body (not CDATA). See the module docstring for the rules.
    """
    notes = []
    body, nesting = _dedent_block(value)
    if nesting is not None:
        notes.append(nesting)
    body, fence = _unfence(body)
    if fence is not None:
        notes.insert(0, fence)
    body, markup = _unmark(body)
    if markup is not None:
        notes.insert(0, markup)
    if body == value:
        return value, None
    return body, "; ".join(notes)
