"""A request sent again word for word, with no file changed since: its results say so.

A small model at temperature 0 can loop: in a revise cycle the 1.5B Evaluator sent `read_file` and
`run_pytest` four times over, unchanged files and all, until the turn cap ended the run. Its calls are
still run (a role may have reasons, and results are evidence); the note only tells it that nothing new
can come of the same request, in words that name no tool, so every role can read them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pse._tool_record import ToolCallRecord

__all__ = ["REPEAT_NOTE", "Repeats"]

REPEAT_NOTE = (
    "note: you sent this same request before in this cycle, and no file has changed since: these are its "
    "results again. Act on them: make a call you have not made yet, or send your final message."
)

_Signature = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


class Repeats:
    """Which requests each role (and step) sent this cycle, and whether a call that may write ran since."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str | None], dict[_Signature, int]] = {}
        self._writes = 0

    def new_cycle(self) -> None:
        """Forget the requests: a new cycle starts afresh."""
        self._seen.clear()

    def wrote(self) -> None:
        """A call that may change files ran (any role's): a request sent before may now answer otherwise."""
        self._writes += 1

    def note(self, requester: str, step: str | None, records: Sequence[ToolCallRecord]) -> str | None:
        """`REPEAT_NOTE` if `requester` sent exactly these calls before in this cycle (in any order of
        arguments, the same order of calls) and nothing may have written since; else None."""
        signature = tuple((r.tool, tuple(sorted(r.arguments.items()))) for r in records)
        if not signature:
            return None
        seen = self._seen.setdefault((requester, step), {})
        again = seen.get(signature) == self._writes
        seen[signature] = self._writes
        return REPEAT_NOTE if again else None
