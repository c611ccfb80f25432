"""The Evaluator's own tests (`pse.tools._own_tests`): a workspace test copied under any name, or a
workspace test module imported, is not its own; a test with a case of its own is. A failure of its own
test on the test's own code is told apart from a failure on the work (`code_faults`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from attack_support import FIXED, MODES, PLAN, TESTS, own_tests_task, run_attack
from pse.engine._workspace import outputs_note
from pse.protocol import render_tool_calls
from pse.tools._own_tests import borrowed_tests, code_faults, hollow_tests
from sandbox_support import evaluation_context


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


THEIRS = """import pytest
from slug import slugify


def test_words():
    assert slugify("Hello World") == "hello-world"


class TestEdges:
    @pytest.mark.parametrize("title", ["", "!!"])
    def test_empty(self, title):
        assert slugify(title) == ""
"""


def test_a_copy_under_any_name_or_an_import_is_borrowed_and_a_case_of_its_own_is_not(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_slug.py").write_text(THEIRS)
    (tmp_path / "slug.py").write_text("def test_helper():\n    pass\n")  # no test file: never compared
    renamed = THEIRS.replace("def test_words():", 'def test_mine():\n    """Mine, honest."""')
    assert borrowed_tests(renamed, tmp_path) == [
        "test_mine is test_words of tests/test_slug.py",
        "test_empty is test_empty of tests/test_slug.py",
    ]
    method_as_function = (
        "import pytest\nfrom slug import slugify\n\n\n"
        '@pytest.mark.parametrize("title", ["", "!!"])\ndef test_blank(self, title):\n'
        '    assert slugify(title) == ""\n'
    )
    assert borrowed_tests(method_as_function, tmp_path) == ["test_blank is test_empty of tests/test_slug.py"]
    assert borrowed_tests("from tests.test_slug import *\n", tmp_path) == ["it imports tests.test_slug"]
    assert borrowed_tests("import conftest, test_slug\n", tmp_path) == ["it imports test_slug"]
    own = THEIRS.replace('"Hello World") == "hello-world"', '"A  b") == "a-b"').replace('"!!"', '"?"')
    assert borrowed_tests(own, tmp_path) == []
    assert borrowed_tests("def test_x(:\n", tmp_path) == []  # the write's own note says it does not parse


def test_a_workspace_test_reached_through_a_link_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_secret.py").write_text(THEIRS)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "test_link.py").symlink_to(outside / "test_secret.py")
    (workspace / "linked").symlink_to(outside)
    assert borrowed_tests(THEIRS, workspace) == []


def test_an_evaluator_that_owes_its_own_tests_is_shown_the_specialists_by_name_only(tmp_path: Path) -> None:
    """Shown the Specialist's test file, the 1.5B model's Evaluator wrote it back as its own on 9 of 12
    held-out test files. Where its own tests are owed, a test file opens its phase by its tests' names."""
    (tmp_path / "slug.py").write_text("def slugify(title):\n    return title\n")
    (tmp_path / "test_slug.py").write_text(THEIRS)
    (tmp_path / "test_broken.py").write_text("def test_x(:\n")
    paths = ["slug.py", "test_slug.py", "test_broken.py"]
    blind = outputs_note(tmp_path, paths, blind=True) or ""
    assert "def slugify(title):" in blind
    assert "assert slugify" not in blind
    assert (
        "test_slug.py: the Specialist's tests, named but not shown, so that yours are your own: test_words, "
        "test_empty (read_file shows them)"
    ) in blind
    assert "test_broken.py: a test file that does not parse as Python (read_file shows it)" in blind
    assert 'assert slugify("Hello World")' in (outputs_note(tmp_path, paths) or "")


TOOL = "a tool is called with <tool_calls>, never from a test"
SOURCE = "what a module's text holds says nothing of what it does; call its code and assert what the task says it returns"


