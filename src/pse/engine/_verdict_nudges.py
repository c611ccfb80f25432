"""What a judge is asked about once when its verdict comes too early or against its own evidence.

The Evaluator's side of the one-time nudges (`engine._nudges`): a PASS before the checks it owes, a
PARTIAL or FAIL resting on its own tests' defects, a verdict its last test run contradicts, a FAIL (or a
BLOCKED) over work the Specialist can fix under the plan. Each reads the role's own tool records, never
its word; the verdict it sends next stands, whatever it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from pse.engine._last_run import last_tests
from pse.events import ToolCallRecord, VerdictRecord
from pse.protocol import SPEC_CONFLICT
from pse.roles import Role
from pse.tools import Tool

__all__ = ["FIXABLE", "contradicted", "fail_for_work", "last_test_run", "own_faults", "pass_early"]


def pass_early(checks: Sequence[str], verdict: VerdictRecord | None) -> str | None:
    """Why an Evaluator's PASS comes too early: required `checks` it has not run (or not since the last
    write) in this cycle (`evidence_owed`). Its verdict is not changed, only asked for again once, after
    the evidence."""
    if verdict is None or verdict.status != "PASS" or not checks:
        return None
    return (
        "Your PASS came before the evidence it needs: run "
        + "; ".join(checks)
        + ", read the results, then send your verdict."
    )


def last_test_run(calls: Sequence[ToolCallRecord]) -> ToolCallRecord | None:
    """The Evaluator's last `run_pytest` in the cycle that wrote a readable report (None: none did)."""
    runs = [
        c for c in calls if c.tool == Tool.RUN_PYTEST and c.decision == "allowed" and c.facts.get("report")
    ]
    return runs[-1] if runs else None


def own_faults(verdict: VerdictRecord | None, calls: Sequence[ToolCallRecord]) -> str | None:
    """Why an Evaluator's PARTIAL or FAIL is asked about once: its last test run failed the Evaluator's
    own tests on their own code (`own_faults`, which run_pytest reads from the code of its files: one
    that does not parse, a name never bound, a tool called as Python, a fixture nothing defines). Such
    a verdict sends the Specialist to fix work the evidence never judged: held-out roman's module was
    right when the 1.5B model's Evaluator, whose file called `pytest.run_pytest()`, said PARTIAL; told
    so, the Specialist emptied `roman.py`. The verdict it sends next stands, whatever it is."""
    if verdict is None or verdict.status not in ("PARTIAL", "FAIL"):
        return None
    last = last_test_run(calls)
    faults = last.facts.get("own_faults") if last is not None else None
    if not faults:
        return None
    return (
        "Your verdict rests on a run in which your own tests failed on their own code, not on the work: "
        + "; ".join(str(fault.get("fault")) for fault in faults if isinstance(fault, dict))
        + ". A defect of your tests is not the Specialist's to fix. Write your test file again with "
        "write_file (tests only: import what the task names, assert what it says), run run_pytest, then "
        "send your verdict."
    )


def contradicted(
    verdict: VerdictRecord | None, calls: Sequence[ToolCallRecord], conflicts: bool
) -> str | None:
    """Why an Evaluator's verdict is asked about once: it contradicts its own evidence. Its reason is
    SPEC_CONFLICT where the task gave no test to conflict with; or it does not pass work whose every
    criterion it judged met, or blames failing tests, while its last pytest run passed every test. The
    1.5B model returned PARTIAL for SPEC_CONFLICT over a right `solution.py`, twice, and the criterion
    cap escalated the run (HumanEval-0). The verdict it sends next stands, whatever it is."""
    if verdict is None:
        return None
    if verdict.reason_code == SPEC_CONFLICT and not conflicts:
        return (
            "Your verdict's reason is SPEC_CONFLICT, but this task gave no test: a conflict is between a "
            "test the task gave and its specification. Judge the work against the plan's criteria with "
            "your own evidence, and send your verdict again."
        )
    last = last_test_run(calls)
    if verdict.status not in ("PARTIAL", "FAIL") or last is None or last.status != "ok":
        return None
    passed, failed = int(last.facts.get("passed", 0)), int(last.facts.get("failed", 0))
    if passed == 0 or failed or int(last.facts.get("errors", 0)):
        return None
    ran = f"your last run_pytest passed ({passed} passed, none failed)"
    if verdict.criteria and all(c.met for c in verdict.criteria):
        return (
            f"You judged every criterion met and {ran}, but your verdict is {verdict.status}. Send your "
            "verdict again: PASS when every criterion is met and every required check passed; otherwise "
            "mark the criterion that is not met, with the evidence that shows it."
        )
    if verdict.reason_code == "TESTS_FAILING":
        return (
            f"Your verdict's reason is TESTS_FAILING, but {ran}. Send your verdict again, with the reason "
            "your own evidence shows."
        )
    return None


