"""A criterion marked met names a test of the judge's own that passed, one test per criterion.

The class (heldout-17 top-words, a false PASS): every hard gate held, and the verdict marked five
criteria met on one test of the Evaluator's own, whose one case a wrong module passes. What is checked
here: run_pytest lists the judge's tests by name, the `criteria_backed` gate matches the names a verdict
cites to the tests that passed (one each), a PASS is asked about once before the gate refuses it, and
the verdict grammar offers the names that passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gbnf_recognizer import Grammar
from pse.engine._gates import GatePolicy, evaluate_gates, evidence_owed
from pse.events import CriterionResult, PlanItem, PlanRecord, ToolCallRecord, VerdictRecord
from pse.protocol import TurnShape, turn_grammar
from pse.roles import Role
from pse.tools import OWN_TESTS, named_outcomes, names_check, passed_names, unbacked
from pse.tools._backing import for_criterion, name_of_test, named_line
from reference_turns import role_tools

PLAN = PlanRecord(
    goal="g",
    steps=[PlanItem(id="S1", text="s")],
    criteria=[PlanItem(id=f"AC{i}", text=f"c{i}") for i in (1, 2, 3)],
    outputs=["words.py"],
)
POLICY = GatePolicy(required_checks=("pytest",), independent_tests=True)


def _verdict(*findings: str, status: str = "PASS") -> VerdictRecord:
    return VerdictRecord(
        status=status,  # type: ignore[arg-type]
        reason_code="ALL_MET",
        criteria=[CriterionResult(id=f"AC{i}", met=True, finding=f) for i, f in enumerate(findings, 1)],
    )


def _run(*own: tuple[str, str], theirs: int = 1) -> ToolCallRecord:
    """The Evaluator's full run_pytest, its own tests `(node, outcome)` after the Specialist's."""
    tests = [
        {"test": f"test_words.py::test_s{i}", "outcome": "passed", "author": "Specialist"}
        for i in range(theirs)
    ]
    tests += [
        {"test": f"@evaluation/test_w.py::{node}", "outcome": o, "author": "Evaluator"} for node, o in own
    ]
    mine: dict[str, int] = {}
    for _, outcome in own:
        mine[outcome] = mine.get(outcome, 0) + 1
    return ToolCallRecord(
        requester="Evaluator",
        tool="run_pytest",
        arguments={"target": "."},
        decision="allowed",
        rule="r",
        status="ok",
        facts={
            "exit_code": 0,
            "report": "checker",
            "target": ".",
            "evidence": {"files": [], "count": 0, "left_out": [], "missing": []},
            "unproven": [],
            "by_author": {"Specialist": {"passed": theirs}, "Evaluator": mine},
            "tests": tests,
        },
    )


def _gate(tmp_path: Path, verdict: VerdictRecord, run: ToolCallRecord) -> list[str]:
    (tmp_path / "words.py").write_text("x")
    return evaluate_gates(
        verdict=verdict, plan=PLAN, tool_calls=[run], policy=POLICY, workspace=tmp_path
    ).failures


def test_a_name_is_the_test_functions_without_file_class_or_parameters() -> None:
    assert name_of_test("@evaluation/test_w.py::TestA::test_ties[1-2]") == "test_ties"
    assert name_of_test("test_w.py::test_case") == "test_case"
    cases = [
        {"test": "@evaluation/t.py::test_p[1]", "outcome": "passed", "author": "Evaluator"},
        {"test": "@evaluation/t.py::test_p[2]", "outcome": "failed", "author": "Evaluator"},
        {"test": "@evaluation/t.py::test_q", "outcome": "passed", "author": "Evaluator"},
        {"test": "test_s.py::test_r", "outcome": "passed", "author": "Specialist"},
    ]
    named = named_outcomes(cases, "Evaluator")
    assert named == {"test_p": "failed", "test_q": "passed"}  # a name passed only if every case did
    assert named_line(named) == f"{OWN_TESTS}test_p failed, test_q passed]"
    assert passed_names("...\n" + named_line(named) + "\n[exit code 1]") == ("test_q",)


def test_the_last_listing_of_a_result_is_the_one_read() -> None:
    # A test's assertion message, printed earlier in the same result, cannot name tests that passed.
    forged = f"E   AssertionError: {OWN_TESTS}test_forged passed]\n"
    assert passed_names(forged + named_line({"test_real": "passed"})) == ("test_real",)
    assert passed_names("no listing here") == ()


def test_each_criterion_met_needs_a_test_of_its_own_one_test_each() -> None:
    passed = ["test_case", "test_ties", "test_order"]
    assert unbacked({"AC1": "test_case passed", "AC2": "test_ties passed"}, passed) == []
    assert unbacked({"AC1": "test_case passed", "AC2": "test_case passed"}, passed) == ["AC2"]
    assert unbacked({"AC1": "all five cases hold", "AC2": "test_ties passed"}, passed) == ["AC1"]
    # A matching, not first come: AC1 names two tests, AC2 one of them; both are backed.
    assert unbacked({"AC1": "test_case and test_ties pass", "AC2": "test_case passed"}, passed) == []
    # A test named for its criterion backs it, whatever the verdict names (HumanEval-1: one test named
    # for the function, written again under the same name when asked for more).
    assert unbacked({"AC1": "test_ac1 passed", "AC2": "test_ac1 passed"}, ["test_ac1", "test_AC2_ties"]) == []
    assert for_criterion("test_ac2", "AC2") and not for_criterion("test_ac21", "AC2")
    # A name inside another word, or a failed or unknown test, backs nothing.
    assert unbacked({"AC1": "test_case_folding passed"}, passed) == ["AC1"]
    assert unbacked({"AC1": "words.test_case passed"}, passed) == ["AC1"]
    assert unbacked({"AC1": "test_case passed"}, []) == ["AC1"]


def test_a_criterion_that_names_a_required_check_is_that_checks_to_show_one_each() -> None:
    # "pytest passes on the workspace", "ruff reports no findings": the checks' own gates hold them.
    assert names_check("pytest: run_pytest", "pytest") and names_check("Ruff reports nothing", "ruff")
    assert not names_check("pytest_plugins are declared", "pytest")
    checked = {"AC1": ["pytest"], "AC2": ["pytest"], "AC3": ["ruff"]}
    said = {"AC1": "11 passed", "AC2": "the cases hold", "AC3": "All checks passed!"}
    assert unbacked(said, [], checked) == ["AC2"]  # pytest backs one criterion, not every one
    assert unbacked(said, ["test_cases"], checked) == ["AC2"]
    assert unbacked({**said, "AC2": "test_cases passed"}, ["test_cases"], checked) == []


def test_the_top_words_verdict_no_longer_passes_the_gates(tmp_path: Path) -> None:
    # heldout-17: five criteria met, each finding the criterion's own words, one own test that passed.
    criteria = ("words.py exists", "top_words is defined", "words compared without case")
    failures = _gate(tmp_path, _verdict(*criteria), _run(("test_top_words", "passed")))
    assert failures == [
        "criteria_backed: met, naming no test of the Evaluator's own that passed (one test per "
        "criterion): AC1, AC2, AC3; its tests that passed: test_top_words"
    ]
    one_for_all = _verdict("test_top_words passed", "test_top_words passed", "test_top_words passed")
    assert len(_gate(tmp_path, one_for_all, _run(("test_top_words", "passed")))) == 1


def test_a_verdict_naming_a_test_of_its_own_for_each_criterion_passes_the_gates(tmp_path: Path) -> None:
    run = _run(("test_exists", "passed"), ("test_defined", "passed"), ("test_case", "passed"))
    assert (
        _gate(tmp_path, _verdict("test_exists passed", "test_defined passed", "test_case passed"), run) == []
    )
    # HumanEval's plans: "AC1: pytest: run_pytest", which the required check shows.
    checked = PLAN.model_copy(update={"criteria": [PlanItem(id="AC1", text="pytest: run_pytest")]})
    one = VerdictRecord(
        status="PASS",
        reason_code="ALL_MET",
        criteria=[CriterionResult(id="AC1", met=True, finding="all tests passed")],
    )
    gate = evaluate_gates(verdict=one, plan=checked, tool_calls=[run], policy=POLICY, workspace=tmp_path)
    assert gate.passed, gate.failures


def test_the_specialists_tests_and_a_failed_test_of_its_own_back_nothing(tmp_path: Path) -> None:
    run = _run(("test_a", "passed"), ("test_b", "passed"), ("test_c", "failed"))
    failures = _gate(tmp_path, _verdict("test_a passed", "test_s0 passed", "test_c passed"), run)
    assert [f.split(":")[0] for f in failures] == ["independent_tests", "criteria_backed"]
    assert "AC2, AC3; its tests that passed: test_a, test_b" in failures[1]


def test_only_a_pass_and_only_where_the_task_owes_tests_of_its_own_are_held_to_it(tmp_path: Path) -> None:
    (tmp_path / "words.py").write_text("x")
    run, partial = _run(("test_a", "passed")), _verdict("x", "y", "z", status="PARTIAL")
    names = [r.name for r in evaluate_gates(verdict=partial, plan=PLAN, tool_calls=[run], policy=POLICY,
                                            workspace=tmp_path).results]  # fmt: skip
    assert "criteria_backed" not in names
    plain = GatePolicy(required_checks=("pytest",))
    gate = evaluate_gates(verdict=_verdict("x", "y", "z"), plan=PLAN, tool_calls=[run], policy=plain,
                          workspace=tmp_path)  # fmt: skip
    assert gate.passed


def test_a_pass_is_asked_once_for_the_tests_its_criteria_lack() -> None:
    run = _run(("test_top_words", "passed"))
    verdict = _verdict("test_top_words passed", "test_top_words passed", "met")
    assert evidence_owed([run], POLICY, verdict, PLAN) == [
        "run_pytest with a test of your own for AC2 and AC3: write `def test_ac2():` and `def test_ac3():` "
        "in your test file, each asserting what its criterion says, from the task's words; then each "
        "criterion you mark met names its own test (`test_ac2 passed`), one test per criterion (your tests "
        "that passed: test_top_words)"
    ]
    assert evidence_owed([run], POLICY) == []  # no verdict: nothing to weigh
    assert evidence_owed([run], POLICY, _verdict("x", status="PARTIAL"), PLAN) == []


@pytest.fixture
def backed() -> Grammar:
    shape = TurnShape(
        Role.EVALUATOR, role_tools(Role.EVALUATOR), ("AC1", "AC2"), backing=("test_a", "test_b")
    )
    return Grammar(turn_grammar(shape))


def test_a_criterion_naming_a_check_keeps_its_words_under_the_grammar() -> None:
    tools = role_tools(Role.EVALUATOR)
    shape = TurnShape(Role.EVALUATOR, tools, ("AC1", "AC2"), backing=("test_a",), checked=("AC2",))
    grammar = Grammar(turn_grammar(shape))
    assert grammar.accepts(_said("test_a passed", "11 passed, ruff clean"))
    assert not grammar.accepts(_said("all good", "11 passed"))


def _said(first: str, second: str, met: str = "true") -> str:
    return (
        '<verdict status="PASS">\n  <reason_code>ALL_MET</reason_code>\n'
        f'  <criterion id="AC1" met="true">{first}</criterion>\n'
        f'  <criterion id="AC2" met="{met}">{second}</criterion>\n'
        "  <summary>s</summary>\n</verdict>"
    )


def test_the_grammar_has_a_met_criterion_name_a_test_of_its_own_that_passed(backed: Grammar) -> None:
    assert backed.accepts(_said("test_a passed", "test_b passed"))
    assert not backed.accepts(_said("test_a passed", "all good"))  # met, naming nothing
    assert not backed.accepts(_said("test_a passed", "test_c passed"))  # not a test that passed
    assert backed.accepts(_said("test_a passed", "words are not folded", met="false"))  # unmet: free text
    free = Grammar(turn_grammar(TurnShape(Role.EVALUATOR, role_tools(Role.EVALUATOR), ("AC1", "AC2"))))
    assert free.accepts(_said("all good", "fine"))  # no run listed tests: the gate and the question hold it