@pytest.mark.parametrize(
    ("source", "failures", "faults"),
    [
        # held-out roman: a tool asked of pytest at module level; the module could not be collected
        ("import pytest\nfrom roman import to_roman\n\n\ndef test_a():\n    assert to_roman(1) == 'I'\n\n\n"
         "pytest.run_pytest()\n", {"": "collection failure: AttributeError: module 'pytest' has no attribute "
         "'run_pytest'"}, [f"t.py line 9 asks pytest for run_pytest, which pytest does not have: {TOOL}"]),
        # held-out top-words: a tool called as Python inside a test
        ("from words import top\n\n\ndef test_a():\n    run_pytest(target='.')\n    assert top('a') == ['a']\n",
         {"test_a": "NameError: name 'run_pytest' is not defined"}, [f"t.py calls run_pytest, a tool: {TOOL}"]),
        ("def test_a():\n    assert helper(1)\n", {"test_a": "NameError: name 'helper' is not defined"},
         ["t.py reads helper, which it never imports or defines"]),
        ("import os\n\n\ndef test_a():\n    assert os.path.joinn('a')\n",
         {"test_a": "AttributeError: module 'os' has no attribute 'path'"}, []),  # not what the file asks
        # held-out csv-mean: a test taking a parameter no fixture provides
        ("def test_a(obj):\n    assert obj\n", {"test_a": "file /pse/evaluation/t.py, line 1"},
         ["t.py::test_a takes parameters no fixture provides: a test takes none unless a fixture of that name "
          "is defined"]),
        ("def test_a(:\n", {"": "collection failure: SyntaxError: invalid syntax"},
         ["t.py does not parse as Python: invalid syntax (line 1: def test_a(:)"]),
        # heldout-21 top-words and slugify: a failed test comparing a module's text with a copy of it
        ("from words import top\n\n\ndef test_a():\n    with open('words.py') as f:\n        "
         "assert f.read() == 'def top(text):\\n    return []\\n'\n    assert top('a') == ['a']\n\n\n"
         "def test_b():\n    assert top('') == []\n",
         {"test_a": "AssertionError: the file does not match", "test_b": "AssertionError: assert None == []"},
         [f"t.py::test_a reads the text of words.py: {SOURCE}"]),
        ("from pathlib import Path\n\n\nclass TestText:\n    def test_a(self):\n        "
         "assert Path('slug.py').read_text() == ''\n",
         {"TestText::test_a": "AssertionError"}, [f"t.py::test_a reads the text of slug.py: {SOURCE}"]),
    ],
)  # fmt: skip
def test_a_test_failing_on_its_own_code_is_told_from_one_failing_on_the_work(
    source: str, failures: dict[str, str], faults: list[str]
) -> None:
    assert code_faults("t.py", source, failures) == faults


@pytest.mark.parametrize(
    ("source", "failures"),
    [
        # the tested code's failures, whatever the test's code: each is the work's
        ("from roman import to_roman\n\n\ndef test_a():\n    assert to_roman(4) == 'IV'\n",
         {"test_a": "AssertionError: assert 'IIII' == 'IV'"}),
        ("from roman import to_roman\n\n\ndef test_a():\n    assert to_roman(4) == 'IV'\n",
         {"test_a": "NameError: name 'numerals' is not defined"}),  # raised in roman.py: the file binds all
        ("from roman import *\n\n\ndef test_a():\n    assert to_roman(4) == 'IV'\n",
         {"test_a": "NameError: name 'to_roman' is not defined"}),  # the module defines no to_roman
        ("import pytest\nfrom m import f\n\n\ndef test_a():\n    with pytest.raises(ValueError):\n        f()\n",
         {"test_a": "Failed: DID NOT RAISE <class 'ValueError'>"}),
        ("def test_a(:\n", {}),  # no failure: nothing to explain
        # a test reading a data file, or a module's text in a test that passed, is no fault
        ("from m import f\n\n\ndef test_a():\n    assert f(open('data.csv').read()) == 1\n",
         {"test_a": "AssertionError: assert 2 == 1"}),
        ("def test_a():\n    assert open('m.py').read()\n\n\ndef test_b():\n    assert 0\n",
         {"test_b": "AssertionError"}),
    ],
)  # fmt: skip
def test_a_failure_on_the_work_is_no_fault_of_the_test(source: str, failures: dict[str, str]) -> None:
    assert code_faults("t.py", source, failures) == []


