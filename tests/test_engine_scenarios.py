"""Scenario tests of the loop engine: scripted cassettes, the real ToolAgent, real pytest and ruff.

Every scenario runs the built-in code-delivery task and asserts on the trace: most through `pse.testing`'s
harness (turns in memory), the cancel and kill scenarios through the runner (they resume from the trace,
which finds their cassette file).
The cassettes are assembled from the turns of the task's own cassette (a buggy implementation,
its fix, the Evaluator's check runs and verdicts) plus a few hand-written turns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from autogen_core.models import SystemMessage

from pse.config import load_settings
from pse.engine import Trace, load_trace
from pse.runner import PreparedRun, prepare_resume, prepare_run, run_to_end
from pse.tasks import TaskRegistry
from pse.testing import run_task
from pse.tokens import count_tokens

CODE_DELIVERY = TaskRegistry.discover(None).get("code-delivery")
_TURNS = json.loads(CODE_DELIVERY.cassette_path.read_text())["turns"]  # type: ignore[union-attr]
PLAN, S_BAD, S_REPORT, E_CHECKS, E_PARTIAL, S_FIX, S_REPORT2, E_CHECKS2, E_PASS = (
    (t["role"], t["content"]) for t in _TURNS
)
E_RUFF_ONLY = (
    "Evaluator",
    '<tool_calls><invoke name="run_ruff"><parameter name="target">.</parameter></invoke></tool_calls>',
)
E_FAIL = (
    "Evaluator",
    '<verdict status="FAIL"><reason_code>WRONG_APPROACH</reason_code>'
    '<criterion id="AC1" met="false">duplicates lost</criterion><criterion id="AC2" met="true">ok</criterion>'
    '<criterion id="AC3" met="false">test_duplicates fails</criterion><criterion id="AC4" met="true">ok</criterion>'
    "<summary>The partitioning approach loses data.</summary></verdict>",
)
E_PASS_LIE = ("Evaluator", E_PASS[1])  # a PASS verdict, whatever the checks said


def _cassette(tmp_path: Path, turns: list[tuple[str, str]]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "cassette.json"
    path.write_text(json.dumps({"version": 1, "turns": [{"role": r, "content": c} for r, c in turns]}))
    return path


async def _run(tmp_path: Path, turns: list[tuple[str, str]], **settings: Any) -> tuple[Trace, PreparedRun]:
    _, trace, prepared = await run_task(CODE_DELIVERY, turns=turns, runs_dir=tmp_path / "runs", **settings)
    return trace, prepared


def _plan_criteria() -> int:
    return PLAN[1].count("<criterion ")


async def test_pass_in_one_cycle(tmp_path: Path) -> None:
    trace, _ = await _run(tmp_path, [PLAN, S_BAD, S_FIX, S_REPORT2, E_CHECKS2, E_PASS])
    assert trace.outcome == "PASSED"
    assert [c.kind for c in trace.cycles] == ["initial"]
    assert [t.to for t in trace.transitions] == ["PLANNED", "RUNNING", "REVIEWING", "PASSED"]
    assert trace.cycles[0].gate.passed and trace.cycles[0].gate.failures == []
    assert {c.tool for c in trace.cycles[0].tool_calls} == {"write_file", "run_pytest", "run_ruff"}


async def test_partial_then_pass_revises_from_the_specialist(tmp_path: Path) -> None:
    trace, prepared = await _run(tmp_path, [t for t in ((t["role"], t["content"]) for t in _TURNS)])
    assert trace.outcome == "PASSED"
    assert [c.kind for c in trace.cycles] == ["initial", "revise"]
    assert [c.result for c in trace.cycles] == ["PARTIAL", "PASS"]
    assert trace.counters.partial_retries == 1 and trace.counters.fail_retries == 0
    revise = trace.cycles[1]
    assert revise.first_speaker == "Specialist"
    assert "Planner" not in {m.source for m in revise.messages}
    assert revise.step_buffer is not None and "Failed criteria:" in revise.step_buffer
    pytest_runs = [c for c in trace.cycles[0].tool_calls if c.tool == "run_pytest"]
    assert pytest_runs[-1].facts["exit_code"] == 1 and pytest_runs[-1].facts["failed"] >= 1
    report = Path(trace.report or "").read_text()
    assert report.startswith("# code-delivery: PASSED\n\n- run: `")  # the Specialist's words, titled
    assert "\n## The Specialist's last report\n\nArtifacts:" in report
    # Every role consumed exactly its own turns.
    assert prepared.player is not None and prepared.player.positions == {
        "Planner": 1,
        "Specialist": 4,
        "Evaluator": 4,
    }


async def test_evaluator_never_sees_the_specialists_intermediate_turns(tmp_path: Path) -> None:
    _, prepared = await _run(tmp_path, [(t["role"], t["content"]) for t in _TURNS])
    assert prepared.player is not None
    requests = prepared.player.requests["Evaluator"]
    assert len(requests) == 4
    for request in requests:
        sent = "\n".join(str(m.content) for m in request if not isinstance(m, SystemMessage))
        assert 'name="write_file"' not in sent  # the Specialist's tool requests
        assert 'tool_results for="Specialist"' not in sent  # and their results
        assert "<report>" in sent  # but its final report is there
        assert '<criterion id="AC1">' in sent  # and so is the plan
    # The Specialist does not see the Evaluator's tool traffic either.
    for request in prepared.player.requests["Specialist"]:
        sent = "\n".join(str(m.content) for m in request if not isinstance(m, SystemMessage))
        assert 'tool_results for="Evaluator"' not in sent


async def test_partial_over_its_cap_replans(tmp_path: Path) -> None:
    turns = [PLAN, S_BAD, S_REPORT, E_CHECKS, E_PARTIAL, PLAN, S_FIX, S_REPORT2, E_CHECKS2, E_PASS]
    trace, _ = await _run(tmp_path, turns, max_partial_retries=0)
    assert trace.outcome == "PASSED"
    assert [c.kind for c in trace.cycles] == ["initial", "replan"]
    assert trace.cycles[1].first_speaker == "Planner"
    assert "REPLANNING" in [t.to for t in trace.transitions]
    assert trace.cycles[1].step_buffer is not None and "Re-plan request" in trace.cycles[1].step_buffer
    assert trace.counters.fail_retries == 1


async def test_a_revise_and_a_replan_tell_the_specialist_which_tests_failed(tmp_path: Path) -> None:
    # From the ToolAgent's record of the Evaluator's pytest run, never from its words: a small model's
    # finding "pytest failed" names no test to fix.
    trace, prepared = await _run(tmp_path, [t for t in ((t["role"], t["content"]) for t in _TURNS)])
    failing = (
        "- test_quicksort.py::test_duplicates: failed, at test_quicksort.py line 25: "
        "`assert quicksort([3, 1, 3, 2, 1, 3]) == [1, 1, 2, 3, 3, 3]`"
    )
    revise = trace.cycles[1].step_buffer or ""
    found = "What the Evaluator's last checks found (failing tests, findings):\n"
    # The task's own tests come with pytest's first line of why (the same on every run); a role's test, its
    # name and the line of its file where it failed (read from the file: the same on every run too).
    assert (
        found + "- test_acceptance.py::test_the_result_is_sorted: failed (AssertionError: quicksort([2, 1, 2"
        in revise
    )
    assert "\n" + failing + "\n" in revise
    cycle = [PLAN, S_BAD, S_REPORT, E_CHECKS, E_FAIL]
    trace, prepared = await _run(tmp_path / "replan", cycle + cycle, max_fail_retries=1)
    assert [c.kind for c in trace.cycles] == ["initial", "replan"]
    assert prepared.player is not None
    opening = "\n".join(str(m.content) for m in prepared.player.requests["Specialist"][2])  # cycle 2's first
    assert "## What the last cycle left in the workspace" in opening
    assert (
        "What PSE's gates found:\n- check:pytest: last run_pytest run: status error, exit code 1" in opening
    )
    assert failing in opening and "- quicksort.py (" in opening
    assert "## What the last cycle left" not in (trace.cycles[1].step_buffer or "")  # the Planner's is apart


E_FAIL_WORK = ("Evaluator", E_FAIL[1].replace("WRONG_APPROACH", "TESTS_FAILING"))


async def test_a_fail_over_fixable_work_is_asked_once_and_the_next_verdict_stands(tmp_path: Path) -> None:
    # The 1.5B model's habit (issue 29): FAIL, "TESTS_FAILING". Its own reason is work to fix under the
    # plan, so it is asked once; it answers PARTIAL and the next cycle is a revise, not a re-plan.
    asked = (
        "Your FAIL asks for a new plan, but its reason, TESTS_FAILING, is work the Specialist can fix under "
        "this plan: that is PARTIAL. Send your verdict again; FAIL only if the plan itself is wrong."
    )
    turns = [PLAN, S_BAD, S_REPORT, E_CHECKS, E_FAIL_WORK, E_PARTIAL, S_FIX, S_REPORT2, E_CHECKS2, E_PASS]
    trace, prepared = await _run(tmp_path, turns)
    assert [(r.role, r.error) for r in trace.cycles[0].repairs] == [("Evaluator", asked)]
    assert prepared.player is not None
    assert prepared.player.requests["Evaluator"][2][-1].content == asked  # sent as it is, no repair frame
    assert [(c.kind, c.result) for c in trace.cycles] == [("initial", "PARTIAL"), ("revise", "PASS")]
    assert trace.outcome == "PASSED"
    # Asked once: a FAIL it repeats stands, and a FAIL over the plan (WRONG_APPROACH) is never asked.
    again = [PLAN, S_BAD, S_REPORT, E_CHECKS, E_FAIL_WORK, E_FAIL_WORK]
    trace, _ = await _run(tmp_path / "again", again, max_fail_retries=0)
    assert len(trace.cycles[0].repairs) == 1 and trace.cycles[0].result == "FAIL"
    trace, _ = await _run(tmp_path / "plan", [PLAN, S_BAD, S_REPORT, E_CHECKS, E_FAIL], max_fail_retries=0)
    assert trace.cycles[0].repairs == [] and trace.cycles[0].result == "FAIL"


async def test_a_fail_for_a_spec_conflict_is_asked_once_as_work_to_fix(tmp_path: Path) -> None:
    # Run 21 (issue 29's 1.5B run): told its SPEC_CONFLICT quoted no sentence of the task, the Evaluator sent
    # the same words as a FAIL; the re-plan could not change the task's tests. Asked once, it says PARTIAL.
    conflict = ("Evaluator", E_FAIL[1].replace("WRONG_APPROACH", "SPEC_CONFLICT"))
    asked = (
        "Your FAIL asks for a new plan for a SPEC_CONFLICT, but a new plan cannot change the task's tests. A "
        "test the work fails is work the Specialist can fix under this plan: that is PARTIAL. Send your "
        "verdict again."
    )
    turns = [PLAN, S_BAD, S_REPORT, E_CHECKS, conflict, E_PARTIAL, S_FIX, S_REPORT2, E_CHECKS2, E_PASS]
    trace, _ = await _run(tmp_path, turns)
    assert [(r.role, r.error) for r in trace.cycles[0].repairs] == [("Evaluator", asked)]
    assert [(c.kind, c.result) for c in trace.cycles] == [("initial", "PARTIAL"), ("revise", "PASS")]
    trace, _ = await _run(
        tmp_path / "again", [PLAN, S_BAD, S_REPORT, E_CHECKS, conflict, conflict], max_fail_retries=0
    )
    assert len(trace.cycles[0].repairs) == 1 and trace.cycles[0].result == "FAIL"  # the second one stands


async def test_fail_over_its_cap_escalates_with_a_record(tmp_path: Path) -> None:
    cycle = [PLAN, S_BAD, S_REPORT, E_CHECKS, E_FAIL]
    trace, prepared = await _run(tmp_path, cycle + cycle, max_fail_retries=1)
    assert trace.outcome == "ESCALATED"
    assert [c.kind for c in trace.cycles] == ["initial", "replan"]
    assert trace.escalation is not None
    record = json.loads(Path(trace.escalation).read_text())
    failed = {f["id"]: f["times_failed"] for f in record["failed_criteria"]}
    assert failed == {"AC1": 2, "AC3": 2}
    assert record["passed_criteria"] == ["AC2", "AC4"]
    assert "quicksort.py" in " ".join(record["artifacts"])
    assert (prepared.run_dir / "escalation.md").read_text().startswith("# Escalation: code-delivery")


async def test_turn_cap_is_a_timeout(tmp_path: Path) -> None:
    trace, _ = await _run(tmp_path, [PLAN, S_BAD, S_REPORT], turns_per_cycle=3)
    assert trace.outcome == "TIMEOUT"
    assert trace.outcome_reason.startswith("turn cap")
    assert trace.cycles[0].turns == 3
    assert trace.counters.partial_retries == 0 and trace.counters.fail_retries == 0


async def test_a_phase_leaves_the_phases_after_it_room_for_their_finals(tmp_path: Path) -> None:
    """A cycle's turn cap is shared: the 1.5B model's Specialist wrote the same file until the cap and its
    right module was never judged (held-out roman). Each phase keeps `FINAL_TURNS` for each phase after
    it (a check, its result, a verdict), so the Specialist's phase of a 10-turn cycle ends after 6 of
    its own; one that reports in them leaves the Evaluator the room to judge."""
    writes = [PLAN, S_BAD, S_FIX, S_BAD, S_FIX]  # a model that ignores PSE's notice of its last turn
    trace, _ = await _run(tmp_path / "capped", writes, turns_per_cycle=10)
    assert trace.outcome == "TIMEOUT" and trace.cycles[0].turns == 1 + 6
    assert trace.outcome_reason == (
        "turn cap: 10 turns in one cycle (PSE_TURNS_PER_CYCLE), 3 of them kept for the phases after the "
        "Specialist's"
    )
    trace, _ = await _run(
        tmp_path / "judged", [PLAN, S_BAD, S_FIX, S_REPORT2, E_CHECKS2, E_PASS], turns_per_cycle=10
    )
    assert trace.outcome == "PASSED" and trace.cycles[0].turns == 1 + 5 + 3


async def test_model_unavailable_is_an_error_without_using_a_retry(tmp_path: Path) -> None:
    trace, _ = await _run(
        tmp_path,
        [],
        provider="openai",
        base_url="http://127.0.0.1:9/v1",
        model_max_retries=1,
        model_backoff_s=0.01,
    )
    assert trace.outcome == "ERROR"
    assert trace.outcome_reason.startswith("ModelUnavailableError")
    assert trace.counters.partial_retries == 0 and trace.counters.fail_retries == 0
    assert len(trace.cycles) == 1


async def test_pass_claimed_over_a_failing_pytest_is_a_hard_gate_partial(tmp_path: Path) -> None:
    trace, _ = await _run(
        tmp_path, [PLAN, S_BAD, S_REPORT, E_CHECKS, E_PASS_LIE], max_partial_retries=0, max_fail_retries=0
    )
    cycle = trace.cycles[0]
    assert cycle.verdict is not None and cycle.verdict.status == "PASS"
    assert cycle.result == "PARTIAL" and cycle.result_reason.startswith("HARD_GATE")
    assert any(f.startswith("check:pytest: last run_pytest run") for f in cycle.gate.failures)
    assert trace.outcome == "ESCALATED"


async def test_pass_without_running_a_required_check_is_a_hard_gate_partial(tmp_path: Path) -> None:
    # Asked once to run what it skipped, the Evaluator says PASS again without it: the gate decides.
    trace, prepared = await _run(
        tmp_path,
        [PLAN, S_BAD, S_FIX, S_REPORT2, E_RUFF_ONLY, E_PASS_LIE, E_PASS_LIE],
        max_partial_retries=0,
        max_fail_retries=0,
    )
    cycle = trace.cycles[0]
    assert cycle.result == "PARTIAL" and cycle.result_reason.startswith("HARD_GATE")
    assert cycle.gate.failures == ["check:pytest: the Evaluator did not run run_pytest"]
    assert [(r.role, r.error) for r in cycle.repairs] == [
        ("Evaluator", "Your PASS came before the evidence it needs: run run_pytest with target '.' (not run "
         "yet), read the results, then send your verdict.")
    ]  # fmt: skip
    asked = prepared.player.requests["Evaluator"][-1][-1].content  # type: ignore[union-attr]
    assert "run run_pytest with target '.' (not run yet)" in asked


async def test_a_pass_before_a_required_check_is_asked_again_once_and_stands_after_it(tmp_path: Path) -> None:
    # The small-model failure (issue 29): a right PASS, one required check forgotten. Sent back once, the
    # Evaluator runs it in the same phase, and the cycle passes instead of losing a retry to the gate.
    e_pytest = (
        "Evaluator",
        '<tool_calls><invoke name="run_pytest"><parameter name="target">.</parameter></invoke></tool_calls>',
    )
    trace, _ = await _run(
        tmp_path,
        [PLAN, S_BAD, S_FIX, S_REPORT2, E_RUFF_ONLY, E_PASS_LIE, e_pytest, E_PASS],
        max_partial_retries=0,
        max_fail_retries=0,
    )
    assert trace.outcome == "PASSED", trace.outcome_reason
    cycle = trace.cycles[0]
    assert [r.role for r in cycle.repairs] == ["Evaluator"] and cycle.gate.passed
    assert cycle.verdict is not None and cycle.verdict.status == "PASS"


@pytest.mark.parametrize(
    ("verdict_text", "error"),
    [
        ("All criteria PASS. Everything is great: PASS.", "found no <verdict>"),
        (E_PASS[1] + "\n" + E_PASS[1], "found 2 <verdict>"),
    ],
)
async def test_anything_but_one_verdict_ends_the_run_as_error(
    tmp_path: Path, verdict_text: str, error: str
) -> None:
    turns = [PLAN, S_BAD, S_FIX, S_REPORT2, ("Evaluator", verdict_text)]
    trace, _ = await _run(tmp_path, turns, format_retries=0)
    assert trace.outcome == "ERROR"
    assert trace.outcome_reason.startswith("REVIEW_ERROR") and error in trace.outcome_reason
    assert trace.cycles[0].verdict is None


async def test_a_turn_without_its_element_is_repaired_once_and_never_skips_a_gate(tmp_path: Path) -> None:
    prose = ("Evaluator", "All criteria PASS. Everything is great: PASS.")
    # Repaired: the Evaluator is told the parser's words and answers with a verdict the gates still judge.
    trace, prepared = await _run(
        tmp_path, [PLAN, S_BAD, S_FIX, S_REPORT2, prose, E_PASS], max_partial_retries=0
    )
    cycle = trace.cycles[0]
    assert [(r.role, r.attempt) for r in cycle.repairs] == [("Evaluator", 1)]
    assert "found no <verdict> element(s)" in cycle.repairs[0].error
    asked = prepared.player.requests["Evaluator"][-1][-1].content  # type: ignore[union-attr]
    assert "PSE could not read your last message: verdict: found no <verdict>" in asked
    assert cycle.verdict is not None and cycle.verdict.status == "PASS"
    assert cycle.result == "PARTIAL" and cycle.gate.failures == [
        "check:pytest: the Evaluator did not run run_pytest",
        "check:ruff: the Evaluator did not run run_ruff",
    ]
    # A second malformed turn is not repaired again: the review is an ERROR, as without repair.
    again = await _run(tmp_path / "again", [PLAN, S_BAD, S_FIX, S_REPORT2, prose, prose])
    assert again[0].outcome == "ERROR" and again[0].outcome_reason.startswith("REVIEW_ERROR")
    assert len(again[0].cycles[0].repairs) == 1


async def test_blocked_specialist_escalates(tmp_path: Path) -> None:
    blocked = (
        "Specialist",
        '<blocked reason_code="MISSING_PERMISSION">I may not run bash to profile</blocked>',
    )
    trace, _ = await _run(tmp_path, [PLAN, blocked])
    assert trace.outcome == "ESCALATED"
    assert [t.to for t in trace.transitions][-2:] == ["BLOCKED", "ESCALATED"]
    assert trace.cycles[0].blocked is not None and trace.cycles[0].blocked.reason_code == "MISSING_PERMISSION"
    assert json.loads(Path(trace.escalation or "").read_text())["blocked"]["role"] == "Specialist"


def _retry_turns() -> list[tuple[str, str]]:
    # Each revise writes the module anew, wrong again in the same way and of the same size (a revise that
    # wrote it back byte for byte would be asked once more to change it).
    other = ("Specialist", S_BAD[1].replace("smaller", "lesser"))
    assert count_tokens(other[1]) == count_tokens(S_BAD[1])
    partial = [[bad, S_REPORT, E_CHECKS, E_PARTIAL] for bad in (S_BAD, other, S_BAD)]
    return [PLAN, *partial[0], *partial[1], *partial[2], S_FIX, S_REPORT2, E_CHECKS2, E_PASS]


def _prompt_tokens(trace: Trace) -> list[int]:
    return [sum(t.prompt for t in c.tokens.values()) for c in trace.cycles]


async def test_retries_cost_flat_prompt_tokens_in_step_buffer_mode(tmp_path: Path) -> None:
    # The same criterion fails on purpose every time: the per-criterion cap stays out of the way.
    trace, _ = await _run(tmp_path / "sb", _retry_turns(), max_partial_retries=3, max_criterion_failures=9)
    assert trace.outcome == "PASSED"
    assert [c.kind for c in trace.cycles] == ["initial", "revise", "revise", "revise"]
    cap = trace.settings["step_buffer_tokens"]
    tokens = _prompt_tokens(trace)
    assert all(t <= tokens[0] + cap for t in tokens[1:]), tokens
    assert tokens[1] == tokens[2], "identical retries must cost identical prompt tokens"
    assert all(count_tokens(c.step_buffer or "") <= cap for c in trace.cycles)

    history, _ = await _run(
        tmp_path / "hist",
        _retry_turns(),
        max_partial_retries=3,
        max_criterion_failures=9,
        context_mode="history",
    )
    assert history.outcome == "PASSED"
    grown = _prompt_tokens(history)
    assert grown[1] < grown[2] < grown[3], grown  # history mode grows with every retry
    assert sum(grown) > sum(tokens)


async def test_cancel_ends_the_cycle_cleanly_and_records_it(tmp_path: Path) -> None:
    options: dict[str, Any] = {
        "cassette": _cassette(tmp_path, [(t["role"], t["content"]) for t in _TURNS]),
        "runs_dir": tmp_path / "runs",
    }

    def cancel_on_first_tool_call(event: Any) -> None:
        if event.kind == "tool_call":
            prepared.engine.cancel("test cancelled")

    prepared = prepare_run("code-delivery", load_settings(**options), on_event=cancel_on_first_tool_call)
    summary = await run_to_end(prepared)
    assert summary.outcome == "ERROR" and summary.outcome_reason == "CANCELLED: test cancelled"
    trace = load_trace(Path(summary.trace))
    assert trace.cycles[0].result == "ERROR"
    # A cancelled run can be resumed: it goes on from the cycle boundary and finishes.
    resumed = prepare_resume(trace.run_id, load_settings(runs_dir=tmp_path / "runs"))
    final = await run_to_end(resumed)
    assert final.outcome == "PASSED" and final.cycles == 2
    assert load_trace(Path(final.trace)).resumed == 1


_KILLER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from pathlib import Path
    from pse.config import load_settings
    from pse.runner import prepare_run, run_to_end

    def die_at_cycle_two(event):
        if event.kind == "cycle_start" and event.cycle == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # a hard kill: no cleanup, no final trace write

    settings = load_settings(cassette=Path(sys.argv[1]), runs_dir=Path(sys.argv[2]))
    prepared = prepare_run("code-delivery", settings, on_event=die_at_cycle_two)
    print(prepared.run_id, flush=True)
    asyncio.run(run_to_end(prepared))
    """
)


