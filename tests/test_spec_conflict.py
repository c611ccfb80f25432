"""`<blocked reason_code="SPEC_CONFLICT" test="TEST">SENTENCE</blocked>`: the honest way out of a task whose
given test contradicts its specification (issue 31). Its parse, its grammar (the Specialist, the Evaluator
and the single agent may send it; the Planner may not), and the escalation record that quotes both sides.
The whole path through the engine is in tests/test_eval_impossible.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gbnf_recognizer import Grammar
from pse.engine._escalation import build_escalation, spec_conflict
from pse.events import BlockedRecord, ToolCallRecord
from pse.protocol import SPEC_CONFLICT, TurnShape, find_blocked, turn_grammar
from pse.roles import SINGLE_AGENT, Role
from pse.trace import CycleRecord, Trace
from reference_turns import role_tools

CONFLICT = (
    '<blocked reason_code="SPEC_CONFLICT" test="test_visible.py::test_2">Return the sum of x and y.</blocked>'
)
TESTS = "from solution import add\n\n\ndef test_1():\n    assert add(1, 1) == 2\n\n\ndef test_2():\n    assert add(2, 3) == 6\n"


def test_the_block_names_its_test_and_quotes_the_sentence() -> None:
    found = find_blocked(f"The test contradicts the docstring.\n{CONFLICT}", Role.EVALUATOR)
    assert found == BlockedRecord(
        role="Evaluator",
        reason_code=SPEC_CONFLICT,
        detail="Return the sum of x and y.",
        test="test_visible.py::test_2",
    )
    plain = find_blocked('<blocked reason_code="MISSING_DATA">no logs</blocked>', Role.SPECIALIST)
    assert plain is not None and plain.test is None


@pytest.mark.parametrize("role", [Role.SPECIALIST, Role.EVALUATOR, SINGLE_AGENT])
def test_the_grammar_lets_the_doers_and_the_judges_take_the_honest_exit(role: str) -> None:
    tools = role_tools(Role.SPECIALIST if role == SINGLE_AGENT else role)
    grammar = Grammar(turn_grammar(TurnShape(role, tools, ("AC1",), max_chars=12288)))
    assert grammar.accepts(CONFLICT)
    assert not grammar.accepts('<blocked reason_code="SPEC_CONFLICT">Return the sum.</blocked>')  # no test
    assert not grammar.accepts('<blocked reason_code="SPEC_CONFLICT" test="">Return the sum.</blocked>')
    assert not grammar.accepts(CONFLICT.replace("test_visible.py::test_2", 'a" onload="x'))
    # Not before a look: a role with tools and no tool results yet may only call tools (or plan).
    assert not Grammar(turn_grammar(TurnShape(role, tools, ("AC1",), evidence=False))).accepts(CONFLICT)
    # The Evaluator and the single agent have their verdict for every other reason.
    other = '<blocked reason_code="MISSING_DATA">no logs</blocked>'
    assert Grammar(turn_grammar(TurnShape(role, tools, ("AC1",)))).accepts(other) == (role == Role.SPECIALIST)


def test_the_planner_does_not_get_the_spec_conflict() -> None:
    grammar = Grammar(turn_grammar(TurnShape(Role.PLANNER, role_tools(Role.PLANNER))))
    assert not grammar.accepts(CONFLICT)
    assert grammar.accepts('<blocked reason_code="MISSING_DATA">no logs</blocked>')


def _trace(*calls: ToolCallRecord, task_message: str = "") -> Trace:
    cycle = CycleRecord(
        index=1, kind="initial", first_speaker="Planner", started_at="t", tool_calls=list(calls)
    )
    return Trace(run_id="r1", task="humaneval", started_at="t", task_message=task_message, cycles=[cycle])


def _write(requester: str, path: str) -> ToolCallRecord:
    return ToolCallRecord.ran(
        requester=requester, tool="write_file", arguments={"path": path, "content": "x"}, index=1,
        rule=f"roles.{requester}.write_file", status="ok", output="wrote", ms=1, sandbox=None,
        facts={"path": path, "area": "workspace"},
    )  # fmt: skip


def test_the_escalation_quotes_the_test_and_the_sentence(tmp_path: Path) -> None:
    (tmp_path / "test_visible.py").write_text(TESTS)
    blocked = BlockedRecord(
        role="Evaluator",
        reason_code=SPEC_CONFLICT,
        detail="Return the sum of x and y.",
        test="test_visible.py::test_2",
    )
    message = "PROBLEM:\ndef add(x, y):\n    '''Return the sum of x and\n    y.'''\n"
    trace = _trace(_write("Specialist", "solution.py"), task_message=message)
    assert spec_conflict(blocked, trace, tmp_path) == {
        "by": "Evaluator",
        "test": "test_visible.py::test_2",
        "test_file": "test_visible.py",
        "test_source": "def test_2():\n    assert add(2, 3) == 6",
        "test_author": "task",
        "specification": "Return the sum of x and y.",
        "specification_in_task": True,  # spacing aside
    }
    # A bare test name is looked for in the workspace's test files; a file a role wrote says so.
    (tmp_path / "test_mine.py").write_text("def test_9():\n    assert True\n")
    mine = blocked.model_copy(update={"test": "test_9", "detail": "Something the task never said."})
    found = spec_conflict(mine, _trace(_write("Specialist", "test_mine.py"), task_message=message), tmp_path)
    assert found is not None
    assert (found["test_file"], found["test_author"], found["specification_in_task"]) == (
        "test_mine.py", "Specialist", False,
    )  # fmt: skip
    assert (
        spec_conflict(BlockedRecord(role="Specialist", reason_code="MISSING_DATA"), trace, tmp_path) is None
    )


@pytest.mark.parametrize(
    "named", ["test_visible.py::test_7", "../outside.py::test_2", "/etc/passwd::x", "link.py::test_2", ""]
)
def test_a_test_that_is_not_there_or_out_of_reach_is_not_quoted(tmp_path: Path, named: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "test_visible.py").write_text(TESTS)
    (tmp_path / "outside.py").write_text(TESTS)
    os.symlink(tmp_path / "outside.py", workspace / "link.py")
    blocked = BlockedRecord(role="Evaluator", reason_code=SPEC_CONFLICT, detail="s", test=named or None)
    found = spec_conflict(blocked, _trace(), workspace)
    assert found is not None and (found["test_file"], found["test_source"], found["test_author"]) == (
        None,
        None,
        None,
    )


def test_the_escalation_record_and_page_carry_it(tmp_path: Path) -> None:
    (tmp_path / "test_visible.py").write_text(TESTS)
    trace = _trace(task_message="Return the sum of x and y.")
    trace.cycles[0].blocked = BlockedRecord(
        role="Specialist",
        reason_code=SPEC_CONFLICT,
        detail="Return the sum of x and y.",
        test="test_visible.py::test_2",
    )
    record = build_escalation(trace, tmp_path)
    assert record["blocked"]["test"] == "test_visible.py::test_2"
    assert record["spec_conflict"]["test_source"] == "def test_2():\n    assert add(2, 3) == 6"
    other = _trace()
    other.cycles[0].blocked = BlockedRecord(role="Planner", reason_code="MISSING_DATA", detail="no logs")
    assert build_escalation(other, tmp_path)["spec_conflict"] is None