BROKEN_OWN = (
    "from quicksort import quicksort\n\n\ndef test_mine():\n    assert quicksort([2, 2, 1]) == [1, 2, 2]\n\n\n"
    "pytest.run_pytest()\n"
)
"""Held-out roman's Evaluator file: a test of its own, then a tool asked of pytest at module level (its
`import pytest` PSE adds at the write, line 1)."""
MINE = (
    "from quicksort import quicksort\n\n\ndef test_mine():\n    assert quicksort([2, 2, 1]) == [1, 2, 2]\n\n\n"
    "def test_cases():\n    assert quicksort([]) == [] and quicksort([3, 1]) == [1, 3]\n"
)
OWN_PASS = (
    '<verdict status="PASS">\n  <reason_code>ALL_MET</reason_code>\n'
    '  <criterion id="AC1" met="true">test_mine passed</criterion>\n'
    '  <criterion id="AC2" met="true">test_cases passed</criterion>\n'
    '  <criterion id="AC3" met="true">pytest: every test passed</criterion>\n'
    '  <criterion id="AC4" met="true">ruff: All checks passed!</criterion>\n'
    "  <summary>All 4 criteria met, each by a test of mine or its check.</summary>\n</verdict>"
)
"""The demo's PASS, each criterion naming a test of the Evaluator's own (AC3 and AC4 name their checks)."""
PARTIAL = (
    '<verdict status="PARTIAL">\n  <reason_code>TESTS_FAILING</reason_code>\n'
    '  <criterion id="AC1" met="false">pytest failed</criterion>\n  <summary>tests fail</summary>\n</verdict>'
)


CHECKS = [("run_pytest", {"target": "."}), ("run_ruff", {"target": "."})]


def _right_work_then(*evaluator: str) -> list[dict[str, str]]:
    """The turns of a right module and its passing tests, written and reported, then the Evaluator's."""
    write = render_tool_calls(
        [("write_file", {"path": "quicksort.py", "content": FIXED}),
         ("write_file", {"path": "test_quicksort.py", "content": TESTS})]
    )  # fmt: skip
    return [
        {"role": "Planner", "content": PLAN},
        {"role": "Specialist", "content": write},
        {"role": "Specialist", "content": "<report>Artifacts: quicksort.py, test_quicksort.py</report>"},
        *({"role": "Evaluator", "content": e} for e in evaluator),
    ]


def _mine(content: str) -> str:
    """The Evaluator's turn: its test file `@evaluation/test_mine.py`, then the checks."""
    return render_tool_calls(
        [("write_file", {"path": "@evaluation/test_mine.py", "content": content}), *CHECKS]
    )


