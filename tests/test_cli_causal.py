"""The causal line (`pse._causal`): why a run ended as it did, from its trace alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import pse
from pse._causal import causal_line, causal_links, first_sentence, now_line, root_cause
from pse.engine import Trace

_GATE_OK = {"passed": True, "failures": [], "results": [{"name": "check:pytest", "passed": True}]}
_PYTEST_FAILED = {
    "passed": False,
    "failures": ["check:pytest: last run_pytest run: status error, exit code 1"],
    "results": [
        {"name": "outputs_exist", "passed": True, "detail": "every expected output exists"},
        {"name": "check:pytest", "passed": False, "detail": "last run_pytest run: status error, exit code 1"},
    ],
}
_DOWN = (
    "ModelUnavailableError: Evaluator's model 'm' (openai at http://127.0.0.1:9/v1) gave no usable answer "
    "after 1 attempt(s); last error: connection failed. Check that the server is up (PSE_EVALUATOR_BASE_URL)."
)


def _cycle(index: int, status: str | None, result: str, gate: dict[str, Any], **more: Any) -> dict[str, Any]:
    verdict = {"status": status, "reason_code": "X", "criteria": []} if status else None
    return {"index": index, "verdict": verdict, "gate": gate, "result": result, "ended_at": "t", **more}


def _trace(outcome: str | None, *cycles: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"outcome": outcome, "cycles": list(cycles), "transitions": [], **more}


def test_a_gate_that_overrules_the_evaluator_is_named_between_the_verdict_and_the_result() -> None:
    trace = _trace(
        "PASSED",
        _cycle(1, "PASS", "PARTIAL", _PYTEST_FAILED),
        _cycle(2, "PASS", "PASS", _GATE_OK),
    )
    assert causal_line(trace) == (
        "cycle 1: Evaluator PASS → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator PASS → PASSED"
    )


def test_the_code_delivery_demo_reads_partial_then_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(tmp_path), "--json")
    assert code == 0
    data = json.loads(Path(json.loads(out.splitlines()[-1])["trace"]).read_text())
    line = (
        "cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator PASS → PASSED"
    )
    assert causal_line(data) == line
    assert causal_line(Trace.model_validate(data)) == line  # a Trace and its JSON tell the same story
    assert [link.gates for link in causal_links(data)] == [("check:pytest",), ()]


def test_an_error_run_tells_its_root_cause_only() -> None:
    stopped = _cycle(2, None, "ERROR", _PYTEST_FAILED, stopped=_DOWN)  # gates failed: the review never ran
    trace = _trace("ERROR", _cycle(1, "PARTIAL", "PARTIAL", _PYTEST_FAILED), stopped, outcome_reason=_DOWN)
    assert causal_line(trace) == (
        "cycle 2: ERROR: ModelUnavailableError: Evaluator's model 'm' (openai at http://127.0.0.1:9/v1) gave "
        "no usable answer after 1 attempt(s); last error: connection failed."
    )
    assert "gate" not in causal_line(trace) and "Check that" not in causal_line(trace)
    assert root_cause(trace) == first_sentence(_DOWN)


def test_an_error_before_any_cycle_is_its_reason() -> None:
    trace = _trace("ERROR", outcome_reason="CassetteError: no turns. Record one first.")
    assert causal_line(trace) == "ERROR: CassetteError: no turns."
    assert causal_line(_trace(None)) == "not started"


def test_blocked_questions_waiting_and_unenforced_gates() -> None:
    blocked = _cycle(
        1, None, "BLOCKED", _GATE_OK, blocked={"role": "Specialist", "reason_code": "MISSING_DATA"}
    )
    assert (
        causal_line(_trace("ESCALATED", blocked)) == "cycle 1: Specialist blocked (MISSING_DATA) → ESCALATED"
    )

    asked = _cycle(1, None, "QUESTIONS", _GATE_OK, clarification={"questions": [{"id": "Q1", "text": "?"}]})
    waiting = _trace(None, asked, state="AWAITING_ANSWER")
    assert causal_line(waiting) == "cycle 1: Planner asked 1 question(s) → waiting for answers"

    off = _cycle(1, "PASS", "PASS", {**_PYTEST_FAILED, "enforced": False})
    assert causal_line(_trace("PASSED", off)) == (
        "cycle 1: Evaluator PASS → gate `check:pytest` failed (not enforced) → PASS → PASSED"
    )


def test_a_person_answering_an_escalation_is_a_link_of_its_own() -> None:
    trace = _trace(
        "PASSED",
        _cycle(1, "PARTIAL", "PARTIAL", _GATE_OK),
        _cycle(2, "PASS", "PASS", _GATE_OK),
        answers=[{"after_cycle": 1, "decision": "resume", "outcome_before": "ESCALATED"}],
    )
    assert causal_line(trace) == (
        "cycle 1: Evaluator PARTIAL → ESCALATED → a person: resume · cycle 2: Evaluator PASS → PASSED"
    )


def test_the_single_team_reviews_itself_and_a_running_run_says_so() -> None:
    trace = _trace(
        None, _cycle(1, "PARTIAL", "PARTIAL", _GATE_OK), settings={"team": "single"}, state="RUNNING"
    )
    assert causal_line(trace) == "cycle 1: Agent PARTIAL → running"


_OUTPUT_MISSING = {
    "passed": False,
    "failures": ["outputs_exist: missing: summary.md"],
    "results": [
        {"name": "outputs_exist", "passed": False, "detail": "missing: summary.md"},
        {"name": "criteria_met", "passed": True, "detail": "all criteria met"},
    ],
}
_EXHAUSTED = (
    "CassetteExhaustedError: cassette has no turn 3 for role Specialist (it holds 2 turn(s) for Specialist); "
    "add a Specialist turn to the cassette or check why the run needed one more"
)


def test_an_error_names_the_gate_that_set_it_off_first_with_its_detail() -> None:
    trace = _trace(
        "ERROR",
        _cycle(1, "PASS", "PARTIAL", _OUTPUT_MISSING),
        _cycle(2, None, "ERROR", _PYTEST_FAILED, stopped=_EXHAUSTED),
        outcome_reason=_EXHAUSTED,
    )
    assert causal_line(trace) == (
        f"cycle 2: ERROR: {_EXHAUSTED} · "
        "set off by cycle 1: Evaluator PASS → gate `outputs_exist` failed (missing: summary.md) → PARTIAL"
    )
    assert [link.cycle for link in causal_links(trace)] == [2, 1]


def test_a_pass_a_gate_overruled_is_the_first_cause_of_any_later_error() -> None:
    trace = _trace(
        "ERROR",
        _cycle(1, "PARTIAL", "PARTIAL", _GATE_OK),
        _cycle(2, "PASS", "PARTIAL", _PYTEST_FAILED),
        _cycle(3, None, "ERROR", _GATE_OK, stopped=_DOWN),
        outcome_reason=_DOWN,
    )
    assert causal_line(trace) == (
        f"cycle 3: ERROR: {first_sentence(_DOWN)} · set off by cycle 2: Evaluator PASS → gate `check:pytest` "
        "failed (last run_pytest run: status error, exit code 1) → PARTIAL"
    )


def test_an_exhaustion_after_a_partial_verdict_names_that_cycle_first() -> None:
    trace = _trace(
        "ERROR",
        _cycle(1, "PARTIAL", "PARTIAL", _GATE_OK),
        _cycle(2, None, "ERROR", _GATE_OK, stopped=_EXHAUSTED),
        outcome_reason=_EXHAUSTED,
    )
    assert causal_line(trace) == f"cycle 2: ERROR: {_EXHAUSTED} · set off by cycle 1: Evaluator PARTIAL"


def test_an_error_run_whose_task_output_was_never_written_names_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pse.tasks import scaffold_task

    tasks = tmp_path / "tasks"
    scaffold_task("notes", tasks)
    toml = tasks / "notes" / "task.toml"
    toml.write_text(toml.read_text().replace('["result.md"]', '["result.md", "summary/"]'))
    code, out, _ = pse(
        monkeypatch, capsys, "run", "notes", "--tasks-dir", str(tasks), "--runs-dir", str(tmp_path)
    )
    assert code == 3
    flat = " ".join(out.split())
    gate = "set off by cycle 1: Evaluator PASS → gate `outputs_exist` failed (missing: summary/) → PARTIAL"
    assert "why: cycle 2: ERROR: CassetteExhaustedError: " in flat and flat.index("why: ") < flat.index(gate)
    code, out, _ = pse(monkeypatch, capsys, "trace", "show", "last", "--runs-dir", str(tmp_path))
    flat = " ".join(out.split())
    assert "why: cycle 2: ERROR: CassetteExhaustedError: " in flat and f"· {gate}" in flat
    assert "cycle 1 initial: Evaluator PASS (ALL_MET) → gate `outputs_exist` failed → PARTIAL" in flat


# --- a run still going: what is happening now -----------------------------------------------------


def _at(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}.000+00:00"


def _open_cycle(index: int = 1) -> dict[str, Any]:
    """The open cycle the dashboard's test of lib/run.js nowLine builds (tests/test_web_fit_browser.py)."""
    calls = [
        {"requester": "Specialist", "tool": "write_file", "arguments": {"path": path}, "at": _at(second)}
        for second, path in ((2, "a.py"), (3, "b.py"), (4, "quicksort.py"))
    ]
    planned = {"source": "Planner", "content": "<plan/>", "at": _at(1)}
    return {"index": index, "first_speaker": "Planner", "messages": [planned], "tool_calls": calls}


