"""A step's moves go through the run's state table, and its retries are decided by the cycles' rule."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pse.config import load_settings
from pse.engine import IllegalTransition, LoopLimits, State, _retries
from pse.engine._retries import after_review, after_step, retry_left
from pse.engine._state import StepStates
from pse.events import GateRecord, StepAttemptRecord
from pse.roles import CREWS
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from pse.trace import CycleRecord, Trace

LIMITS = LoopLimits(
    run_timeout_s=60.0, turns_per_cycle=10, format_retries=1, max_partial_retries=2, max_fail_retries=1,
    max_criterion_failures=9, step_buffer_tokens=500, token_budget=10**6, cost_budget=None, max_steps=9,
    max_step_retries=2, max_parallel_steps=2,
)  # fmt: skip


def _attempt(number: int, result: str, reason: str = "OUTPUT_FORMAT", **times: str) -> StepAttemptRecord:
    return StepAttemptRecord(step="S3", attempt=number, result=result, result_reason=reason, **times)


def after_step_attempt(
    attempt: StepAttemptRecord, cap: int, *, blocked: bool, ending: bool
) -> tuple[State, str]:
    """The step's move after `attempt` (without the counters a cycle's move may carry)."""
    move = after_step(attempt.step, attempt.attempt, attempt.result, attempt.result_reason, cap,
                      blocked=blocked, ending=ending)  # fmt: skip
    assert move.counters is None
    return move.state, move.reason


# ---- the table ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ((), State.PASSED),  # a step never passes before it ran
        ((State.RUNNING,), State.PASSED),  # nor without its review
        ((State.RUNNING,), State.REVISING),  # a retry follows a review
        ((State.RUNNING, State.REVIEWING, State.PASSED), State.RUNNING),  # a passed step runs no more
        ((State.RUNNING, State.REVIEWING, State.REPLANNING), State.RUNNING),  # a failed one ends the cycle
        ((State.RUNNING, State.BLOCKED), State.RUNNING),  # a blocked one waits for a person
        ((State.RUNNING, State.REVIEWING, State.REVISING), State.REVIEWING),  # a retry runs first
    ],
)
def test_an_illegal_step_move_raises_and_names_the_step(path: tuple[State, ...], illegal: State) -> None:
    states = StepStates(["S1", "S3"], passed=[])
    for target in path:
        states.move("S3", target)
    before = states["S3"]
    with pytest.raises(IllegalTransition, match=f"^step S3: illegal transition {before} → {illegal}"):
        states.move("S3", illegal)
    assert states["S3"] == before and states["S1"] == State.PLANNED  # nothing moved


def test_a_step_kept_from_an_earlier_cycle_is_passed_and_cannot_run_again() -> None:
    states = StepStates(["S1", "S2"], passed=["S1"])
    assert (states["S1"], states["S2"], states.passed()) == (State.PASSED, State.PLANNED, {"S1"})
    with pytest.raises(IllegalTransition, match="step S1: illegal transition PASSED → RUNNING"):
        states.move("S1", State.RUNNING)


# ---- the decision ------------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [0, 1, 2, 3])
def test_a_step_retries_exactly_its_cap_of_partials_then_ends_the_cycle(cap: int) -> None:
    moves = [
        after_step_attempt(_attempt(n, "PARTIAL"), cap, blocked=False, ending=False) for n in (1, 2, 3, 4)
    ]
    assert [m[0] for m in moves] == [State.REVISING] * cap + [State.REPLANNING] * (4 - cap)
    assert (
        moves[cap][1] == f"STEP_FAILED: step S3 over its {cap} retries (PSE_MAX_STEP_RETRIES) (OUTPUT_FORMAT)"
    )
    if cap:
        assert moves[0][1] == f"PARTIAL (OUTPUT_FORMAT); step S3 retry 1 of {cap}"


def test_the_retry_limit_counts_attempts_never_the_clock() -> None:
    early = _attempt(2, "PARTIAL", started_at="2020-01-01T00:00:00Z", ended_at="2020-01-01T00:00:01Z")
    late = _attempt(2, "PARTIAL", started_at="2020-01-01T00:00:00Z", ended_at="2031-12-31T23:59:59Z")
    assert after_step_attempt(early, 1, blocked=False, ending=False) == after_step_attempt(
        late, 1, blocked=False, ending=False
    )
    assert after_step_attempt(early, 1, blocked=False, ending=False)[0] == State.REPLANNING
    assert after_step_attempt(early, 2, blocked=False, ending=False)[0] == State.REVISING


@pytest.mark.parametrize(
    ("result", "blocked", "ending", "target", "reason"),
    [
        ("PASS", False, False, State.PASSED, "step S3 passed (R)"),
        ("BLOCKED", True, False, State.BLOCKED, "step S3 blocked (R)"),
        ("BLOCKED", False, False, State.REPLANNING, "STEP_FAILED: step S3 BLOCKED (R)"),
        ("FAIL", False, False, State.REPLANNING, "STEP_FAILED: step S3 FAIL (R)"),
        ("ERROR", False, False, State.REPLANNING, "STEP_FAILED: step S3 ERROR (R)"),
        ("PARTIAL", False, True, State.REPLANNING,
         "STEP_FAILED: step S3 PARTIAL while another step's failure ends the cycle (R)"),
    ],
)  # fmt: skip
def test_each_result_of_a_step_is_one_move(
    result: str, blocked: bool, ending: bool, target: State, reason: str
) -> None:
    assert after_step_attempt(_attempt(1, result, "R"), 5, blocked=blocked, ending=ending) == (target, reason)


def test_a_result_no_review_gives_is_a_bug_and_raises() -> None:
    with pytest.raises(ValueError, match="step S3's attempt 1 came to 'QUESTIONS'"):
        after_step_attempt(_attempt(1, "QUESTIONS"), 2, blocked=False, ending=False)


def test_cycles_and_steps_ask_the_one_retry_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[int, int]] = []

    def spent(used: int, cap: int) -> bool:
        asked.append((used, cap))
        return False

    assert retry_left(0, 1) and not retry_left(1, 1) and not retry_left(0, 0)
    monkeypatch.setattr(_retries, "retry_left", spent)
    step = after_step_attempt(_attempt(1, "PARTIAL"), 2, blocked=False, ending=False)
    assert step == (
        State.REPLANNING,
        "STEP_FAILED: step S3 over its 2 retries (PSE_MAX_STEP_RETRIES) (OUTPUT_FORMAT)",
    )
    trace = Trace(run_id="r", task="t", started_at="2026-01-01T00:00:00Z")
    cycle = CycleRecord(
        index=1, kind="initial", first_speaker="Planner", started_at=trace.started_at,
        result="PARTIAL", result_reason="X", gate=GateRecord(passed=False),
    )  # fmt: skip
    move = after_review(
        cycle.result, cycle.result_reason, gates_passed=False, trace=trace, cycles=[cycle], limits=LIMITS,
        crew=CREWS["pse"],
    )  # fmt: skip
    assert move.state == State.ESCALATED
    assert asked == [(0, 2), (0, 2), (0, 1)]  # the step's retry, the cycle's revision, its re-plan


# ---- the scheduler -----------------------------------------------------------------------------


def test_the_reference_steps_run_moves_each_step_through_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moves: list[tuple[str, State]] = []
    move = StepStates.move

    def recorded(self: StepStates, step: str, target: State) -> None:
        move(self, step, target)
        moves.append((step, target))

    monkeypatch.setattr(StepStates, "move", recorded)
    task = TaskRegistry.discover(None).get("package-steps")
    settings = load_settings(runs_dir=tmp_path / "runs", cassette=task.cassette_path, sandbox="fallback")
    summary = asyncio.run(run_to_end(prepare_run("package-steps", settings)))
    assert json.loads(Path(summary.trace).read_text())["outcome"] == "PASSED"
    run, review = State.RUNNING, State.REVIEWING
    assert [t for s, t in moves if s == "S1"] == [run, review, State.PASSED]
    assert [t for s, t in moves if s == "S2"] == [run, review, State.PASSED]
    assert [t for s, t in moves if s == "S3"] == [run, review, State.REVISING, run, review, State.PASSED]