def _own_run(tmp_path: Path, mode: str, *evaluator: str) -> tuple[Any, dict[str, Any]]:
    """The own-tests task on right work, the Evaluator's turns `evaluator`: the summary and the trace."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": _right_work_then(*evaluator)}))
    return run_attack(tmp_path, mode, script, "own-tests", tasks_dir=own_tests_task(tmp_path))


def test_a_partial_over_its_own_tests_defect_is_asked_again_and_right_work_passes(
    tmp_path: Path, mode: str
) -> None:
    """The module is right and the Specialist's tests pass; the Evaluator's own file fails at collection on
    its own code. Its PARTIAL would send the Specialist to fix right code (on roman, the 1.5B model
    emptied it): the run names the fault, the PARTIAL is asked about once, and the Evaluator's fixed file
    passes the work in its first cycle."""
    summary, trace = _own_run(tmp_path, mode, _mine(BROKEN_OWN), PARTIAL, _mine(MINE), OWN_PASS)
    first = next(c for c in trace["cycles"][0]["tool_calls"] if c["tool"] == "run_pytest")
    fault = "@evaluation/test_mine.py line 9 asks pytest for run_pytest, which pytest does not have"
    assert [f["file"] for f in first["facts"]["own_faults"]] == ["@evaluation/test_mine.py"]
    assert first["facts"]["own_faults"][0]["fault"].startswith(fault)
    assert "[your own tests failed on their own code, not on the work: " + fault in first["output"]
    asked = [r["error"] for r in trace["cycles"][0]["repairs"] if "Your verdict rests on a run" in r["error"]]
    assert len(asked) == 1 and fault in asked[0]
    assert (summary.outcome, len(trace["cycles"])) == ("PASSED", 1)


def test_an_own_test_file_that_does_not_parse_is_left_out_and_right_work_passes(
    tmp_path: Path, mode: str
) -> None:
    """Held-out roman (heldout-16): the Evaluator's test file that did not parse in cycle 2 stayed in its
    area, failed cycle 3's run too, and the 1.5B model wrote its next tests under a new name. A file that
    does not parse tests nothing: the run leaves it out and says so (`own_faults`), and the Evaluator's
    other file, which passes, is the independent evidence the gate needs."""
    broken = ("write_file", {"path": "@evaluation/test_broken.py", "content": "def test_a(:\n"})
    mine = ("write_file", {"path": "@evaluation/test_mine.py", "content": MINE})
    summary, trace = _own_run(tmp_path, mode, render_tool_calls([broken, mine, *CHECKS]), OWN_PASS)
    run = next(c for c in trace["cycles"][0]["tool_calls"] if c["tool"] == "run_pytest")
    fault = "@evaluation/test_broken.py does not parse as Python: invalid syntax (line 1: def test_a(:)"
    assert run["facts"]["own_faults"] == [{"file": "@evaluation/test_broken.py", "fault": fault}]
    assert f"[left out of this run: {fault}: a test file that does not parse tests nothing" in run["output"]
    assert {t["test"].partition("::")[0] for t in run["facts"]["tests"]} == {
        "test_quicksort.py",
        "@evaluation/test_mine.py",
    }
    assert (summary.outcome, len(trace["cycles"])) == ("PASSED", 1)


def test_own_tests_none_of_which_parse_are_no_evidence(tmp_path: Path, mode: str) -> None:
    """Left out, a file that does not parse is no test of the Evaluator's either: with only such files,
    the Evaluator's run has no session of its own, and the `independent_tests` gate cannot pass."""
    out = _own_pytest(tmp_path, mode, "@evaluation/test_broken.py", "def test_a(:\n")
    assert out.status == "error" and out.facts["passed"] == 0
    assert [f["file"] for f in out.facts["own_faults"]] == ["@evaluation/test_broken.py"]
    assert "nothing ran" in out.output


def test_the_evaluation_area_takes_tests_not_a_copy_of_a_module(tmp_path: Path) -> None:
    """heldout-8 top-words: the 1.5B model's Evaluator wrote the Specialist's `words.py` into its area as
    `@evaluation/words.py`, ran pytest and said PASS on no test of its own. A module in the evaluation
    area is refused, with the test file to write instead; its tests, files under tests/ and
    data that is not Python are written."""
    from pse.tools._files import write_file

    ctx, _, area = evaluation_context(tmp_path, {"words.py": "def top_words(text, n):\n    return []\n"})
    with pytest.raises(ValueError, match="the evaluation area holds your own tests") as refused:
        write_file(ctx, "@evaluation/words.py", "def top_words(text, n):\n    return []\n")
    assert "write tests that import it, in @evaluation/test_words.py" in str(refused.value)
    assert not (area / "words.py").exists()
    for path in ("test_words.py", "words_test.py", "tests/helpers.py", "cases.json"):
        assert write_file(ctx, f"@evaluation/{path}", "X = 1\n").status == "ok", path