def test_an_open_cycle_says_who_does_what_now_and_how_many_tool_calls() -> None:
    cycle = _open_cycle()
    assert now_line(cycle) == "cycle 1 · Specialist writing quicksort.py · 3 tool calls"
    # the ToolAgent's results are not an act of its own: the Specialist is still the one working
    cycle["messages"].append({"source": "ToolAgent", "content": "<tool_results/>", "at": _at(5)})
    assert now_line(cycle) == "cycle 1 · Specialist writing quicksort.py · 3 tool calls"
    cycle["messages"].append({"source": "Evaluator", "content": "…", "at": _at(6)})
    cycle["tool_calls"].append(
        {"requester": "Evaluator", "tool": "run_pytest", "arguments": {"target": "."}, "at": _at(7)}
    )
    assert now_line(cycle) == "cycle 1 · Evaluator running pytest · 4 tool calls"
    fresh = {"index": 2, "first_speaker": "Specialist", "messages": [], "tool_calls": []}
    assert now_line(fresh) == "cycle 2 · Specialist working · 0 tool calls"


def test_a_live_runs_line_ends_with_what_its_open_cycle_does_now() -> None:
    first = _cycle(1, "PASS", "PARTIAL", _PYTEST_FAILED)
    unfinished = {"passed": False, "failures": ["cycle did not finish"]}
    opened = {**_open_cycle(2), "result": "RUNNING", "gate": unfinished}  # as the dashboard holds it
    trace = _trace(None, first, opened, state="RUNNING")
    before = "cycle 1: Evaluator PASS → gate `check:pytest` failed → PARTIAL · "
    assert (
        causal_line(trace, live=True) == before + "cycle 2 · Specialist writing quicksort.py · 3 tool calls"
    )
    # read from a trace no process runs any more, the open cycle is only "running", said once
    assert causal_line({**trace, "cycles": [first, {**opened, "result": ""}]}) == before + "cycle 2: running"
    assert "running → RUNNING → running" not in causal_line(trace)
    waiting = _trace(None, first, opened, state="AWAITING_APPROVAL")
    assert causal_line(waiting, live=True) == before + "cycle 2: running → waiting for approval"


