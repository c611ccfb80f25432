"""What a role is told when its turn ends too early: the one-time nudges of a cycle.

A small model loses whole cycles to turns that are well formed but premature: a Specialist that reads an
output it has to create, finds none and blocks on missing data; one that reports after its first file; an
Evaluator that says PASS before running every required check, or FAIL (a new plan) over work the
Specialist can fix under this one. Each is sent back once, counted as a format
repair (against `PSE_FORMAT_RETRIES`), in its own words: what is still owed, not "could not read" (so
told, the 1.5B model wrote its last file again). A nudge never changes what a role said and never skips a
gate: the turn that follows is parsed and judged like any other, and a block the role
repeats stands (the honest exit stays open). What a judge's verdict is asked about is in
`engine._verdict_nudges`; `nudge` applies both, in the order a role's spec names them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pse.engine._escalation import quotes_task
from pse.engine._last_run import outputs_to_write_again, ran_with
from pse.engine._said import quoted_for
from pse.engine._values import PhaseResult
from pse.engine._verdict_nudges import (
    contradicted,
    fail_for_work,
    last_test_run,
    own_faults,
    pass_early,
)
from pse.events import BlockedRecord, PlanRecord, ToolCallRecord
from pse.protocol import SPEC_CONFLICT
from pse.roles import BLOCK_ASKED, NOT_WRITTEN, WRITE_AGAIN, role_spec
from pse.tools import Tool

__all__ = [
    "blocked_early",
    "nudge",
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
    last = last_test_run(calls)
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