def test_run_pytest_on_a_file_of_the_evaluation_area_runs_that_own_test(tmp_path: Path, mode: str) -> None:
    """Held-out top-words: the 1.5B model's Evaluator wrote `@evaluation/test_top_words.py` and ran
    run_pytest on that very path; the tool looked for it among the workspace's tests, refused it as "no
    such test file", and the review went on with no run of its tests. A target in the evaluation area
    runs those own tests (no workspace test), a file of the area that is not there is refused with what
    to do, and a role without the area is refused as its file tools are."""
    import os

    from pse.exceptions import SandboxViolation
    from pse.sandbox import Sandbox, SandboxLimits
    from pse.tools import ToolContext, builtin_tools
    from pse.tools._files import write_file

    workspace, area = tmp_path / "ws", tmp_path / "evaluation"
    workspace.mkdir()
    area.mkdir()
    (workspace / "words.py").write_text("def top_words(text, n):\n    return []\n")
    (workspace / "test_words.py").write_text(
        "from words import top_words\n\n\ndef test_w():\n    assert 1 / 0\n"
    )
    box = Sandbox(workspace, SandboxLimits(timeout_s=60), mode)  # type: ignore[arg-type]
    ws = Path(os.path.realpath(workspace))
    ctx = ToolContext(ws, box, evaluation=Path(os.path.realpath(area)), evaluation_writable=True)
    mine = "from words import top_words\n\n\ndef test_empty():\n    assert top_words('', 1) == []\n\n\n"
    mine += "def test_one():\n    assert top_words('a a', 1) == [('a', 2)]\n"
    assert write_file(ctx, "@evaluation/test_top_words.py", mine).status == "ok"
    run_pytest = builtin_tools().get("run_pytest").function  # type: ignore[union-attr]
    out = run_pytest(ctx, target="@evaluation/test_top_words.py")
    assert out.facts["target"] == "@evaluation/test_top_words.py" and out.facts["report"] == "checker"
    assert [(t["test"], t["outcome"]) for t in out.facts["tests"]] == [
        ("@evaluation/test_top_words.py::test_empty", "passed"),
        ("@evaluation/test_top_words.py::test_one", "failed"),
    ]  # its own tests only: the workspace's failing test_w did not run
    node = run_pytest(ctx, target="@evaluation/test_top_words.py::test_empty")
    assert (node.status, node.facts["passed"], node.facts["failed"]) == ("ok", 1, 0)
    with pytest.raises(ValueError, match="holds no test file of your evaluation area"):
        run_pytest(ctx, target="@evaluation/test_other.py")
    specialist = ToolContext(ws, box)
    with pytest.raises(SandboxViolation, match="names the evaluation area"):
        run_pytest(specialist, target="@evaluation/test_top_words.py")
    everything = run_pytest(ctx, target=".")  # the full run still runs the workspace's and its own
    assert {t["test"].partition("::")[0] for t in everything.facts["tests"]} == {
        "test_words.py",
        "@evaluation/test_top_words.py",
    }


ONE_TEST = (
    "from quicksort import quicksort\n\n\ndef test_mine():\n    assert quicksort([2, 2, 1]) == [1, 2, 2]\n"
)
UNBACKED_PASS = OWN_PASS.replace("test_cases passed", "the six cases are covered")


def test_a_pass_whose_criterion_names_no_test_of_its_own_is_asked_then_passes_with_one(
    tmp_path: Path, mode: str
) -> None:
    """Held-out top-words (heldout-17): five criteria marked met on one test of the Evaluator's own,
    whose one case a wrong module passed. Here AC2 names none: the PASS is asked about once, the
    Evaluator writes the test AC2 lacked, names it, and the right work passes in its first cycle."""
    summary, trace = _own_run(tmp_path, mode, _mine(ONE_TEST), UNBACKED_PASS, _mine(MINE), OWN_PASS)
    cycle = trace["cycles"][0]
    asked = [r["error"] for r in cycle["repairs"] if "Your PASS came before the evidence" in r["error"]]
    assert len(asked) == 1
    assert "run_pytest with a test of your own for AC2: write `def test_ac2():`" in asked[0]
    assert "(your tests that passed: test_mine)" in asked[0]
    first = next(c for c in cycle["tool_calls"] if c["tool"] == "run_pytest")
    assert "[your tests, by name: test_mine passed]" in first["output"]
    assert (summary.outcome, len(trace["cycles"])) == ("PASSED", 1)
    backed = next(g for g in cycle["gate"]["results"] if g["name"] == "criteria_backed")
    assert backed["passed"]


def test_a_pass_that_names_no_test_of_its_own_again_is_refused_by_the_gate(tmp_path: Path, mode: str) -> None:
    """An Evaluator that, asked, sends the same PASS: the verdict stands, and the gate refuses it."""
    summary, trace = _own_run(tmp_path, mode, _mine(ONE_TEST), UNBACKED_PASS, UNBACKED_PASS)
    assert summary.outcome != "PASSED"
    cycle = trace["cycles"][0]
    assert cycle["result"] == "PARTIAL"
    assert cycle["result_reason"] == (
        "HARD_GATE: criteria_backed: met, naming no test of the Evaluator's own that passed (one test per "
        "criterion): AC2; its tests that passed: test_mine"
    )


