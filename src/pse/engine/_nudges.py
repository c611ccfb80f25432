"""What a role is told when its turn ends too early: the one-time nudges of a cycle.

A small model loses whole cycles to turns that are well formed but premature: a Specialist that reads an
output it has to create, finds none and blocks on missing data; one that reports after its first file; an
Evaluator that says PASS before running every required check, or FAIL (a new plan) over work the
Specialist can fix under this one. Each is sent back once, counted as a format
repair (against `PSE_FORMAT_RETRIES`), in its own words: what is still owed, not "could not read" (so
told, the 1.5B model wrote its last file again). A nudge never changes what a role said and never skips a
gate: the turn that follows is parsed and judged like any other, and a block the role
repeats stands (the honest exit stays open).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pse.engine._escalation import quotes_task
from pse.engine._last_run import last_tests, outputs_to_write_again, ran_with
from pse.engine._said import quoted_for
from pse.engine._values import PhaseResult
from pse.events import BlockedRecord, PlanRecord, ToolCallRecord, VerdictRecord
from pse.protocol import SPEC_CONFLICT
from pse.roles import BLOCK_ASKED, NOT_WRITTEN, WRITE_AGAIN, Role, role_spec
from pse.tools import Tool

__all__ = [
    "FIXABLE",
    "blocked_early",
    "contradicted",
    "fail_for_work",
    "nudge",
    "own_faults",
    "pass_early",
    "unchanged",
    "unfounded_conflict",
    "unparsed",
    "unwritten",
]


def unwritten(absent: Sequence[str], plan: PlanRecord | None, told: Sequence[str] = ()) -> str | None:
    """Why a Specialist's report comes too early: the outputs of the plan that are not in the workspace
    (`absent`), with what the task says of each (`quoted_for`)."""
    if plan is None or not plan.outputs or not absent:
        return None
    one = len(absent) == 1
    why = (
        f"{', '.join(absent)} {'is' if one else 'are'} {NOT_WRITTEN}: write {'it' if one else 'each'} "
        "with write_file before you report."
    )
    quoted = quoted_for(absent, told, plan)
    if quoted:
        why += f" What the task says of {'it' if one else 'them'}: {quoted}"
    return why


def unparsed(found: Sequence[str], plan: PlanRecord | None) -> str | None:
    """Why a Specialist's report comes too early although every output exists: a Python output does not
    parse, or is a function's docstring with no code. The 1.5B model reported over a test file its write's
    own note called unparsable, and over HumanEval's PROBLEM copied without its body; the checks would have
    failed it, at the cost of a whole review and a revise cycle. `found`: why each output is not code yet
    (`unparsed_outputs`)."""
    if plan is None or not plan.outputs or not found:
        return None
    again = "it" if len(found) == 1 else "each"
    return "; ".join(found) + f". Write {again} again with write_file before you report."


def unchanged(again: Sequence[str], reviewed: dict[str, str], now: Sequence[tuple[str, str]]) -> str | None:
    """Why a revise's report is asked about once: an output its brief named to write again
    (`outputs_to_write_again`) is still the very bytes the review failed (its sha256 now, `now`, is the
    one the review's last run ran with, `reviewed`). Said as the brief says it (`WRITE_AGAIN`), so under
    a grammar the next turn writes one of them first. At temperature 0 the 1.5B model wrote
    code-delivery's `quicksort.py` byte for byte as the task's tests had failed it, then reported (CI), and
    the next review failed the same test on the same bytes."""
    current = dict(now)
    same = [path for path in again if path in reviewed and current.get(path) == reviewed[path]]
    if not same:
        return None
    one, it = len(same) == 1, "it" if len(same) == 1 else "them"
    return (
        f"{', '.join(same)} {'is' if one else 'are'} {WRITE_AGAIN}: {'it is' if one else 'they are'} still "
        f"the very bytes the review failed (the ones its last run ran on), and the tests that failed "
        f"on {it} fail again. Write {'it' if one else 'each'} whole, changed to do what the task says, "
        "before you report."
    )


def blocked_early(
    blocked: BlockedRecord,
    unwritten: str | None,
    own: Sequence[ToolCallRecord] = (),
    criteria: Sequence[str] = (),
) -> str | None:
    """Why a Specialist's `<blocked>` is asked about once: MISSING_DATA while the plan's outputs are
    unwritten (a small model read an output it had to create, found none, and blocked), or
    MISSING_PERMISSION where its own calls of this cycle ran and none was denied, and it names no tool
    but those that ran. The records refute it: held-out top-words' 1.5B model read test_words.py, then
    blocked as "read_file is not allowed"; slugify's wrote slug.py, then blocked as "slug.py must be
    writable". A block over a tool the role never used stands: it needs no try first.

    A CONFLICTING_CRITERIA that names fewer than two of the plan's criteria (`criteria`, their ids) is
    asked about once too: a conflict is between criteria, and one that names none is no conflict it can
    show. Held-out merge-intervals' Specialist wrote both outputs and blocked so: "The pytest tests in
    test_intervals.py are not written yet"."""
    if blocked.reason_code == "MISSING_DATA" and unwritten is not None:
        again = "Block again only if data the task needs is missing."
        return f"{BLOCK_ASKED[0]}missing data, but {unwritten} {again}"
    if blocked.reason_code == "CONFLICTING_CRITERIA" and criteria:
        cited = [c for c in criteria if re.search(rf"\b{re.escape(c)}\b", blocked.detail)]
        if len(cited) < 2:
            then = unwritten or "End with your report when every output is written."
            return (
                f"{BLOCK_ASKED[0]}conflicting criteria, but your block names {len(cited) or 'none'} of the "
                f"plan's criteria ({', '.join(criteria)}). {then} Block again only with the two that "
                "contradict each other, by id, and why."
            )
    used = {call.tool for call in own if call.decision == "allowed"}
    named = {tool for tool in Tool if re.search(rf"\b{re.escape(tool)}\b", blocked.detail)}
    if (
        blocked.reason_code != "MISSING_PERMISSION"
        or not used
        or named - used
        or any(c.decision == "denied" for c in own)
    ):
        return None
    ran = f", and {', '.join(sorted(named))} ran for you" if named else ""
    return (
        f"{BLOCK_ASKED[0]}a missing permission, but no call of yours was denied in this cycle{ran}. "
        f"{unwritten or 'End with your report when every output is written.'} Block again only if a call "
        "the plan needs is denied."
    )


def unfounded_conflict(
    named_test: bool,
    blocked: BlockedRecord,
    owed: str,
    task: str | None = None,
    calls: Sequence[ToolCallRecord] | None = None,
) -> str | None:
    """Why a `SPEC_CONFLICT` is asked about once: the test it names is no test in the workspace, or the
    sentence it quotes as the specification is not in the task message (`task`). The 1.5B model's
    Evaluator, asked to run a required check, answered SPEC_CONFLICT with `test="run_pytest"` and the run
    escalated; given a failing task test, it quoted a sentence of its own ("The function should return
    the input list itself") as the specification. A conflict that names a real test and quotes the task
    stands at once (the honest exit). `named_test`: whether the test it names is a test function of the
    workspace (`names_a_test`)."""
    if blocked.reason_code != SPEC_CONFLICT:
        return None
    if not named_test:
        named = repr(blocked.test) if blocked.test else "no test"
        return (
            f"{BLOCK_ASKED[1]}names {named}, which is no test function of the workspace's test files. It "
            f"must name a test the task gave (FILE::NAME) that contradicts the specification; if none does, "
            f"send your {owed} instead."
        )
    if task is not None and not quotes_task(blocked.detail, task):
        return (
            f"{BLOCK_ASKED[1]}quotes a specification the task message does not hold. It must quote, word "
            "for word, the task's own sentence that the test contradicts; if no sentence of the task does, "
            f"the test is right and the work must change: send your {owed} instead."
        )
    if calls is not None and not _failed_in_last_run(blocked.test or "", calls):
        return (
            f"{BLOCK_ASKED[1]}names {blocked.test!r}, which did not fail in your last run_pytest of this "
            "cycle: a conflict is a given test that fails on the work because it contradicts the "
            f"specification. Run run_pytest, then send your {owed} (or the conflict, if that test fails "
            "for that reason)."
        )
    return None


def _failed_in_last_run(test: str, calls: Sequence[ToolCallRecord]) -> bool:
    """Whether the last run_pytest of the phase's calls reported `test` (`FILE::NAME`, or a bare NAME)
    failed: a conflict is confirmed by code, not by the model's word."""
    last = _last_test_run(calls)
    if last is None:
        return False
    name = test.strip()
    for item in last.facts.get("tests") or []:
        if item.get("outcome") not in ("failed", "errors", "error"):
            continue
        node = str(item.get("test", ""))
        if node == name or node.endswith(f"::{name}") or name.endswith(node):
            return True
    return False


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


def _last_test_run(calls: Sequence[ToolCallRecord]) -> ToolCallRecord | None:
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
    last = _last_test_run(calls)
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
    last = _last_test_run(calls)
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


def nudge(
    result: PhaseResult,
    plan: PlanRecord | None,
    calls: Sequence[ToolCallRecord],
    *,
    owed: Sequence[str] | None,
    conflicts: bool,
    told: Sequence[str],
    packet: str,
    before: Sequence[ToolCallRecord] = (),
) -> str | None:
    """What `result`'s final sent too early, by its role's `RoleSpec.nudges` (a report's, first the outputs
    that are not code, then those unwritten; a verdict's, the first that holds), or why its `<blocked>`
    is asked about; None when it stands.

    Args:
        plan: the plan in force.
        calls: the cycle's tool records.
        owed: the required checks a PASS comes before (`evidence_owed`); None: a PASS owes none.
        conflicts: the task gave tests (a SPEC_CONFLICT may stand).
        told: what the role was told, the most specific first (its system message, the task message).
        packet: the cycle's task message (a SPEC_CONFLICT quotes its sentence).
        before: a revise's last cycle's tool records (what its brief named to write again).
    """
    spec, final, seen = role_spec(result.role), result.final, result.seen
    wants = spec.nudges
    own = [call for call in calls if call.requester == result.role and call.step == result.step]
    said = [
        unparsed(seen.broken, plan) if "unparsed" in wants else None,
        unwritten(seen.missing, plan, told) if "unwritten" in wants else None,
        unchanged(outputs_to_write_again(before, plan), ran_with(before), seen.sha256)
        if "unchanged" in wants and plan
        else None,
    ]
    early = " ".join(text for text in said if text) or None
    if early is None and "pass_early" in wants and owed is not None:
        early = pass_early(owed, final.verdict)
    if early is None and "own_faults" in wants:
        early = own_faults(final.verdict, own)
    if early is None and "contradicted" in wants:
        early = contradicted(final.verdict, own, conflicts)
    if early is None and "fail_for_work" in wants:
        early = fail_for_work(final.verdict, own)
    if final.blocked is None:
        return early
    ids = [c.id for c in plan.criteria] if plan is not None else []
    asked = blocked_early(final.blocked, early, own, ids) if "blocked_early" in wants else None
    if asked is not None:
        return asked
    judging = spec.final == "verdict"  # a judge runs the checks: its conflict is confirmed by its own run
    return unfounded_conflict(seen.named_test, final.blocked, spec.final, packet, own if judging else None)
