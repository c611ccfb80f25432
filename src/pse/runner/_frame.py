"""The narrow frame every builder of a run reads: its settings, task, folders, crew, events, and (a resumed
run) where it goes on from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pse.config import ModelSpec, Settings
from pse.engine import CycleRecord, Resume, RunEvents, Trace
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
        resume: where a resumed run goes on from (None: a new run): the one source of what its builders
            take from the run so far.
    """

    task: Task
    settings: Settings
    run_dir: Path
    workspace: Path
    events: RunEvents
    resume: Resume | None = None

    @property
    def trace(self) -> Trace | None:
        """The trace a resumed run goes on from (None: a new run)."""
        return self.resume.trace if self.resume is not None else None

    @property
    def again(self) -> CycleRecord | None:
        """The cycle a resumed run stopped inside, run again with its turns and tool calls answered from
        its record (None: none)."""
        return self.resume.again if self.resume is not None else None

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