def test_the_terminals_live_view_says_what_is_happening_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from rich.console import Console

    from pse.cli._live import LiveView

    code, out, _ = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(tmp_path), "--json")
    assert code == 0
    trace = Trace.model_validate_json(Path(json.loads(out.splitlines()[-1])["trace"]).read_text())
    console = Console(file=io.StringIO(), width=100, force_terminal=True)
    view = LiveView(console, "code-delivery", trace.run_id)
    said: list[str] = [view.now]
    for event in trace.events():
        view.on_event(event)
        if view.now != said[-1]:
            said.append(view.now)
    assert said[:5] == [
        "starting",
        "cycle 1 · Planner planning · 0 tool calls",
        "cycle 1 · Specialist working · 0 tool calls",
        "cycle 1 · Specialist writing quicksort.py · 1 tool call",
        "cycle 1 · Specialist writing test_quicksort.py · 2 tool calls",
    ]
    assert "cycle 1 · Evaluator running pytest · 5 tool calls" in said
    assert "cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL → running" in said
    assert said[-1] == "cycle 2: Evaluator PASS → PASSED"
    console.print(view._render())  # the panel's head carries the line
    assert "cycle 2: Evaluator PASS → PASSED" in console.file.getvalue()  # type: ignore[attr-defined]


def test_the_live_view_names_the_single_agent_as_the_reviewer_of_its_own_work() -> None:
    import io

    from rich.console import Console

    from pse.cli._live import LiveView
    from pse.events import (
        CycleStarted,
        GateRecord,
        MessageEvent,
        MessageRecord,
        OutcomeEvent,
        TokenCount,
        VerdictEvent,
        VerdictRecord,
    )

    view = LiveView(Console(file=io.StringIO(), force_terminal=False), "t", "r")
    view.on_event(CycleStarted(run_id="r", cycle=1, cycle_kind="initial", first_speaker="Agent", at=_at(0)))
    assert view.now == "cycle 1 · Agent working · 0 tool calls"
    view.on_event(
        MessageEvent(run_id="r", cycle=1, message=MessageRecord(source="Agent", content="…", at=_at(1)))
    )
    verdict = VerdictRecord(status="PASS", reason_code="ALL_MET")
    view.on_event(VerdictEvent(run_id="r", cycle=1, verdict=verdict, gate=GateRecord(passed=True), at=_at(2)))
    assert view.now == "cycle 1: Agent PASS → running"
    done = {"outcome": "PASSED", "reason": "PASS", "cycles": 1, "cost": 0.0, "currency": "USD"}
    view.on_event(OutcomeEvent(run_id="r", tokens=TokenCount(), **done))
    assert view.now == "cycle 1: Agent PASS → PASSED"