HOLLOW = (
    "import math\nfrom quicksort import quicksort\n\n\ndef test_ac1():\n    pass\n\n\n"
    "def test_ac2():\n    assert math.sqrt(4) == 2\n\n\n"
    "def test_ac3():\n    assert quicksort([2, 1]) == [1, 2]\n"
)


def test_hollow_tests_are_those_that_assert_nothing_of_the_work() -> None:
    assert hollow_tests(HOLLOW) == ["test_ac1", "test_ac2"]
    unit = (
        "import unittest\nimport pytest\nimport quicksort as q\n\n\nclass TestQ(unittest.TestCase):\n"
        "    def test_a(self):\n        self.assertEqual(q.quicksort([]), [])\n\n"
        "    def test_b(self):\n        with pytest.raises(TypeError):\n            q.quicksort(None)\n\n"
        "    def test_c(self):\n        q.quicksort([1])\n"
    )
    assert hollow_tests(unit) == ["test_c"]  # it calls the work and asserts nothing


def test_a_test_that_asserts_nothing_of_the_work_backs_no_criterion(tmp_path: Path, mode: str) -> None:
    """Asked for `def test_ac2():`, a model can write `pass`: such a test passes on any work. run_pytest
    says so by name, and the gate takes it for no test (in both sandbox modes, the real ToolAgent)."""
    from pse.engine._gates import GatePolicy, evaluate_gates
    from pse.events import CriterionResult, PlanItem, PlanRecord, ToolCallRecord, VerdictRecord

    out = _own_pytest(tmp_path, mode, "@evaluation/test_q.py", HOLLOW)
    ws = tmp_path / "ws"
    assert (out.facts["passed"], out.facts["hollow"]) == (3, ["test_ac1", "test_ac2"])
    assert (
        "[your tests, by name: test_ac1 asserts nothing of the work, test_ac2 asserts nothing of the work, "
        "test_ac3 passed]"
    ) in out.output
    plan = PlanRecord(goal="g", criteria=[PlanItem(id=f"AC{i}", text=f"c{i}") for i in (1, 2, 3)])
    verdict = VerdictRecord(
        status="PASS",
        reason_code="ALL_MET",
        criteria=[CriterionResult(id=f"AC{i}", met=True, finding=f"test_ac{i} passed") for i in (1, 2, 3)],
    )
    call = ToolCallRecord(
        requester="Evaluator", tool="run_pytest", arguments={"target": "."}, decision="allowed", rule="r",
        status=out.status, facts=out.facts,
    )  # fmt: skip
    policy = GatePolicy(required_checks=("pytest",), independent_tests=True)
    gate = evaluate_gates(verdict=verdict, plan=plan, tool_calls=[call], policy=policy, workspace=ws)
    assert [f for f in gate.failures if f.startswith("criteria_backed")] == [
        "criteria_backed: met, naming no test of the Evaluator's own that passed (one test per criterion): "
        "AC1, AC2; its tests that passed: test_ac3"
    ]


def _own_pytest(tmp_path: Path, mode: str, path: str, content: str) -> Any:
    """run_pytest over a right quicksort.py and the Evaluator's test file `path` (the real ToolAgent's
    tools in sandbox `mode`)."""
    import os

    from pse.sandbox import Sandbox, SandboxLimits
    from pse.tools import ToolContext, builtin_tools
    from pse.tools._files import write_file

    workspace, area = tmp_path / "ws", tmp_path / "evaluation"
    workspace.mkdir()
    area.mkdir()
    (workspace / "quicksort.py").write_text(FIXED)
    box = Sandbox(workspace, SandboxLimits(timeout_s=60), mode)  # type: ignore[arg-type]
    ctx = ToolContext(
        Path(os.path.realpath(workspace)),
        box,
        evaluation=Path(os.path.realpath(area)),
        evaluation_writable=True,
        author=lambda where, _: "Evaluator" if where == "evaluation" else "task",
    )
    write_file(ctx, path, content)
    run_pytest = builtin_tools().get("run_pytest").function  # type: ignore[union-attr]
    return run_pytest(ctx, target=".")
