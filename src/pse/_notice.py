"""One line for a person before a slow step ("loading the embedding model (first use, ~9 s)…").

A library prints nothing by itself: the code that does the slow step calls `notice`, and whoever talks
to the person (the CLI: a dim line on stderr, above the live view) sets where the line goes. A leaf
module, so setting the sink loads nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["notice", "set_notice_sink"]

_sink: Callable[[str], None] | None = None


def set_notice_sink(sink: Callable[[str], None] | None) -> None:
    """Where notices go from now on (None: nowhere, the default)."""
    global _sink
    _sink = sink


def notice(text: str) -> None:
    """Tell the person `text`, if someone listens."""
    if _sink is not None:
        _sink(text)