FIXABLE = frozenset({"TESTS_FAILING", "LINT_FAILING", "CHECK_FAILING", "OUTPUT_MISSING"})
"""Reasons about the work, not the plan: the evaluator prompt's examples of a PARTIAL's reason."""


def fail_for_work(verdict: VerdictRecord | None, calls: Sequence[ToolCallRecord] = ()) -> str | None:
    """Why an Evaluator's FAIL is asked about once: its own reason is work the Specialist can fix under the
    plan (a failing test, a finding, a missing output), which is a PARTIAL — a revise that keeps the plan
    and says what to fix — not a FAIL, which throws the plan away. The 1.5B model said FAIL with
    TESTS_FAILING in every run; each re-plan cost a Planner turn and the Specialist rewrote its files as
    they were. A FAIL for SPEC_CONFLICT is asked too: a new plan cannot change the task's tests, and a
    conflict has its own exit (`<blocked>`, naming the test, quoting the task), which is judged as such.
    Told its conflict quoted no sentence of the task, the 1.5B model sent the same words as a FAIL, and
    the re-plan's Specialist, told nothing of the failing test, wrote its file again unchanged (run 21).
    The verdict it sends next stands, whatever it is.

    A FAIL for any other reason is asked too where its own last run says the work holds: every test of
    the Evaluator's own that ran passed (`calls`: the phase's tool records). The plan's approach then does
    what the judge's own checks ask of it, and what is left is the Specialist's to fix under it. The 1.5B
    model's Evaluator said FAIL (WRONG_APPROACH) over a right `account.py` its four tests passed, for the
    Specialist's test file that pytest could not collect, twice; each re-plan's Specialist wrote the
    module again, the last time wrong (heldout-20).

    A BLOCKED verdict over such work is asked too, and over MISSING_DATA: it stops the run for a person.
    The 1.5B model's Evaluator blocked on MISSING_DATA over a `test.csv` the Specialist's own test read
    and never wrote (held-out csv-mean): a file the work lacks is the Specialist's to deliver."""
    if (
        verdict is not None
        and verdict.status == "BLOCKED"
        and verdict.reason_code in {*FIXABLE, "MISSING_DATA"}
    ):
        return (
            f"Your BLOCKED stops the run for a person, but its reason, {verdict.reason_code}, is about the "
            "work: a file or a result the work lacks is the Specialist's to deliver under this plan, and "
            "that is PARTIAL. Send your verdict again; BLOCKED only if the task itself cannot go on without "
            "a person (data no role can write, a permission)."
        )
    if verdict is None or verdict.status != "FAIL":
        return None
    if verdict.reason_code == SPEC_CONFLICT:
        return (
            "Your FAIL asks for a new plan for a SPEC_CONFLICT, but a new plan cannot change the task's "
            "tests. A test the work fails is work the Specialist can fix under this plan: that is PARTIAL. "
            "Send your verdict again."
        )
    if verdict.reason_code not in FIXABLE:
        passed = _own_tests_held(calls)
        if not passed:
            return None
        return (
            f"Your FAIL asks for a new plan, but your own tests passed on the work ({passed} passed, none "
            "failed): under this plan it does what your tests check. What is still wrong is the "
            "Specialist's to fix under it: that is PARTIAL, with the criterion not met and the evidence "
            "that shows it. Send your verdict again; FAIL only if the plan itself is wrong."
        )
    return (
        f"Your FAIL asks for a new plan, but its reason, {verdict.reason_code}, is work the Specialist "
        "can fix under this plan: that is PARTIAL. Send your verdict again; FAIL only if the plan itself "
        "is wrong."
    )


def _own_tests_held(calls: Sequence[ToolCallRecord]) -> int:
    """How many of the Evaluator's own tests its last test run passed, where every one of them that ran
    passed (0: none ran, or one did not pass)."""
    own = [t for t in last_tests(calls) if t.get("author") == Role.EVALUATOR]
    return len(own) if own and all(t.get("outcome") == "passed" for t in own) else 0
