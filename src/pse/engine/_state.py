"""The run's state machine as a transition table. An illegal transition is a bug and raises.

START ─► PLANNED ─► RUNNING ─► REVIEWING ─► PASSED
                      ▲            ├─► REVISING ─► RUNNING          (PARTIAL, ≤ max_partial_retries)
                      │            ├─► REPLANNING ─► PLANNED        (FAIL, or PARTIAL over its cap)
(any working state) ──┴─► BLOCKED ─► ESCALATED                     (blocked, or retries exhausted)
(any working state) ────► TIMEOUT | ERROR                          (turn/time/token budget; infrastructure)
"""

from __future__ import annotations

from enum import StrEnum

from pse.exceptions import IllegalTransition

__all__ = ["OUTCOME_OF", "TERMINAL", "IllegalTransition", "State", "check_transition"]


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
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"


_STOPS = {State.TIMEOUT, State.ERROR}
TRANSITIONS: dict[State, frozenset[State]] = {
    State.START: frozenset({State.PLANNED, State.BLOCKED, *_STOPS}),
    State.PLANNED: frozenset({State.RUNNING, *_STOPS}),
    State.RUNNING: frozenset({State.REVIEWING, State.BLOCKED, *_STOPS}),
    State.REVIEWING: frozenset(
        {State.PASSED, State.REVISING, State.REPLANNING, State.BLOCKED, State.ESCALATED, *_STOPS}
    ),
    State.REVISING: frozenset({State.RUNNING, *_STOPS}),
    State.REPLANNING: frozenset({State.PLANNED, State.BLOCKED, *_STOPS}),
    State.BLOCKED: frozenset({State.ESCALATED}),
    State.PASSED: frozenset(),
    State.ESCALATED: frozenset(),
    State.TIMEOUT: frozenset(),
    State.ERROR: frozenset(),
}
TERMINAL = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
OUTCOME_OF = {
    State.PASSED: "PASSED",
    State.ESCALATED: "ESCALATED",
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
