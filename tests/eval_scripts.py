"""Scripted arms for `pse eval` tests, on real HumanEval problems (0: has_close_elements, 53: add).

Each function returns a cassette's turns. The scripts tell the experiment's story with exact outcomes:
  * `single` on HumanEval-0 writes a solution that only compares neighbours, tests it with the
    docstring's examples (which it passes), and approves itself: a false pass;
  * `pse` on HumanEval-0 gets the same buggy solution from its Specialist, but its Evaluator writes its
    own test (two close numbers that are not neighbours), sees it fail, returns PARTIAL; the revised
    solution passes: a true pass in 2 cycles;
  * a lying Evaluator (`lying_evaluator`) runs only the Specialist's tests and says PASS: with the hard
    gates off (`pse-nogates`) that is a false pass; with them on, the PASS is refused;
  * HumanEval-53 is solved correctly by every arm in one cycle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pse.protocol import render_tool_calls

Turn = dict[str, str]

HE0_HEADER = "from typing import List\n\n\n"
HE0_BUGGY = HE0_HEADER + (
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    '    """True when two numbers of the list are closer to each other than threshold."""\n'
    "    return any(abs(a - b) < threshold for a, b in zip(numbers, numbers[1:]))\n"
)
HE0_FIXED = HE0_HEADER + (
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    '    """True when two numbers of the list are closer to each other than threshold."""\n'
    "    ordered = sorted(numbers)\n"
    "    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))\n"
)
HE0_TESTS = (
    "from solution import has_close_elements\n\n\n"
    "def test_docstring_examples():\n"
    "    assert has_close_elements([1.0, 2.0, 3.0], 0.5) is False\n"
    "    assert has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3) is True\n"
)
HE0_ACCEPTANCE = (
    "from solution import has_close_elements\n\n\n"
    "def test_close_numbers_that_are_not_neighbours():\n"
    "    assert has_close_elements([5.9, 1.0, 5.0], 0.95) is True\n\n\n"
    "def test_no_pair_close_enough():\n"
    "    assert has_close_elements([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) is False\n"
)
HE53_SOLUTION = 'def add(x: int, y: int):\n    """Add two numbers x and y."""\n    return x + y\n'
HE53_TESTS = "from solution import add\n\n\ndef test_examples():\n    assert add(2, 3) == 5\n    assert add(5, 7) == 12\n"
HE53_ACCEPTANCE = (
    "from solution import add\n\n\n"
    "def test_the_docstrings_examples():\n"
    "    assert add(2, 3) == 5\n\n\n"
    "def test_add_is_commutative_and_exact():\n"
    "    assert add(7, 5) == add(5, 7) == 12\n"
    "    assert add(0, 1) == 1\n"
)

PLAN = """<plan>
  <goal>solution.py completes {name} as PROBLEM specifies; test_solution.py tests it; pytest passes</goal>
  <step id="S1">Write solution.py with the completed function and test_solution.py</step>
  <criterion id="AC1">{name} returns what the docstring's examples show</criterion>
  <criterion id="AC2">{name} is right on every input the docstring specifies, not only its examples</criterion>
  <criterion id="AC3">pytest passes on the workspace</criterion>
  <output path="solution.py"/>
  <output path="test_solution.py"/>
