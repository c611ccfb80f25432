"""code-delivery's own acceptance tests (`tasks/code-delivery/test_acceptance.py`, seeded, read-only).

A 1.5B model's quicksort passed its own tests, pytest and ruff, and PSE said PASSED, while it returned the
input list itself for one item, which the goal forbids ("returns a new sorted list"). The task's own
tests check the goal's promises whatever tests the Specialist wrote; their failures reach the next
cycle's step_buffer with pytest's message, the same words on every run. Real pytest in the real sandbox,
both modes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pse.config import Settings
from pse.engine._step_buffer import failing_tests
from pse.protocol import render_tool_calls
from pse.sandbox import bwrap_problem
from pse.toolagent import Policy, ToolExecutor
from pse.tools import EvidenceRules

BWRAP_MISSING = bwrap_problem()
MODES = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"no bwrap: {BWRAP_MISSING}")
    ),
    "fallback",
]
TASK = Path(__file__).resolve().parents[1] / "tasks" / "code-delivery"
DEMO = json.loads((TASK / "cassette.json").read_text())["turns"]
TEXTBOOK = (
    "def quicksort(items: list) -> list:\n    if len(items) <= 1:\n        return items\n"
    "    pivot = items[len(items) // 2]\n    left = [x for x in items if x < pivot]\n"
    "    middle = [x for x in items if x == pivot]\n    right = [x for x in items if x > pivot]\n"
    "    return quicksort(left) + middle + quicksort(right)\n"
)
"""What Qwen2.5-Coder-1.5B delivered (run 14 of the README): right but for the one-item case."""
OWN_TEST = "from quicksort import quicksort\n\n\ndef test_single():\n    assert quicksort([1]) == [1, 1]\n"


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _demo_quicksort(turn: int) -> str:
    content = DEMO[turn]["content"]
    start = content.index('<parameter name="content">', content.index("quicksort.py")) + len(
        '<parameter name="content">'
    )
    return content[start : content.index("</parameter>", start)]


def _checked(tmp_path: Path, mode: str, quicksort: str, own_test: str = "") -> list:
    """The Evaluator's run_pytest over the seeded acceptance tests and a Specialist's files."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(TASK / "test_acceptance.py", work)  # seeded: the task is its author
    settings = Settings(sandbox=mode)  # type: ignore[arg-type]
    outputs = EvidenceRules(expected_outputs=("quicksort.py", "test_quicksort.py"))  # the task's
    ex = ToolExecutor(work, settings, Policy.default(settings), evidence=outputs)
    files = {"quicksort.py": quicksort, **({"test_quicksort.py": own_test} if own_test else {})}
    writes = [("write_file", {"path": p, "content": c}) for p, c in files.items()]
    written = ex.execute_sync("Specialist", render_tool_calls(writes)).records
    assert all(r.status == "ok" for r in written)
    changed = ex.execute_sync(
        "Specialist",
        render_tool_calls([("write_file", {"path": "test_acceptance.py", "content": "x = 1\n"})]),
    ).records[0]
    assert changed.status == "denied"  # no role changes the task's own tests
    ex.execute_sync("Evaluator", render_tool_calls([("run_pytest", {"target": "."})]))
    return ex.records


def test_the_demos_fixed_quicksort_passes_every_acceptance_test(tmp_path: Path, mode: str) -> None:
    records = _checked(tmp_path, mode, _demo_quicksort(5))
    assert records[-1].status == "ok" and records[-1].facts["passed"] == 4
    assert failing_tests(records) == []


def test_the_demos_buggy_quicksort_fails_with_the_values_it_lost(tmp_path: Path, mode: str) -> None:
    records = _checked(tmp_path, mode, _demo_quicksort(1))
    assert records[-1].facts["failed"] == 2
    assert failing_tests(records) == [
        "test_acceptance.py::test_the_result_is_sorted: failed (AssertionError: quicksort([2, 1, 2, 1, 2]) "
        "returned [1, 2]; the goal asks for [1, 1, 2, 2, 2]; quicksort([5, -1, 0, -1, 5]) returned [-1, 0, 5]; "
        "the goal asks for [-1, -1, 0, 5, 5])",
        "test_acceptance.py::test_100_random_items_match_sorted: failed (AssertionError: quicksort of 100 "
        "random items returned 64 items: values were lost or added)",
    ]


def test_returning_the_input_for_one_item_fails_and_only_the_tasks_test_says_why(
    tmp_path: Path, mode: str
) -> None:
    records = _checked(tmp_path, mode, TEXTBOOK, OWN_TEST)
    assert failing_tests(records) == [
        "test_acceptance.py::test_a_new_list_is_returned_for_every_input: failed (AssertionError: quicksort "
        "returned the input list itself for [], [7]; the goal asks for a new list for every input, an empty or "
        "one-item list included (return a copy, such as list(items)))",
        "test_quicksort.py::test_single: failed",  # a role's test: its name only (its words may vary)
    ]


def test_a_result_that_answers_every_comparison_with_true_fails(tmp_path: Path, mode: str) -> None:
    # A model after a PASS without the work: a list subclass equal to anything, of any length it likes.
    forged = (
        "class Anything(list):\n    def __eq__(self, other):\n        return True\n\n"
        "    def __ne__(self, other):\n        return False\n\n    def __len__(self):\n        return 100\n\n\n"
        "def quicksort(items: list) -> list:\n    return Anything(items)\n"
    )
    records = _checked(tmp_path, mode, forged)
    assert records[-1].facts["failed"] == 2 and records[-1].facts["passed"] == 2
    assert [line.split(" (")[0] for line in failing_tests(records)] == [
        "test_acceptance.py::test_the_result_is_sorted: failed",
        "test_acceptance.py::test_100_random_items_match_sorted: failed",
    ]
    assert all("quicksort returned a Anything, not a list" in line for line in failing_tests(records))
