"""Terminal control sequences out of text a model or a tool wrote: the one filter every printer uses.

Everything the CLI prints from a model, a tool or a trace file (which a tool could have written) goes
through `strip_control` first, and so do the dashboard's live lines: a model cannot clear the screen,
move the cursor or colour a fake "every hard gate passed".
"""

from __future__ import annotations

import re

__all__ = ["strip_control"]

_CONTROL = re.compile(
    r"""
      \x1b\[ [0-?]* [ -/]* [@-~]            # CSI: cursor moves, erase, colours
    | \x1b\] [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)  # OSC: window title, hyperlinks, clipboard
    | \x1b[PX^_] [^\x1b\x9c]* (?:\x1b\\|\x9c)    # DCS, SOS, PM, APC strings
    | \x1b [ -/]* [0-~]                     # other escapes (ESC c resets the terminal)
    | \x9b [0-?]* [ -/]* [@-~]              # 8-bit CSI
    | \x9d [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)   # 8-bit OSC
    | [\x90\x98\x9e\x9f] [^\x1b\x9c]* (?:\x1b\\|\x9c)  # 8-bit DCS, SOS, PM, APC
    | [\x00-\x08\x0b-\x1f\x7f-\x9f]           # what is left: C0 but tab and newline, DEL, C1, lone ESC
    """,
    re.VERBOSE,
)


def strip_control(text: str) -> str:
    """`text` without terminal control sequences, safe to print: what models and tools wrote.

    Removes CSI, OSC, DCS/SOS/PM/APC sequences (7- and 8-bit), other escape sequences, a lone ESC,
    every C0 control but newline and tab (so also carriage return and backspace, which overwrite
    what was printed), DEL and the C1 controls. An unterminated string sequence loses only its
    introducer; the text after it stays visible.
    """
    return _CONTROL.sub("", text)
