"""Whole-file blocks: a file written as its path on a line and its whole content in a Markdown fence.

A role whose write format is `fenced` (`PSE_WRITE_FORMAT`) writes a file the way a model shows code in
a chat, Aider's `whole` format::

    PATH
    ```
    CONTENT
    ```

Small models write code best so: inside a `write_file` value, Qwen2.5-Coder-1.5B closed the value right
after copying a docstring (nine prompt variants), while asked in a chat it wrote the body at once.
`files_as_calls` turns each block, in place, into a `<tool_calls>` block of one `write_file` invoke
before anyone else reads the message, so the ToolAgent parses, decides, audits and budgets it exactly as
a DSML write, under the same policy; `calls_as_files` is the way back, for the role's own earlier turns
in its next request. Both are pure and deterministic (a replayed run sends the same requests).

Reading rules:

* **The path.** The line before the fence holds only a relative path with a `.` or `/` in it (so a
  word such as `Output:` is not one), optionally in backticks or bold, after `#` marks or `File:`, and
  ending in `:`; or, with no such line, the fence's info word is the path (```` ```solution.py ````).
* **The fence.** Three or more backticks or tildes and an optional info word open it. The content ends
  at the first line, at the opening fence's own indentation, of only that fence character, at least as
  many. Inside, a fence line with an info word opens a nested block (a Markdown file's own example) that
  such a bare line closes first.
* **The content** is the lines between, less the fence's indentation, ending with one line break (an
  empty block is an empty file).
* **A block never closed** (the message ended inside it: the token limit) becomes a `write_file` that
  fails and says why; nothing of it is written.
* Text inside a `<tool_calls>` or `<tool_results>` block is never read for file blocks (a DSML value may
  hold a fence of its own).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pse.protocol._budget import GrammarSizes
from pse.protocol._dsml import request_blocks
from pse.protocol._dsml_render import render_invoke, render_tool_calls
from pse.protocol._gbnf import chunked, literal
from pse.tool_names import Tool

__all__ = [
    "FILE_TOOL",
    "FileBlock",
    "block_path",
    "calls_as_files",
    "file_block",
    "file_rules",
    "files_as_calls",
    "find_file_blocks",
]

FILE_TOOL = Tool.WRITE_FILE
"""The tool a file block stands for: `write_file(path, content)`."""

_PATH = r"(?:\./)?[\w@][\w@./+-]*|\.[\w@][\w@./+-]*"
_PATH_LINE = re.compile(
    r"[ \t]*(?:#+[ \t]*)?(?:(?:file|path|filename)[ \t]*:[ \t]*)?"
    rf"(?P<mark>\*\*|__|`)?(?P<path>{_PATH})(?P=mark)?[ \t]*:?[ \t]*",
    re.IGNORECASE,
)
_FENCE = re.compile(r"(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[ \t]*")
_SKIPPED = re.compile(r"<(tool_calls|tool_results)(?=[\s>/])")
_LANGUAGES = {
    "py": "python",
    "md": "markdown",
    "json": "json",
    "toml": "toml",
    "yaml": "yaml",
    "yml": "yaml",
    "sh": "sh",
    "js": "javascript",
    "ts": "typescript",
    "html": "html",
    "css": "css",
    "csv": "csv",
    "sql": "sql",
}


@dataclass(frozen=True, slots=True)
class FileBlock:
    """One file block of a message: where it stands (`start`, `end`), its path and content, and whether
    its fence was closed (a block the message ended inside was cut)."""

    start: int
    end: int
    path: str
    content: str
    closed: bool


def _is_path(word: str) -> bool:
    return ("." in word or "/" in word) and not word.endswith(".") and "`" not in word


def find_file_blocks(text: str) -> list[FileBlock]:
    """Every file block of a message, in order (see the module docstring for the rules). One forward pass
    over its lines: a DSML block is stepped over whole, a file block from its path line to its fence."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    blocks: list[FileBlock] = []
    named_from = 0  # the first line a path line may be read from (not inside what was stepped over)
    i = 0
    while i < len(lines):
        skip = _SKIPPED.search(lines[i])
        if skip is not None:
            close = text.find(f"</{skip.group(1)}>", starts[i] + skip.end())
            if close < 0:
                break
            i = _line_of(starts, close) + 1
            named_from = i
            continue
        opening = _FENCE.fullmatch(lines[i].rstrip("\r"))
        if opening is None:
            i += 1
            continue
        named = _PATH_LINE.fullmatch(lines[i - 1].rstrip("\r")) if i > named_from else None
        if named is not None and _is_path(named["path"]):
            path, start = named["path"], starts[i - 1]
        elif _is_path(opening["info"]):
            path, start = opening["info"], starts[i]
        else:
            i = named_from = _past_block(lines, i, opening)
            continue
        end_line = _past_block(lines, i, opening)
        closed = end_line <= len(lines)
        body = lines[i + 1 : end_line - 1] if closed else lines[i + 1 :]
        indent = opening["indent"]
        content = "\n".join(
            line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in body
        )
        content = content.replace("\r\n", "\n") + ("\n" if body else "")
        end = starts[end_line - 1] + len(lines[end_line - 1]) if closed else len(text)
        blocks.append(FileBlock(start, end, path, content, closed))
        i = named_from = end_line
    return blocks


