"""Resume: a run's state is its trace, one serializable object, and going on with a run is loading it, here.

The trace holds all a run is: its state, counters, plan, answers, approvals, cycles, cassette positions.
A run goes on from a cycle boundary. `Resume.load` reads the trace from its run folder (safely: what
tools wrote lies beside it), refuses a run that cannot go on, and cuts the trace back to the boundary:

- a **cancelled** run drops its cancelled cycle and the moves made in it, and goes on with the cassette
  positions that cycle started with; what it spent stays spent;
- a run that **stopped inside a cycle** (a tool call held for a person when the process ended) takes
  that cycle off and runs it again (`again`): each role's first turns there are answered with the turns
  it gave (`turns`), each tool call it made with its record (`replayed`), so nothing is asked twice;
- any other run (waiting for a person's answer, or taken on again by `pse answer`) goes on as it is.

Every builder of a resumed run reads what it needs from this one value: the engine its trace and the
cycle to run again, the executor the tool calls already made, the clients the turns already given,
the cassette the positions it goes on from, the policy a person's grants, the settings the recorded
ones a run must keep.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pse.config import Settings
from pse.engine._run_id import check_run_id
from pse.events import MessageRecord, ToolCallRecord
from pse.exceptions import UserError
from pse.trace import TRACE_FILE, CycleRecord, Trace, load_trace

__all__ = ["Resume"]


@dataclass(frozen=True)
class Resume:
    """Where a run goes on from.

    Attributes:
        trace: the run's state at the cycle boundary it goes on from.
        again: the cycle it stopped inside, taken off `trace`, to run again (None: none).
        run_dir: its folder.
    """

    trace: Trace
    again: CycleRecord | None = None
    run_dir: Path | None = None

    @classmethod
    def of(cls, trace: Trace, run_dir: Path | None = None) -> Resume:
        """`trace` cut back to the boundary it goes on from (see the module docstring)."""
        data = trace.model_dump(by_alias=True)
        cycles, transitions = data["cycles"], data["transitions"]
        last = cycles[-1] if cycles else None
        again: CycleRecord | None = None
        if trace.outcome is not None:  # cancelled: reopened at the boundary before its last cycle
            cycles[-1:] = []
            if last is not None:
                data["cassette_positions"] = last["positions_at_start"]
            data.update(outcome=None, outcome_reason="", ended_at=None)
            cut = _cut(transitions, last)
        elif last is not None and last["ended_at"] is None:  # stopped inside: it runs again
            again = trace.cycles[-1]
            cycles[-1:] = []
            cut = last["transitions_at_start"] or 0
        else:
            return cls(trace, None, run_dir)
        data["transitions"] = transitions[:cut]
        data["state"] = transitions[cut - 1]["to"] if cut else "START"
        return cls(Trace.model_validate(data), again, run_dir)

    @classmethod
    def load(cls, runs_dir: Path, run_id: str) -> Resume:
        """The run `run_id` of `runs_dir`, ready to go on.

        Raises:
            UserError: the id is malformed, the run does not exist, its workspace is not a real folder, or
                it already ended (only an interrupted or cancelled run goes on).
        """
        run_dir = runs_dir / check_run_id(run_id)
        missing = UserError(f"no run {run_id!r} in {runs_dir}; `pse trace list` shows the runs")
        if not (run_dir / TRACE_FILE).is_file():
            raise missing
        # The run folder was written by tools: a symlinked trace is no run, and a symlinked workspace
        # would hand the resumed tools a directory outside the run.
        try:
            trace = load_trace(run_dir, beneath=runs_dir)
        except FileNotFoundError:
            raise missing from None
        except OSError as exc:
            raise UserError(f"cannot read the trace of run {run_id!r}: {exc}") from None
        workspace = run_dir / "workspace"
        if os.path.lexists(workspace) and not stat.S_ISDIR(os.lstat(workspace).st_mode):
            raise UserError(
                f"run {run_id!r} cannot resume: its workspace is not a real directory (a symlink?)"
            )
        if trace.outcome is not None and not trace.outcome_reason.startswith("CANCELLED"):
            raise UserError(
                f"run {run_id} already ended {trace.outcome}; only interrupted or cancelled runs resume"
            )
        return cls.of(trace, run_dir)

    def settings(self, settings: Settings) -> Settings:
        """`settings` with what the run must keep of its own: the cassette it plays (unless another is
        given), the protocol its turns are in, a replay of its tool runs."""
        recorded, update = self.trace.settings, dict[str, object]()
        if recorded.get("cassette") and settings.cassette is None:
            update["cassette"] = Path(str(recorded["cassette"]))
        if recorded.get("protocol") in ("dsml", "native"):
            update["protocol"] = recorded["protocol"]
        if recorded.get("replay_tools") is True:  # its tool runs go on from where the replay stood
            update["replay_tools"] = True
        return settings.model_copy(update=update) if update else settings

    @property
    def positions(self) -> dict[str, int]:
        """Cassette turns consumed per role (and tool runs, as the ToolAgent's): where a replay goes on."""
        return dict(self.trace.cassette_positions)

    @property
    def history(self) -> list[ToolCallRecord]:
        """Every tool call of the cycles the run keeps: who wrote what, as the executor's records say."""
        return [call for cycle in self.trace.cycles for call in cycle.tool_calls]

    @property
    def replayed(self) -> list[ToolCallRecord]:
        """The tool calls of the cycle run again, answered from their records."""
        return list(self.again.tool_calls) if self.again is not None else []

    def turns(self, role: str, step: str | None = None) -> list[MessageRecord]:
        """The turns `role` gave in the cycle run again (in `step`'s stream for a steps plan)."""
        found = self.again.messages if self.again is not None else []
        return [m for m in found if m.source == role and m.step == step and not m.late]

    @property
    def grants(self) -> list[tuple[str, str, str]]:
        """A person's widenings for this run (`pse answer --grant ROLE.TOOL:MODE`): (role, tool, mode)."""
        found = []
        for answer in self.trace.answers:
            for grant in answer.grants:  # checked when the answer was given
                head, _, mode = grant.partition(":")
                role, _, tool = head.partition(".")
                found.append((role, tool, mode))
        return found


def _cut(transitions: list[dict[str, object]], cancelled: dict[str, object] | None) -> int:
    """How many transitions came before the cancelled cycle (or, cancelled before any cycle, before the
    move to the cancelled end)."""
    if cancelled is None:
        return next(
            (i for i, t in enumerate(transitions) if str(t["reason"]).startswith("CANCELLED")),
            len(transitions),
        )
    if cancelled["transitions_at_start"] is not None:
        return int(str(cancelled["transitions_at_start"]))
    # a trace from before the count was kept: by time (a fast cycle may tie at the millisecond)
    started = str(cancelled["started_at"])
    return next((i for i, t in enumerate(transitions) if str(t["at"]) >= started), len(transitions))
