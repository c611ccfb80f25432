"""A run's script: the cassette that answers its scripted roles, its recorder, and what answers tool runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pse.config import Settings
from pse.engine import RunEvents
from pse.exceptions import CassetteError, UserError
from pse.models import CassettePlayer, CassetteRecorder, Scrubber
from pse.roles import ALL_ROLES, CrewSpec
from pse.runner._fit import RunFit, check_fit, recorded_on
from pse.runner._replay import tool_replay
from pse.tasks import Task
from pse.toolagent import RecordingToolRunner, ReplayingToolRunner, ToolRunner, run_tools

__all__ = ["RunScript", "open_script"]


@dataclass(frozen=True)
class RunScript:
    """What scripts and records a run.

    Attributes:
        player: answers the scripted roles' turns (None: no role is scripted).
        recorder: writes the run as a new cassette (PSE_RECORD; None: not recording).
        loaded: the cassette file the player was read from, resolved, for the run's settings (None: the
            player was given in memory, or there is none).
        replay: answers tool calls from the cassette's recorded tool runs (PSE_REPLAY_TOOLS; None: off).
        tool_runner: what runs an allowed tool call: the replay, else the sandbox; recorded when recording.
    """

    player: CassettePlayer | None
    recorder: CassetteRecorder | None
    loaded: Path | None
    replay: ReplayingToolRunner | None
    tool_runner: ToolRunner


def open_script(
    task: Task,
    settings: Settings,
    crew: CrewSpec,
    scripted: list[str],
    *,
    player: CassettePlayer | None,
    positions: dict[str, int] | None,
    events: RunEvents,
    fit: RunFit,
) -> RunScript:
    """The run's script: `player` (a cassette given in memory), else the settings' or the task's cassette
    file when a role is `scripted`; the recorder (PSE_RECORD); the tool runner.

    A cassette recorded on other inputs or another repository than `fit` is refused (`check_fit`); a
    recording notes what it is made on.

    Raises:
        UserError: a role is scripted and there is no cassette.
        CassetteError: the cassette scripts no turns for a scripted speaker, or was recorded on another run.
    """
    scrubber = Scrubber(settings.secrets())  # the recorder's rule: digests are of scrubbed text
    cassette = settings.cassette or task.cassette_path
    loaded: Path | None = None
    if player is None and scripted:  # no cassette given in memory: the settings' or the task's file
        if cassette is None:
            raise UserError(
                f"task {task.name!r} has no cassette and no model is configured: pass --cassette FILE, "
                "or configure a real model (PSE_PROVIDER, PSE_API_KEY / PSE_BASE_URL)"
            )
        player = CassettePlayer.from_file(
            Path(cassette),
            strict=settings.replay_strict,
            # the roles' streams, and a steps run's `ROLE@STEP` ones
            positions={r: p for r, p in (positions or {}).items() if r.split("@")[0] in ALL_ROLES},
            scrubber=scrubber,
            on_drift=events.drift,
        )
        player.latency_s = settings.scripted_latency_s
        loaded = Path(cassette).resolve()
        check_fit(
            player.cassette.recorded_on,
            fit,
            task=task.name,
            source=str(loaded),
            own=settings.cassette is None,
            scrubber=scrubber,
        )
    if player is not None and scripted:
        # Every cassette scripts the three roles (perhaps with no turns); another speaker only if it has some.
        unscripted = [role for role in scripted if role not in player.positions]
        if unscripted:
            role, one = unscripted[0], "the one speaker" if len(crew.speakers) == 1 else "a speaker"
            raise CassetteError(
                f"cassette {cassette} scripts no turns for {role!r}, {one} of PSE_TEAM={crew.name}: pass a "
                f"cassette with {role} turns (record one with --record FILE), or unset PSE_TEAM"
            )
    recorder = CassetteRecorder(settings.record, secrets=settings.secrets()) if settings.record else None
    if recorder is not None:
        recorder.cassette.recorded_on = recorded_on(fit, recorder.scrubber)
    replay = tool_replay(task, cassette, player, scrubber, positions) if settings.replay_tools else None
    runner: ToolRunner = replay if replay is not None else run_tools
    if recorder is not None:
        runner = RecordingToolRunner(recorder.add_tool_run, runner)
    return RunScript(player, recorder, loaded, replay, runner)