def _line_of(starts: list[int], offset: int) -> int:
    """The index of the line that holds character `offset`."""
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= offset:
            low = middle
        else:
            high = middle - 1
    return low


def _closes(line: str, opening: re.Match[str]) -> bool:
    fence = opening["fence"]
    return (
        re.fullmatch(rf"{re.escape(opening['indent'])}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*\r?", line)
        is not None
    )


def _past_block(lines: list[str], opened: int, opening: re.Match[str]) -> int:
    """The index of the line after the block opened at line `opened` (past the end when never closed)."""
    fence, indent = opening["fence"], opening["indent"]
    nested = re.compile(rf"{re.escape(indent)}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*[^`\s]+[ \t]*\r?")
    depth = 0
    for j in range(opened + 1, len(lines)):
        if _closes(lines[j], opening):
            if depth == 0:
                return j + 1
            depth -= 1
        elif nested.fullmatch(lines[j]):
            depth += 1
    return len(lines) + 1


def _unclosed(path: str) -> str:
    why = (
        f"the file block of {path} was never closed: the message ended inside it (at the token limit?), "
        "so nothing was written. Write the file again whole, and close its fence"
    )
    return "\n".join(["<tool_calls>", render_invoke(FILE_TOOL, {"path": path}, error=why), "</tool_calls>"])


def files_as_calls(text: str) -> str:
    """`text` with each file block replaced, in place, by a `<tool_calls>` block of one `write_file`
    invoke (a cut block by an invoke that fails saying so); text without a block is returned as it is."""
    blocks = find_file_blocks(text)
    if not blocks:
        return text
    out, pos = [], 0
    for block in blocks:
        out.append(text[pos : block.start])
        call = render_tool_calls([(FILE_TOOL, {"path": block.path, "content": block.content})])
        out.append(call if block.closed else _unclosed(block.path))
        pos = block.end
    out.append(text[pos:])
    return "".join(out)


def _fence_for(content: str) -> str:
    longest = max((len(m.group(0)) for m in re.finditer(r"^[ \t]*(`{3,})", content, re.M)), default=2)
    return "`" * max(3, longest + 1)


def file_block(path: str, content: str) -> str:
    """`content` as a file block of `path`: the path, then the content in a fence it cannot close."""
    fence = _fence_for(content)
    language = _LANGUAGES.get(path.rsplit(".", 1)[-1].lower(), "text") if "." in path else "text"
    body = content if not content or content.endswith("\n") else content + "\n"
    return f"{path}\n{fence}{language}\n{body}{fence}"


def calls_as_files(text: str, *, withheld: str | None = None) -> str:
    """`text` with each `write_file` invoke of its `<tool_calls>` blocks shown as a file block, in order;
    other invokes stay DSML (consecutive ones in one block). Text whose blocks do not parse is returned
    as it is.

    A write whose content is `withheld` (PSE hid a broken file from its author) is not shown at all: the
    answer to it names the path and says why. A small model copies what it is shown: a line standing in
    for the write ("what you wrote is not shown here") opened 5 of the 1.5B model's later messages in 3
    held-out runs, once as "Please provide the content of test_csvmean.py so that I can help you fix it"
    (heldout-15); a block, its broken bytes. A message of nothing but such a write is shown empty."""
    blocks = request_blocks(text)
    if not blocks:
        return text
    out, pos = [], 0
    for start, end, invokes in blocks:
        out.append(text[pos:start])
        shown = _as_files(invokes, withheld)
        out.append(shown)
        pos = end if shown else len(text) - len(text[end:].lstrip())  # nothing shown: nor the gap after
    out.append(text[pos:])
    return "".join(out) if withheld is None or withheld not in text else "".join(out).strip()


def _as_files(invokes: Sequence[tuple[str, list[tuple[str, str]], str | None]], withheld: str | None) -> str:
    parts: list[str] = []
    pending: list[tuple[str, dict[str, str]]] = []
    for name, params, error in invokes:
        arguments = dict(params)
        whole = (
            name == FILE_TOOL and error is None and len(params) == 2 and set(arguments) == {"path", "content"}
        )
        if not whole:
            pending.append((name, arguments))
            continue
        if pending:
            parts.append(render_tool_calls(pending))
            pending = []
        path, content = arguments["path"], arguments["content"]
        if withheld is None or content != withheld:
            parts.append(file_block(path, content))
    if pending:
        parts.append(render_tool_calls(pending))
    return "\n\n".join(parts)


