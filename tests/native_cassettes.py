"""Native versions of DSML cassette turns, generated, never copied by hand.

A DSML turn of the shape a native reply renders into (prose, at most one `<tool_calls>` block, final
elements) becomes the turn a native model would have given: its prose as `content`, each invoke and each
final element as a function call with JSON arguments. Every turn of the reference cassettes has that
shape, and `test_native_protocol` checks that each renders back to its DSML text byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pse.protocol import NativeCall, read_native


def native_calls(content: str) -> list[NativeCall]:
    """The function calls of a DSML turn: its tool requests, then its final elements."""
    turn = read_native(content)
    assert turn is not None, f"no native form for this turn: {content[:120]!r}"
    return [*turn.tool_calls, *turn.outputs]


def native_turn(role: str, content: str) -> dict[str, Any]:
    """The cassette turn a native model gives where a DSML model wrote `content`."""
    turn = read_native(content)
    assert turn is not None, f"no native form for this turn: {content[:120]!r}"
    calls = [*turn.tool_calls, *turn.outputs]
    if not calls:  # prose only: a model that answered in text
        return {"role": role, "content": turn.prose}
    arguments = [{"name": str(c.name), "arguments": json.loads(c.arguments)} for c in calls]
    return {"role": role, "content": turn.prose, "tool_calls": arguments}


def write_cassette(path: Path, turns: Iterable[tuple[str, str]], *, native: bool) -> Path:
    """A cassette of `(role, DSML content)` turns, converted to the native protocol when `native`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    made = [native_turn(r, c) if native else {"role": r, "content": c} for r, c in turns]
    path.write_text(json.dumps({"version": 1, "turns": made}, indent=1), encoding="utf-8")
    return path
