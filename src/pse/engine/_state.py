"""The run's state machine as a transition table. An illegal transition is a bug and raises.

START ─► PLANNED ─► RUNNING ─► REVIEWING ─► PASSED
                      ▲            ├─► REVISING ─► RUNNING          (PARTIAL, ≤ max_partial_retries)
                      │            ├─► REPLANNING ─► PLANNED        (FAIL, or PARTIAL over its cap)
(any working state) ──┴─► BLOCKED ─► ESCALATED                     (blocked, or retries exhausted)
(any working state) ────► TIMEOUT | ERROR                          (turn/time/token budget; infrastructure)
ESCALATED ─► REVISING | REPLANNING | ACCEPTED_BY_HUMAN              (a person answered: `pse answer`)
START | REPLANNING ─► AWAITING_ANSWER ─► PLANNED                  (the Planner asked; `pse answer --text`)
(a role's phase) ─► AWAITING_APPROVAL ─► (the same state)         (a tool call is held; `pse approve`)
RUNNING ─► REPLANNING | ESCALATED                                  (execution = steps: a step failed)

Each step of a steps plan moves through the same table on its own (`StepStates`), inside the run's
RUNNING: PLANNED ─► RUNNING ─► REVIEWING ─► PASSED | REVISING ─► RUNNING (a PARTIAL with a retry left) |
BLOCKED | REPLANNING (the step ends the cycle: the run re-plans or escalates); a step cut short before
its review goes RUNNING ─► BLOCKED | REPLANNING. `_retries.after_step_attempt` decides each move.

The terminal states are where the engine stops. ESCALATED is one, though a person may take the run on
from it: only `pse answer` makes those moves, never the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum

from pse.events import Event, TransitionEvent, TransitionRecord
from pse.exceptions import IllegalTransition

__all__ = [
    "OUTCOME_OF",
    "TERMINAL",
    "IllegalTransition",
    "State",
    "StateMachine",
    "StepStates",
    "check_transition",
]


class State(StrEnum):
    """Where a run is."""

    START = "START"
    PLANNED = "PLANNED"
    RUNNING = "RUNNING"
    REVIEWING = "REVIEWING"
    REVISING = "REVISING"
    REPLANNING = "REPLANNING"
    BLOCKED = "BLOCKED"
    PASSED = "PASSED"
    ESCALATED = "ESCALATED"
    ACCEPTED_BY_HUMAN = "ACCEPTED_BY_HUMAN"
    AWAITING_ANSWER = "AWAITING_ANSWER"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"


_STOPS = {State.TIMEOUT, State.ERROR}
_HOLDS = {State.AWAITING_APPROVAL}
# The states a role works in, so where a held tool call may pause the run and where it goes back to.
_PHASES = frozenset({State.START, State.REPLANNING, State.AWAITING_ANSWER, State.RUNNING, State.REVIEWING})
TRANSITIONS: dict[State, frozenset[State]] = {
    State.START: frozenset({State.PLANNED, State.BLOCKED, State.AWAITING_ANSWER, *_HOLDS, *_STOPS}),
    State.PLANNED: frozenset({State.RUNNING, *_STOPS}),
    # A step of a steps plan failed, or went over its retries: re-plan it, or escalate.
    State.RUNNING: frozenset(
        {State.REVIEWING, State.BLOCKED, State.REPLANNING, State.ESCALATED, *_HOLDS, *_STOPS}
    ),
    State.REVIEWING: frozenset(
        {State.PASSED, State.REVISING, State.REPLANNING, State.BLOCKED, State.ESCALATED, *_HOLDS, *_STOPS}
    ),
    State.REVISING: frozenset({State.RUNNING, *_STOPS}),
    State.REPLANNING: frozenset({State.PLANNED, State.BLOCKED, State.AWAITING_ANSWER, *_HOLDS, *_STOPS}),
    # The Planner asked; a person's answer (`pse answer --text`) lets it plan (or ask again).
    State.AWAITING_ANSWER: frozenset({State.PLANNED, State.BLOCKED, State.AWAITING_ANSWER, *_HOLDS, *_STOPS}),
    # A tool call is held for a person (`pse approve`); the decision sends the run back to the phase.
    State.AWAITING_APPROVAL: frozenset({*_PHASES, *_STOPS}),
    State.BLOCKED: frozenset({State.ESCALATED}),
    State.PASSED: frozenset(),
    State.ESCALATED: frozenset({State.REVISING, State.REPLANNING, State.ACCEPTED_BY_HUMAN}),
    State.ACCEPTED_BY_HUMAN: frozenset(),
    State.TIMEOUT: frozenset(),
    State.ERROR: frozenset(),
}
TERMINAL = frozenset({State.PASSED, State.ESCALATED, State.ACCEPTED_BY_HUMAN, State.TIMEOUT, State.ERROR})
"""Where the engine stops (ESCALATED included: only a person's answer moves a run on from it)."""
OUTCOME_OF = {
    State.PASSED: "PASSED",
    State.ESCALATED: "ESCALATED",
    State.ACCEPTED_BY_HUMAN: "ACCEPTED_BY_HUMAN",
    State.TIMEOUT: "TIMEOUT",
    State.ERROR: "ERROR",
}


def check_transition(current: State, target: State) -> None:
    """Raise IllegalTransition unless `current → target` is in the table."""
    if target not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "nothing (terminal)"
        raise IllegalTransition(
            f"illegal transition {current} → {target}; from {current} the table allows {allowed}"
        )


class StateMachine:
    """A run's state, moved only through the table; every move is recorded and announced.

    Args:
        run_id: for the announced events.
        transitions: the trace's transition list (moves are appended to it).
        state: where the run is (a resumed run goes on from its trace's state).
        emit: receives a `TransitionEvent` for every move.
    """

    def __init__(
        self, run_id: str, transitions: list[TransitionRecord], state: State, emit: Callable[[Event], None]
    ) -> None:
        self.run_id = run_id
        self.transitions = transitions
        self.state = state
        self._emit = emit

    def move(self, target: State, reason: str, *, check: bool = True) -> TransitionRecord:
        """Go to `target`; raises IllegalTransition unless the table allows it (or `check` is False: a
        bug of ours is being recorded as ERROR, whatever state the run was in)."""
        if check:
            check_transition(self.state, target)
        record = TransitionRecord(**{"from": self.state.value, "to": target.value, "reason": reason})
        self.transitions.append(record)
        self.state = target
        self._emit(TransitionEvent(run_id=self.run_id, at=record.at, transition=record))
        return record

    def enter(self, target: State, reason: str) -> None:
        """Move to `target` unless the run is there already (a phase that starts twice moves once)."""
        if self.state != target:
            self.move(target, reason)

    @property
    def terminal(self) -> bool:
        """The run has an outcome."""
        return self.state in TERMINAL


class StepStates:
    """Where each step of a steps plan is, moved only through the run's table; nothing is recorded (a
    step's attempts are the trace's record of it).

    Args:
        steps: the plan's steps; each starts PLANNED.
        passed: steps an earlier cycle passed and the plan keeps; they start PASSED, and never move.
    """

    def __init__(self, steps: Iterable[str], passed: Iterable[str]) -> None:
        self._states = {step: State.PLANNED for step in steps} | {step: State.PASSED for step in passed}

    def __getitem__(self, step: str) -> State:
        return self._states[step]

    def move(self, step: str, target: State) -> None:
        """Move `step` to `target`; raises IllegalTransition, naming the step, unless the table allows it."""
        try:
            check_transition(self._states[step], target)
        except IllegalTransition as exc:
            raise IllegalTransition(f"step {step}: {exc}") from None
        self._states[step] = target

    def passed(self) -> set[str]:
        """The steps that passed (in this cycle or an earlier one)."""
        return {step for step, state in self._states.items() if state == State.PASSED}