async def test_resume_after_a_kill_finishes_the_run(tmp_path: Path) -> None:
    cassette = _cassette(tmp_path, [(t["role"], t["content"]) for t in _TURNS])
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-c", _KILLER, str(cassette), str(runs)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run_id = proc.stdout.split()[0]
    killed = load_trace(runs / run_id)
    assert killed.outcome is None and len(killed.cycles) == 1 and killed.state == "REVISING"
    assert killed.cassette_positions == {"Planner": 1, "Specialist": 2, "Evaluator": 2}

    resumed = prepare_resume(run_id, load_settings(runs_dir=runs))
    summary = await run_to_end(resumed)
    trace = load_trace(Path(summary.trace))
    assert trace.outcome == "PASSED" and trace.resumed == 1
    assert [c.kind for c in trace.cycles] == ["initial", "revise"]
    assert trace.counters.partial_retries == 1


async def test_token_budget_stops_the_run_as_timeout(tmp_path: Path) -> None:
    trace, _ = await _run(tmp_path, [(t["role"], t["content"]) for t in _TURNS], token_budget=3000)
    assert trace.outcome == "TIMEOUT"
    # The call that would overrun the budget never starts: the budget holds.
    assert trace.outcome_reason.startswith("token budget cannot cover the next prompt: 1939 used + about")
    assert trace.tokens.total == 1939 < 3000 and len(trace.cycles) == 1


