"""What a replayed run reads back: its recorded tool runs, and the positions to save."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pse.exceptions import CassetteError, UserError
from pse.models import (
    Cassette,
    CassettePlayer,
    Scrubber,
)
from pse.roles import TOOL_AGENT
from pse.tasks import (
    Task,
)
from pse.toolagent import (
    ReplayingToolRunner,
)

__all__ = ["replay_positions", "tool_replay"]


def tool_replay(
    task: Task,
    cassette: Path | None,
    player: CassettePlayer | None,
    scrubber: Scrubber,
    positions: dict[str, int] | None,
) -> ReplayingToolRunner:
    """`--replay-tools`: the runner that answers tool calls from the cassette's recorded tool runs."""
    if cassette is None:
        raise UserError(
            f"--replay-tools (PSE_REPLAY_TOOLS) answers tool calls from a recording, and task {task.name!r} "
            "has no cassette: pass --cassette FILE, a cassette recorded with --record FILE"
        )
    runs = (player.cassette if player is not None else Cassette.from_file(cassette)).tool_runs
    if not runs:
        raise CassetteError(
            f"cassette {cassette} holds no recorded tool runs, so --replay-tools (PSE_REPLAY_TOOLS) has "
            f"nothing to answer tool calls with: record one with `pse run {task.name} --record FILE` "
            "(a recording keeps its tool runs), or run without --replay-tools"
        )
    return ReplayingToolRunner(
        runs, source=str(cassette), position=(positions or {}).get(TOOL_AGENT, 0), scrub=scrubber.data
    )


def replay_positions(
    player: CassettePlayer | None, replay: ReplayingToolRunner | None
) -> Callable[[], dict[str, int]] | None:
    """What the trace saves to resume a replay: model turns per role, and tool runs (as the ToolAgent's)."""
    if player is None and replay is None:
        return None

    def positions() -> dict[str, int]:
        found = player.positions if player is not None else {}
        return found | ({TOOL_AGENT: replay.position} if replay is not None else {})

    return positions
