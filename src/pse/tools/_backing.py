"""The judge's own tests, by name: what a criterion it marks met names as the evidence that shows it.

ARCHITECTURE.md's verdict writes `<criterion id="AC1" met="true">test_empty passes</criterion>`. Nothing
held a verdict to that: the 1.5B model's Evaluator marked all five criteria of held-out top-words met on
one test of its own, whose one case a `Counter(text.split())` passes (no case folding, no ties), and the
PASS stood, false (heldout-17). A met criterion now names a test of the judge's own that passed, one
test per criterion (`engine._gates`); run_pytest lists the judge's tests by name after its sessions
(`named_line`), where the judge reads the names and its verdict grammar offers them (`passed_names`).

A name is a test function's (`test_ties`), without its file, class or parameters: what a model writes.
A name passed only when every case of it passed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "OWN_TESTS",
    "for_criterion",
    "name_of_test",
    "named_line",
    "named_outcomes",
    "names_check",
    "passed_names",
    "unbacked",
]

OWN_TESTS = "[your tests, by name: "
"""How run_pytest's result lists the judge's own tests and how each went (`named_line`)."""

_NAMED = re.compile(r"^\[your tests, by name: ([^\]\n]*)\]$", re.MULTILINE)
_HOLLOW = "asserts nothing of the work"
_ITEM = re.compile(rf"^([A-Za-z_][A-Za-z0-9_]*) (passed|failed|errors|skipped|{_HOLLOW})$")


def name_of_test(node: str) -> str:
    """A test's function name from its node id: `@evaluation/test_x.py::TestA::test_b[1-2]` → `test_b`."""
    return node.split("::")[-1].split("[", 1)[0]


def named_outcomes(
    cases: Iterable[Mapping[str, object]], author: str, hollow: Iterable[str] = ()
) -> dict[str, str]:
    """`author`'s tests among `cases` (run_pytest's `tests` facts), by name, in order, with how each went:
    `passed` only when every case of that name passed, else the first other outcome; a passing test
    among `hollow` (`_own_tests.hollow_tests`) `asserts nothing`: it passes on any work."""
    named: dict[str, str] = {}
    for case in cases:
        if case.get("author") != author:
            continue
        name, outcome = name_of_test(str(case.get("test", ""))), str(case.get("outcome", ""))
        if named.get(name, "passed") == "passed":
            named[name] = outcome
    empty = set(hollow)
    return {name: _HOLLOW if name in empty and how == "passed" else how for name, how in named.items()}


def named_line(named: Mapping[str, str]) -> str:
    """The line run_pytest's result ends with when the judge has tests of its own."""
    listed = ", ".join(f"{name} {outcome}" for name, outcome in named.items()) or "none"
    return f"{OWN_TESTS}{listed}]"


def passed_names(text: str) -> tuple[str, ...]:
    """The names the last such line in `text` (a tool result) lists as passed."""
    lines = _NAMED.findall(text)
    if not lines:
        return ()
    items = (_ITEM.match(item.strip()) for item in lines[-1].split(","))
    return tuple(m.group(1) for m in items if m is not None and m.group(2) == "passed")


def for_criterion(name: str, cid: str) -> bool:
    """Whether the test `name` is named for the criterion `cid`: `test_ac2`, `test_AC2_ties` for AC2 (not
    `test_ac21`). Such a test backs its criterion whatever the verdict's words name: asked for a test per
    criterion, the 1.5B model wrote its one test function again, bigger, under the same name
    (HumanEval-1); given the names to write, it copies them."""
    return re.match(rf"test_{re.escape(cid)}(?![0-9])", name, re.IGNORECASE) is not None


def names_check(text: str, check: str) -> bool:
    """Whether `text` (a plan's criterion) names the check `check`, as itself or as its tool
    (`pytest`, `run_pytest`, `Pytest`)."""
    return re.search(rf"(?<![\w.])(?:run_)?{re.escape(check)}(?!\w)", text, re.IGNORECASE) is not None


def unbacked(
    findings: Mapping[str, str], passed: Sequence[str], checked: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """The criteria among `findings` (id → what the verdict says of a criterion it marks met) backed by
    none of the `passed` test names it names or named for it (`for_criterion`), nor by a required check
    its plan text names (`checked`:
    id → those checks; "pytest passes on the workspace" is the check's to show, and its gate does), one
    each: a test or a check two criteria name backs one of them.

    Which backs which criterion is a matching (Kuhn's augmenting paths), so that the order the criteria
    name them in never leaves one unbacked that another assignment could back."""
    wants = {
        cid: [
            *(name for name in passed if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", finding)),
            *(name for name in passed if for_criterion(name, cid)),
            *(f"check:{check}" for check in (checked or {}).get(cid, ())),
        ]
        for cid, finding in findings.items()
    }
    backs: dict[str, str] = {}  # test name → the criterion it backs

    def place(cid: str, tried: set[str]) -> bool:
        for name in wants[cid]:
            if name not in tried:
                tried.add(name)
                if name not in backs or place(backs[name], tried):
                    backs[name] = cid
                    return True
        return False

    return [cid for cid in wants if not place(cid, set())]
