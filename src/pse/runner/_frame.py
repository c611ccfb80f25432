"""The narrow frame every builder of a run reads: its settings, task, folders, crew, events, resumed trace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pse.config import ModelSpec, Settings
from pse.engine import CycleRecord, RunEvents, Trace, interrupted_cycle
from pse.roles import CrewSpec
from pse.tasks import Task

__all__ = ["RunFrame"]


@dataclass(frozen=True)
class RunFrame:
    """What the run's builders share, and nothing they make.

    Attributes:
        task: the task the run delivers.
        settings: the run's settings, with the task's and the caller's limit overrides applied.
        run_dir: the run's folder.
        workspace: where the roles' files are.
        events: the run's event sink.
        trace: the trace a resumed run goes on from (None: a new run).
        again: the cycle a resumed run stopped inside (while a call waited for a person), run again
            with every turn and tool call it recorded answered from the trace; taken before the engine
            starts (it takes that cycle off the trace).
    """

    task: Task
    settings: Settings
    run_dir: Path
    workspace: Path
    events: RunEvents
    trace: Trace | None
    again: CycleRecord | None

    @classmethod
    def of(
        cls,
        task: Task,
        settings: Settings,
        run_dir: Path,
        workspace: Path,
        events: RunEvents,
        trace: Trace | None,
    ) -> RunFrame:
        """The frame of a run, its interrupted cycle found in `trace`."""
        again = interrupted_cycle(trace) if trace is not None else None
        return cls(task, settings, run_dir, workspace, events, trace, again)

    @property
    def crew(self) -> CrewSpec:
        """Who speaks: the crew PSE_TEAM selects (the three roles, or the evaluation baseline's Agent)."""
        return self.settings.crew

    @property
    def speakers(self) -> tuple[str, ...]:
        """The crew's roles, in the order they speak."""
        return self.crew.speakers

    def spec(self, role: str) -> ModelSpec:
        """`role`'s model: its provider, model name, endpoint."""
        return self.settings.model_spec(role)
