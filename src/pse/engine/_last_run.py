"""What the Evaluator's last `run_pytest` of a cycle found, as the ToolAgent recorded it (its facts, its
tests, the files of its own tests that failed on their own code), and what a revise writes first because
of it (`to_write_again`): the code tests of the task or of both authors failed on, a test file that did not
collect or failed alone. Read by the step_buffer's list of failing tests and by the revise brief.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pse.events import PlanRecord, ToolCallRecord
from pse.roles import WRITE_AGAIN, Role
from pse.tools import COLLECTION_FAILURE, Tool

__all__ = [
    "faulty_files",
    "is_faulty",
    "last_run",
    "last_run_fact",
    "last_tests",
    "outputs_to_write_again",
    "ran_with",
    "to_write_again",
]


def faulty_files(calls: Sequence[ToolCallRecord]) -> set[str]:
    """The Evaluator's own test files that its last `run_pytest` found failing on their own code (the
    run's `own_faults`, read from the files' code by the ToolAgent): a Specialist told of their failures
    "fixed" a module that was right (held-out roman, emptied)."""
    return {str(f.get("file")) for f in last_run_fact(calls, "own_faults")}


def is_faulty(test: dict[str, object], faulty: set[str]) -> bool:
    """A test of a file of `faulty` (or the Evaluator's module that could not be collected, named by no
    file)."""
    if not faulty or test.get("author") != Role.EVALUATOR:
        return False
    file = str(test.get("test", "")).partition("::")[0]
    return not file or file in faulty


def last_tests(calls: Sequence[ToolCallRecord]) -> list[dict[str, object]]:
    """The tests of the Evaluator's last `run_pytest` of a cycle, as the ToolAgent recorded them."""
    return last_run_fact(calls, "tests")


def last_run_fact(calls: Sequence[ToolCallRecord], fact: str) -> list[dict[str, object]]:
    """The records (dicts) of the list `fact` of the Evaluator's last `run_pytest` of a cycle."""
    found = last_run(calls).get(fact)
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []


def last_run(calls: Sequence[ToolCallRecord]) -> Mapping[str, object]:
    """The facts of the Evaluator's last `run_pytest` of a cycle (empty: it ran none)."""
    runs = [c for c in calls if c.requester == Role.EVALUATOR and c.tool == Tool.RUN_PYTEST]
    return runs[-1].facts if runs else {}


def to_write_again(
    calls: Sequence[ToolCallRecord], plan: PlanRecord, said: Callable[[list[str]], str]
) -> str:
    """The outputs a revise is to write again first, by the Evaluator's last run: the code that failed
    tests called, when those are a test the task gave (it stays as it is: only the code can change), or
    tests of both authors (the Specialist's, and the Evaluator's own that failed on the work, not on their
    own code): two independent checks fail on the same code, so the fault is most likely the code's; the
    Specialist's test files that pytest could not collect (they checked nothing); and, where no code is,
    the Specialist's test files that failed where every other test ran passed (`_tests_at_fault`).
    `said`: what the task says of those outputs. "" otherwise.

    Why: told its test failed at `assert slugify("Hello, World!") == "hello-world"`, a line of the task's
    own words, the 1.5B model's revise rewrote its test file and left `slug.py` as it was, wrong
    (heldout-12); told the task's acceptance test failed on `quicksort.py`, it copied that test into its
    own test file (code-delivery, CI); told its `test_account.py` could not be collected, it rewrote a
    right `account.py` four times and never the test file (heldout-14). The words `WRITE_AGAIN` are what
    the next turn's shape reads: its first file block is one of these outputs (`models._turn_shape`). The
    module is not shown: a model copies what it is shown."""
    modules, broken, wrong, given = _again(calls, plan)
    called = last_run(calls).get("exercised")
    again = modules + broken + wrong
    if not again:
        return ""
    one, it = len(again) == 1, "it" if len(again) == 1 else "them"
    reasons = []
    if modules:
        them = "it" if len(modules) == 1 else "them"
        reasons.append(
            f"the task's own tests failed on {them}, the code they call, and they stay as they are: the code "
            "must change."
            if given
            else f"your tests and the Evaluator's own tests both failed on {them}, the code they call, so "
            "the fault is most likely there, not in the tests."
        )
    if broken:
        reasons.append(
            f"pytest could not collect {', '.join(broken)}, so "
            f"{'its' if len(broken) == 1 else 'their'} tests checked nothing."
        )
    code_called = [p for p in plan.outputs if reached(called, p) and p not in again]
    if wrong:
        reasons.append(
            f"your tests in {', '.join(wrong)} failed on {', '.join(code_called)}, where the Evaluator's own "
            "tests of the same code passed, so the fault is most likely in your tests, not in the code."
        )
    keep = (
        f"; keep {', '.join(code_called)}."
        if wrong and code_called
        else "; keep your tests."
        if not broken
        else "."
    )
    text = (
        f"{', '.join(again)} {'is' if one else 'are'} {WRITE_AGAIN}: {' '.join(reasons)} Write "
        f"{'it' if one else 'each'} whole, doing what the task says{keep}"
    )
    quoted = said(again)
    return f"{text} What the task says of {it}: {quoted}" if quoted else text