# --- the grammar of file blocks --------------------------------------------------------------------

_BODY_PIECES = (
    ("[^\\n]", 1),
    ('"\\n" [^`\\n]', 2),
    ('"\\n`" [^`\\n]', 3),
    ('"\\n``" [^`\\n]', 4),
    ('"\\n\\n" [^`\\n]', 3),
    ('"\\n\\n`" [^`\\n]', 4),
    ('"\\n\\n``" [^`\\n]', 5),
    ('"\\n\\n\\n" [^`\\n]', 4),
    ('"\\n\\n\\n`" [^`\\n]', 5),
    ('"\\n\\n\\n``" [^`\\n]', 6),
)
"""A file's content in pieces that never put three backticks at the start of a line (the fence that
ends the block): a line break always comes with the first character of its line (up to two blank lines
between two lines), counted in characters by `chunked`."""


def block_path(path: str) -> str:
    """`path` as a file block's path line writes it: one with no `.` or `/` (`Makefile`) gets `./`,
    so the line reads as a path."""
    return path if _is_path(path) else f"./{path}"


def _path_rules(sizes: GrammarSizes, paths: Sequence[str] | None) -> list[str]:
    """`file-path`: one of `paths` (a folder, ending in `/`: any file under it), else any relative path
    with an extension, of at most `2 * sizes.path + 10` characters."""
    units = f'[A-Za-z0-9_@./+-]{{0,{2 * sizes.path}}} "." [A-Za-z0-9]{{1,8}}'
    if not paths:
        return [f"file-path ::= [A-Za-z0-9_@] {units}"]
    choices = [
        f"{literal(path)} {units}" if path.endswith("/") else literal(block_path(path)) for path in paths
    ]
    return [f"file-path ::= {' | '.join(choices)}"]


def file_rules(
    sizes: GrammarSizes, then_calls: bool, paths: Sequence[str] | None = None, *, must_call: bool = False
) -> list[str]:
    """`files`: a file block, then up to `sizes.invokes - 1` more items, each a file block or, last, a
    `<tool_calls>` block of the role's other tools (rule `invoke`, from `call_rules`) with as many invokes
    as items are left: a message holds at most `sizes.invokes` writes and calls, as `fit_sizes` counted.
    Each file's content is at most `sizes.value` characters (unbounded: any text with no line that starts
    with a fence).

    The fence opens with an info word (the language, which the reader drops), never bare: offered a bare
    fence, the 1.5B model wrote its language as the file's first line. Each block starts on a line of
    its own (the prose before it ends with a line break: `_grammar`) and what follows starts on the line
    after its closing fence (so the parser reads the path as a line and the fence as closed); a path has
    an extension (so the parser reads it as a path) and at most `2 * sizes.path + 10` characters; with
    `paths`, it is one of them (`_path_rules`). With `must_call` (and room for it), the message ends with
    the `<tool_calls>` block: an Evaluator writes its tests and runs them in one turn.
    """
    must_call = must_call and then_calls and sizes.invokes > 1
    items = sizes.invokes
    rules = [
        f"files ::= file-block files-{items - 1}",
        *([] if must_call else ['files-0 ::= ""']),
        f'file-block ::= file-path {literal(chr(10) + "```")} file-language "\\n" ( file-first file-body )? '
        f"{literal(chr(10) + '```')}",
        *_path_rules(sizes, paths),
        # An info word always: offered a bare fence, the 1.5B model wrote the language on the next line,
        # inside the file (`python` as roman.py's first line, a NameError; held-out roman and its tests).
        "file-language ::= [a-z0-9+#-]{1,16}",
        'file-first ::= [^`\\n] | "`" [^`\\n] | "``" [^`\\n]',
    ]
    for left in range(1, items):
        then = f' | "\\n" ws calls-after-{left}' if then_calls else ""
        block = f'"\\n" ws file-block files-{left - 1}' if not (must_call and left == 1) else ""
        either = " | ".join(filter(None, [block, then.removeprefix(" | ")]))
        rules.append(f"files-{left} ::= {either}" if must_call else f"files-{left} ::= ( {either} )?")
        if then_calls:
            more = f" ( invoke ws ){{0,{left - 1}}}" if left > 1 else ""
            opening, closing = literal("<tool_calls>"), literal("</tool_calls>")
            rules.append(f"calls-after-{left} ::= {opening} ws invoke ws{more} {closing}")
    if sizes.value is None:
        return [*rules, 'file-body ::= ( [^\\n] | "\\n" file-first )*']
    return [*rules, *chunked("file-body", _BODY_PIECES, sizes.value)]