</plan>"""
REPORT = (
    "<report>\nArtifacts: solution.py, test_solution.py\nEvidence: both files written (write_file ok)\n"
    "Assumptions: none\nUnresolved: none\n</report>"
)


def _verdict(status: str, code: str, met: dict[str, str], summary: str) -> str:
    criteria = "\n".join(
        f'  <criterion id="{cid}" met="{"true" if not finding.startswith("!") else "false"}">'
        f"{finding.lstrip('!')}</criterion>"
        for cid, finding in met.items()
    )
    return (
        f'<verdict status="{status}">\n  <reason_code>{code}</reason_code>\n{criteria}\n'
        f"  <summary>{summary}</summary>\n</verdict>"
    )


def _write(*files: tuple[str, str]) -> str:
    return "I will write the files.\n" + render_tool_calls(
        [("write_file", {"path": p, "content": c}) for p, c in files]
    )


def _pytest(*own: tuple[str, str]) -> str:
    calls: list[tuple[str, dict[str, str]]] = [("write_file", {"path": p, "content": c}) for p, c in own]
    return "I will check it myself.\n" + render_tool_calls([*calls, ("run_pytest", {"target": "."})])


PASS_ALL = {"AC1": "examples hold (pytest)", "AC2": "the acceptance tests pass", "AC3": "pytest passed"}
"""A PASS whose criteria name none of the Evaluator's tests: the lying Evaluator's (and the single agent's)."""
PASS_HE0 = {
    "AC1": "test_no_pair_close_enough passed",
    "AC2": "test_close_numbers_that_are_not_neighbours passed",
    "AC3": "pytest passed",
}
"""A PASS whose criteria each name a test of the Evaluator's own that passed (`criteria_backed`)."""
PASS_HE53 = {
    "AC1": "test_the_docstrings_examples passed",
    "AC2": "test_add_is_commutative_and_exact passed",
    "AC3": "pytest passed",
}


def pse_he0() -> list[Turn]:
    """The PSE loop on HumanEval-0: the Evaluator's own test catches the neighbours-only bug."""
    return [
        {"role": "Planner", "content": PLAN.format(name="has_close_elements")},
        {
            "role": "Specialist",
            "content": _write(("solution.py", HE0_BUGGY), ("test_solution.py", HE0_TESTS)),
        },
        {"role": "Specialist", "content": REPORT},
        {"role": "Evaluator", "content": _pytest(("@evaluation/test_criteria.py", HE0_ACCEPTANCE))},
        {
            "role": "Evaluator",
            "content": _verdict(
                "PARTIAL",
                "TESTS_FAILING",
                {
                    "AC1": "the docstring examples pass",
                    "AC2": "!test_close_numbers_that_are_not_neighbours fails: [5.9, 1.0, 5.0], 0.95 gave False",
                    "AC3": "!pytest: 1 failed",
                },
                "Only neighbouring numbers are compared.",
            ),
        },
        {"role": "Specialist", "content": _write(("solution.py", HE0_FIXED))},
        {"role": "Specialist", "content": REPORT},
        {"role": "Evaluator", "content": _pytest()},
        {"role": "Evaluator", "content": _verdict("PASS", "ALL_MET", PASS_HE0, "Every criterion is met.")},
    ]


def pse_he53() -> list[Turn]:
    """The PSE loop on HumanEval-53: right the first time."""
    return [
        {"role": "Planner", "content": PLAN.format(name="add")},
        {
            "role": "Specialist",
            "content": _write(("solution.py", HE53_SOLUTION), ("test_solution.py", HE53_TESTS)),
        },
        {"role": "Specialist", "content": REPORT},
        {"role": "Evaluator", "content": _pytest(("@evaluation/test_criteria.py", HE53_ACCEPTANCE))},
        {"role": "Evaluator", "content": _verdict("PASS", "ALL_MET", PASS_HE53, "Every criterion is met.")},
    ]


def lying_evaluator_he0() -> list[Turn]:
    """The Specialist's buggy solution, and an Evaluator that runs only the Specialist's tests and says PASS,
    and says it again when asked for tests of its own."""
    lie = {"role": "Evaluator", "content": _verdict("PASS", "ALL_MET", PASS_ALL, "Looks complete.")}
    return [
        {"role": "Planner", "content": PLAN.format(name="has_close_elements")},
        {
            "role": "Specialist",
            "content": _write(("solution.py", HE0_BUGGY), ("test_solution.py", HE0_TESTS)),
        },
        {"role": "Specialist", "content": REPORT},
        {"role": "Evaluator", "content": _pytest()},
        lie,
        lie,
    ]


def single(solution: str, tests: str) -> list[Turn]:
    """The single agent: writes, runs its own tests, approves itself."""
    return [
        {"role": "Agent", "content": _write(("solution.py", solution), ("test_solution.py", tests))},
        {"role": "Agent", "content": _pytest()},
        {
            "role": "Agent",
            "content": _verdict(
                "PASS",
                "ALL_MET",
                {"R1": "solution.py is written", "R2": "my tests pass (pytest)"},
                "Done and checked.",
            ),
        },
    ]


def write_cassettes(root: Path, arms: dict[str, dict[str, list[Turn]]]) -> Path:
    """Write `root/<arm>/<instance>.json` for each arm's scripts; return root."""
    for arm, scripts in arms.items():
        (root / arm).mkdir(parents=True, exist_ok=True)
        for instance, turns in scripts.items():
            data: dict[str, Any] = {"version": 1, "turns": turns}
            (root / arm / f"{instance}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return root


def standard_arms() -> dict[str, dict[str, list[Turn]]]:
    """The four arms of the experiment on the two problems (pse-history replays pse's turns)."""
    return {
        "pse": {"HumanEval-0": pse_he0(), "HumanEval-53": pse_he53()},
        "single": {
            "HumanEval-0": single(HE0_BUGGY, HE0_TESTS),
            "HumanEval-53": single(HE53_SOLUTION, HE53_TESTS),
        },
        "pse-nogates": {"HumanEval-0": lying_evaluator_he0(), "HumanEval-53": pse_he53()},
        "pse-history": {"HumanEval-0": pse_he0(), "HumanEval-53": pse_he53()},
    }