def _tests_at_fault(
    tests: Sequence[dict[str, object]], faulty: set[str], called: object, plan: PlanRecord
) -> list[str]:
    """The Specialist's test files (outputs of `plan`) whose tests failed where every other test ran
    passed: the Evaluator's own (at least one, none failing on its own code) and the task's, on code of
    the plan's outputs they called. Two checks disagree, and the independent one holds: held-out account's
    `test_account.py` set `balance`, a read-only property, and the 1.5B model's revise rewrote the right
    `account.py` it failed on (heldout-15; merge-intervals and roman the same: the Specialist's expected
    values were wrong)."""
    if not any(reached(called, p) for p in plan.outputs):
        return []
    counted = [t for t in tests if not is_faulty(t, faulty)]
    others = [t for t in counted if t.get("author") != Role.SPECIALIST]
    if not any(t.get("author") == Role.EVALUATOR and t.get("outcome") == "passed" for t in others):
        return []
    if any(t.get("outcome") != "passed" for t in others):
        return []
    files = {
        str(t.get("test")).partition("::")[0]
        for t in counted
        if t.get("author") == Role.SPECIALIST and t.get("outcome") == "failed"
    }
    return [p for p in plan.outputs if p in files]


def ran_with(calls: Sequence[ToolCallRecord]) -> dict[str, str]:
    """The sha256 of each file the Evaluator's last `run_pytest` of a cycle ran with, by path (its
    `evidence`, from the check's own snapshot)."""
    evidence = last_run(calls).get("evidence")
    files = evidence.get("files") if isinstance(evidence, dict) else None
    return {
        str(f["path"]): str(f["sha256"])
        for f in files or []
        if isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("sha256"), str)
    }


def outputs_to_write_again(calls: Sequence[ToolCallRecord], plan: PlanRecord) -> list[str]:
    """The outputs `to_write_again` names, in its order."""
    modules, broken, wrong, _ = _again(calls, plan)
    return modules + broken + wrong


def _again(calls: Sequence[ToolCallRecord], plan: PlanRecord) -> tuple[list[str], list[str], list[str], bool]:
    """(the code to write again, the Specialist's test files that did not collect, those at fault, whether
    a test the task gave failed on the code)."""
    tests = last_tests(calls)
    faulty, called = faulty_files(calls), last_run(calls).get("exercised")
    code = _code_to_write_again(tests, faulty, called, plan)
    modules = code[0] if code is not None else []
    broken = [p for p in plan.outputs if p in _uncollected(tests, Role.SPECIALIST) and p not in modules]
    wrong = (
        [p for p in _tests_at_fault(tests, faulty, called, plan) if p not in broken] if code is None else []
    )
    return modules, broken, wrong, code is not None and code[1]


def _code_to_write_again(
    tests: Sequence[dict[str, object]], faulty: set[str], called: object, plan: PlanRecord
) -> tuple[list[str], bool] | None:
    """(the outputs the failing tests called, whether a task test was among them), when a task test or
    both authors' tests failed on the work; None otherwise."""
    failed = [t for t in tests if t.get("outcome") == "failed" and not is_faulty(t, faulty)]
    authors = {t.get("author") for t in failed}
    given = "task" in authors
    if not given and not {Role.SPECIALIST, Role.EVALUATOR} <= authors:
        return None
    again = [path for path in plan.outputs if reached(called, path)]
    return (again, given) if again else None


def reached(exercised: object, path: str) -> bool:
    """Whether the run's tests reached the module `path` (its `exercised` record: imported, or called
    into). A declared module is listed whether or not a test touched it."""
    record = exercised.get(path) if isinstance(exercised, dict) else None
    if not isinstance(record, dict):
        return False
    calls = record.get("calls")
    return record.get("imported") is True or (isinstance(calls, int) and calls > 0)


def _uncollected(tests: Sequence[dict[str, object]], author: str) -> set[str]:
    """The test files of `author` that pytest could not collect: the run's record says so in the words
    the step_buffer reads too (`COLLECTION_FAILURE`)."""
    return {
        str(t.get("test")).partition("::")[0]
        for t in tests
        if t.get("author") == author and str(t.get("message", "")).startswith(f"{COLLECTION_FAILURE}:")
    }
