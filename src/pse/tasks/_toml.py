"""Reading the TOML files of a task folder, with a syntax error said once: the line, the column, what is
wrong there in plain words, and the line itself."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pse.exceptions import ConfigError

__all__ = ["TomlSyntaxError", "read_toml"]

_AT = re.compile(
    r"^(?P<what>.*?) \(at (?:line (?P<line>\d+), column (?P<column>\d+)|end of document)\)$", re.S
)
_SHOWN_LINE = 120
"""How much of the offending line a message quotes."""

# tomllib's words for the mistakes people make most, in the words of someone fixing the file.
_PLAIN = (
    (re.compile(r"^Illegal character '\\n'$"), "the line ends inside a string: its closing quote is missing"),
    (re.compile(r"^Unterminated string$"), "a string is not closed: its closing quote is missing"),
    (re.compile(r"^Cannot (?:overwrite a value|declare .* twice)"), "a key or table is given twice"),
    (re.compile(r"^Expected '=' after a key in a key/value pair$"), "a key has no '= value' after it"),
    (re.compile(r"^Invalid value$"), 'the value is not TOML (text needs quotes: "…")'),
    (
        re.compile(r"^Expected ']' at the end of a table declaration$"),
        "a table header is not closed with ']'",
    ),
    (
        re.compile(r"^Expected ']]' at the end of an array declaration$"),
        "a [[table]] header is not closed with ']]'",
    ),
    (re.compile(r"^Unclosed array$"), "a list is not closed with ']'"),
)


class TomlSyntaxError(ConfigError):
    """A TOML file PSE reads is not valid TOML. `str()` is the whole message (the file once); the parts
    are there for a problem list that names the file itself.

    Attributes:
        path: the file.
        line: the line of the mistake (1-based; None: at the end of the file).
        column: its column (1-based; None with `line`).
        what: what is wrong there.
        text: the offending line as written ("" at the end of the file).
    """

    def __init__(self, path: Path, line: int | None, column: int | None, what: str, text: str) -> None:
        self.path, self.line, self.column, self.what, self.text = path, line, column, what, text
        super().__init__(f"{path}: {self.problem}; {self.fix}")

    @property
    def problem(self) -> str:
        """`not valid TOML at line 3, column 9: WHAT` (or `at the end of the file`)."""
        where = f"at line {self.line}, column {self.column}" if self.line else "at the end of the file"
        return f"not valid TOML {where}: {self.what}"

    @property
    def fix(self) -> str:
        """`fix line 3: THE LINE`, or how to finish the file."""
        if self.line is None:
            return "finish the file: close what its last lines open"
        return f"fix line {self.line}: {self.text}" if self.text else f"fix line {self.line}"


def _plain(what: str) -> str:
    for pattern, words in _PLAIN:
        if pattern.search(what):
            return words
    return what[:1].lower() + what[1:]


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file.

    Raises:
        TomlSyntaxError: it is not valid TOML (a `ConfigError`).
    """
    with path.open("rb") as handle:
        data = handle.read()
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TomlSyntaxError(path, None, None, f"the file is not UTF-8 text ({exc.reason})", "") from exc
    except tomllib.TOMLDecodeError as exc:
        found = _AT.match(str(exc))
        if found is None:
            raise TomlSyntaxError(path, None, None, _plain(str(exc)), "") from exc
        line = int(found["line"]) if found["line"] else None
        column = int(found["column"]) if found["column"] else None
        lines = data.decode("utf-8").splitlines()
        text = lines[line - 1].strip()[:_SHOWN_LINE] if line is not None and line <= len(lines) else ""
        raise TomlSyntaxError(path, line, column, _plain(found["what"]), text) from exc