async def test_cost_budget_stops_the_run_as_timeout(tmp_path: Path) -> None:
    prices = {"scripted": {"input": 10.0, "output": 30.0, "currency": "EUR"}}
    trace, _ = await _run(
        tmp_path, [(t["role"], t["content"]) for t in _TURNS], prices=prices, cost_budget=0.02
    )
    assert trace.outcome == "TIMEOUT" and trace.outcome_reason.startswith("cost budget exhausted")
    assert trace.cost.currency == "EUR" and trace.cost.amount >= 0.02
    assert trace.cost.unpriced_models == []


async def test_run_wall_clock_limit_is_a_timeout(tmp_path: Path) -> None:
    trace, _ = await _run(tmp_path, [(t["role"], t["content"]) for t in _TURNS], run_timeout_s=0.001)
    assert trace.outcome == "TIMEOUT" and "wall-clock" in trace.outcome_reason


async def test_tool_infrastructure_failure_is_an_error_without_a_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pse.tools

    def broken_read_file(*args: object, **kwargs: object) -> object:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(pse.tools, "read_file", broken_read_file)
    trace, _ = await _run(tmp_path, [(t["role"], t["content"]) for t in _TURNS])
    assert trace.outcome == "ERROR"
    assert (
        trace.outcome_reason.startswith("tool infrastructure failed")
        and "disk on fire" in trace.outcome_reason
    )
    assert trace.counters.partial_retries == 0 and trace.counters.fail_retries == 0


async def test_a_criterion_that_fails_twice_escalates_with_retries_left(tmp_path: Path) -> None:
    trace, prepared = await _run(tmp_path, _retry_turns(), max_partial_retries=3)
    assert trace.outcome == "ESCALATED" and [c.result for c in trace.cycles] == ["PARTIAL", "PARTIAL"]
    assert trace.counters.partial_retries == 1  # two revisions were still allowed
    assert trace.outcome_reason == (
        "PARTIAL (TESTS_FAILING); criterion AC1 failed 2 times (PSE_MAX_CRITERION_FAILURES=2), "
        "whatever retries are left"
    )
    record = json.loads((prepared.run_dir / "escalation.json").read_text())
    ac1 = next(f for f in record["failed_criteria"] if f["id"] == "AC1")
    assert [x["cycle"] for x in ac1["findings"]] == [1, 2] and ac1["times_failed"] == 2
    assert "cycle 1: " in (prepared.run_dir / "escalation.md").read_text()
    # A task may allow more: its [limits] take the same key.
    more, _ = await _run(tmp_path / "more", _retry_turns(), max_partial_retries=3, max_criterion_failures=4)
    assert more.outcome == "PASSED" and len(more.cycles) == 4
