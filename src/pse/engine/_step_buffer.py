"""step_buffer: the only thing that crosses from one cycle to the next, built from structured data and capped.

Every cycle starts from fresh agents. A PARTIAL sends the Specialist the failed criteria with the
Evaluator's findings, the gate failures and the artifact list (the fixed plan travels ahead of it, as its
own message, the same text the first cycle's roles saw: a prefix a provider's cache serves); a FAIL sends
the Planner the failure reason. The packet is capped at `PSE_STEP_BUFFER_TOKENS` (counted with
`pse.tokens`), trimming the least useful parts first, so a retry costs the same number of prompt tokens
however many came before.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from pse.engine._last_run import faulty_files, is_faulty, last_tests
from pse.events import SEVERITIES, GateRecord, PlanRecord, ToolCallRecord, VerdictRecord
from pse.protocol import file_block
from pse.roles import Role
from pse.tokens import count_tokens
from pse.tools import COLLECTION_FAILURE, FAULT_HEADING, Tool

__all__ = [
    "artifact_list",
    "check_problems",
    "failing_tests",
    "faults",
    "fit_to_tokens",
    "left_behind",
    "replan_packet",
    "revise_packet",
]

_MAX_ARTIFACTS = 50
_MAX_FAILING = 10
_WHY_CHARS = 400
"""Characters of a task test's failure message a failing-test line quotes."""
_FOUND = "What the Evaluator's last checks found (failing tests, findings):"
_SHOWN_CHARS = 3000
"""Most characters of a file a revise brief shows whole, where its code raised (one file block's worth for
a small model, `protocol._budget.USEFUL_FILE`)."""
_SHOWN_FILES = 2
_READ_LIMIT = 1_000_000
"""Most bytes of a file read for the line its code raised at."""
_CODE_ERRORS = frozenset(
    {"NameError", "UnboundLocalError", "AttributeError", "TypeError", "ImportError", "ModuleNotFoundError",
     "IndexError", "ZeroDivisionError", "RecursionError"}
)  # fmt: skip
"""Errors whose words are the code's (a name, an attribute, a type), the same on every run: a brief quotes
them. Any other (a `KeyError`, a `ValueError`) may quote a test's data, which a random test varies, and a
replayed run must send the same text; it is named by its type only."""
_TRIM_MARKER = "\n[… step_buffer trimmed to its token cap …]"


def artifact_list(workspace: Path) -> list[str]:
    """Files in the workspace as `relative/path (N bytes)`, sorted; caches and hidden folders skipped,
    symlinks never followed."""
    entries: list[tuple[tuple[str, ...], str]] = []
    if not workspace.is_dir():
        return []
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in files:
            path = Path(folder) / name
            info = path.lstat()
            if name.startswith(".") or not stat.S_ISREG(info.st_mode):
                continue
            rel = path.relative_to(workspace)
            entries.append((rel.parts, f"{rel.as_posix()} ({info.st_size} bytes)"))
    return [text for _, text in sorted(entries)]


def fit_to_tokens(text: str, cap: int) -> str:
    """Cut `text` to at most `cap` tokens, with a visible marker when it was cut."""
    if count_tokens(text) <= cap:
        return text
    low, high = 0, len(text)
    while low < high:  # longest prefix that fits together with the marker
        mid = (low + high + 1) // 2
        if count_tokens(text[:mid] + _TRIM_MARKER) <= cap:
            low = mid
        else:
            high = mid - 1
    return text[:low] + _TRIM_MARKER


Read = Callable[[str, int], str | None]
"""A workspace file's text, read within a limit (None: it cannot be): `engine.Workspace.text`."""


def failing_tests(calls: Sequence[ToolCallRecord], read: Read | None = None) -> list[str]:
    """The tests that failed in the Evaluator's last `run_pytest` of a cycle (`test_x.py::test_a: failed`),
    from the ToolAgent's record of the run, not a role's words: a finding such as "pytest failed" names
    no test to fix. pytest's message of why comes only for a test of a file the task seeded (the task's
    own acceptance tests, written to fail in the same words on every run): a role's test may print what
    differs from run to run (a random seed), and what PSE sends a model must be the same when a run is
    replayed. Given only the name of a failing task test, the 1.5B model read the file nine times and
    never changed its code. With `read`, a failure that surfaced at a line of a workspace file (a task's
    or the Specialist's failing `assert`) quotes that line, from the file: the same on every run."""
    tests = last_tests(calls)
    faulty = faulty_files(calls)
    failing = [
        f"{t.get('test')}: {t.get('outcome')}" + (_collection(t.get("message")) or _why(t)) + _at(t, read)
        for t in tests
        if t.get("outcome") in ("failed", "errors") and not is_faulty(t, faulty)
    ]
    if len(failing) > _MAX_FAILING:
        failing = [*failing[:_MAX_FAILING], f"… and {len(failing) - _MAX_FAILING} more"]
    if faulty:
        failing.append(
            f"{', '.join(sorted(faulty))}: the Evaluator's own tests, which failed on their own code, not "
            "on the work: nothing of yours to fix for them"
        )
    return failing


def _at(test: dict[str, object], read: Read | None) -> str:
    """`, at FILE line N: `code``: the workspace line the test's failure surfaced at (`at`), or nothing."""
    place = test.get("at")
    if read is None or not isinstance(place, str):
        return ""
    path, _, number = place.rpartition(":")
    code = _line(read(path, _READ_LIMIT), number)
    return f", at {path} line {number}" + (f": `{code}`" if code else "") if number.isdigit() else ""


def _line(source: str | None, number: str) -> str:
    """Line `number` (counted from 1) of `source`, stripped; "" when there is none."""
    lines = source.splitlines() if source is not None else []
    return (
        lines[int(number) - 1].strip()[:_WHY_CHARS]
        if number.isdigit() and 0 < int(number) <= len(lines)
        else ""
    )


def _why(test: dict[str, object]) -> str:
    """The first line of a task test's failure message (at most `_WHY_CHARS`), or nothing: `author` is
    who wrote the test's file by PSE's records, never by the test process's own report."""
    message = test.get("message")
    if test.get("author") != "task" or not isinstance(message, str):
        return ""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return f" ({first[:_WHY_CHARS]})" if first else ""


def _collection(message: object) -> str:
    """Why a test module could not be imported (its SyntaxError or ImportError, and the line): unlike a
    test's failure, this comes from the file itself, the same on every run."""
    head = f"{COLLECTION_FAILURE}: "
    return f" ({message})" if isinstance(message, str) and message.startswith(head) else ""


def faults(calls: Sequence[ToolCallRecord], read: Read) -> str:
    """Where the delivered code raised, in the Evaluator's last `run_pytest` of a cycle: each failing test
    whose exception came from a line of a workspace file (the checking session's record, `where`), with
    that line as the file holds it now (`read`: a workspace file's text, None when it cannot be read
    within a limit), then each such file whole (up to `_SHOWN_FILES` of at most
    `_SHOWN_CHARS` characters), as a file block; "" when no failure came from the code's own lines.

    Why: given the failing test's name (and even the error), the 1.5B model's Specialist read the task's
    inputs and reported, in a revise cycle, and never wrote (HumanEval 5: `delimiter` for the parameter
    `delimeter`). Asked in a plain chat with the file, the error and its line, it fixed the line; through
    PSE it now writes in its revise cycle, but wrote that file back unchanged (issue 44, measured)."""
    tests = last_tests(calls)
    lines: list[str] = []
    files: dict[str, str] = {}
    for test in tests:
        where = test.get("where")
        if not isinstance(where, str) or test.get("outcome") not in ("failed", "errors"):
            continue
        path, _, number = where.rpartition(":")
        source = read(path, _READ_LIMIT)
        if source is None or not number.isdigit():
            continue
        code = _line(source, number)
        lines.append(f"- {test.get('test')}: {_error(test.get('message'))}, raised at {path} line {number}"
                     + (f": `{code}`" if code else ""))  # fmt: skip
        if len(source) <= _SHOWN_CHARS and len(files) < _SHOWN_FILES:
            files.setdefault(path, source)
        if len(lines) == _MAX_FAILING:
            break
    if not lines:
        return ""
    shown = [f"{path} as it is now:\n{file_block(path, source)}" for path, source in files.items()]
    ask = ["Write it again, whole, with what raised there fixed."] if shown else []
    return "\n\n".join(["\n".join([f"{FAULT_HEADING}:", *lines]), *shown, *ask])


def _error(message: object) -> str:
    """A failure's first line where its words are the code's (`_CODE_ERRORS`), else its error's type."""
    first = message.strip().splitlines()[0] if isinstance(message, str) and message.strip() else ""
    kind = first.partition(":")[0].strip()
    if not kind.isidentifier():
        return "an error"
    return first[:_WHY_CHARS] if kind in _CODE_ERRORS else kind


def check_problems(calls: Sequence[ToolCallRecord], read: Read | None = None) -> list[str]:
    """What the Evaluator's last run of each check found, from the ToolAgent's record: the failing tests
    of `run_pytest` (`failing_tests`) and the findings of `run_ruff` (path:line:column: code message)."""
    ruff = [c for c in calls if c.requester == Role.EVALUATOR and c.tool == Tool.RUN_RUFF]
    listed = ruff[-1].facts.get("finding_list") if ruff else None
    found = [str(f) for f in listed] if isinstance(listed, list) else []
    return [*failing_tests(calls, read), *found[:_MAX_FAILING]]


def _criterion_text(plan: PlanRecord, cid: str) -> str:
    return next((c.text for c in plan.criteria if c.id == cid), "not in the plan")


def _build(sections: Sequence[str]) -> str:
    return "\n\n".join(s for s in sections if s)


def _findings(verdict: VerdictRecord | None) -> str:
    """The verdict's findings, worst first, one line each (empty when it has none)."""
    if verdict is None or not verdict.findings:
        return ""
    ranked = sorted(verdict.findings, key=lambda f: SEVERITIES.index(f.severity))
    return "\n".join(["Evaluator's findings (fix every high one):", *(f"- {f.describe()}" for f in ranked)])


def revise_packet(
    *,
    cycle: int,
    plan: PlanRecord,
    verdict: VerdictRecord | None,
    gate: GateRecord,
    artifacts: Sequence[str],
    cap: int,
    failing: Sequence[str] = (),
    fault: str = "",
    again: str = "",
) -> str:
    """The Specialist's packet after a PARTIAL (or a PASS the hard gates turned into PARTIAL); `failing`:
    what the Evaluator's last checks found (`check_problems`); `fault`: where the code raised (`faults`),
    its files dropped first when the packet is over its cap; `again`: what to write again first
    (`to_write_again`), last, where the Specialist's next turn starts."""
    status = f"{verdict.status} ({verdict.reason_code})" if verdict else "no usable verdict"
    head = (
        f"## Revision request (cycle {cycle})\n"
        f"The Evaluator's review came back {status}. The plan above is fixed: do not change its criteria.\n"
        "Fix what failed, keep what passed, then report as before."
    )
    failed = [c for c in (verdict.criteria if verdict else []) if not c.met]
    findings_full = [f"- {c.id} ({_criterion_text(plan, c.id)}): {c.finding}" for c in failed]
    summary = f"Evaluator's summary: {verdict.summary}" if verdict and verdict.summary else ""
    summary = _build([summary, _findings(verdict)])
    gates = ["Hard gate failures:", *(f"- {f}" for f in gate.failures)] if gate.failures else []
    if failing:
        gates += [_FOUND, *(f"- {f}" for f in failing)]
    shown = list(artifacts[:_MAX_ARTIFACTS])
    if len(artifacts) > _MAX_ARTIFACTS:
        shown.append(f"… and {len(artifacts) - _MAX_ARTIFACTS} more")
    arts = ["Workspace artifacts:", *(f"- {a}" for a in shown)] if shown else ["Workspace artifacts: none"]

    def assemble(findings: list[str], artifacts_block: list[str], where: str = fault) -> str:
        crit = ["Failed criteria:", *findings] if findings else []
        parts = [head, "\n".join(crit), summary, "\n".join(gates), where, "\n".join(artifacts_block), again]
        return _build(parts)

    packet = assemble(findings_full, arts)
    if count_tokens(packet) > cap:  # trim the least useful parts first
        packet = assemble([f[:300] for f in findings_full], arts[:11])
    if count_tokens(packet) > cap:
        packet = assemble([f[:300] for f in findings_full], [])
    if count_tokens(packet) > cap:  # never a file cut short: a model copies what it is shown
        packet = assemble([f[:300] for f in findings_full], [], fault.split("\n\n", 1)[0])
    return fit_to_tokens(packet, cap)


def replan_packet(
    *, cycle: int, reason: str, verdict: VerdictRecord | None, plan: PlanRecord | None, cap: int
) -> str:
    """The Planner's packet after a FAIL (or a PARTIAL over its retry cap)."""
    head = (
        f"## Re-plan request (cycle {cycle})\n"
        f"The previous plan did not succeed: {reason}\n"
        "Write a new plan for the original goal above. You may change the steps and the criteria."
    )
    failed = [c for c in (verdict.criteria if verdict else []) if not c.met]
    lines = ["What failed last time:"] + [
        f"- {c.id} ({_criterion_text(plan, c.id) if plan else ''}): {c.finding}" for c in failed
    ]
    summary = f"Evaluator's summary: {verdict.summary}" if verdict and verdict.summary else ""
    packet = _build([head, "\n".join(lines) if failed else "", summary, _findings(verdict)])
    return fit_to_tokens(packet, cap)


def left_behind(*, gate: GateRecord, artifacts: Sequence[str], failing: Sequence[str], cap: int) -> str:
    """The Specialist's note on a re-plan cycle: the workspace keeps the last cycle's files, so what PSE's
    checks found in them crosses too (gate failures, failing tests, the files), never the Evaluator's
    words. Without it a Specialist given a new plan wrote one output again and left the broken one."""
    lines = [
        "## What the last cycle left in the workspace",
        "The files below are still there. Write again every output of the new plan that is wrong.",
    ]
    if gate.failures:
        lines += ["What PSE's gates found:", *(f"- {f}" for f in gate.failures)]
    if failing:
        lines += [_FOUND, *(f"- {f}" for f in failing)]
    lines += ["Workspace artifacts:", *(f"- {a}" for a in artifacts[:_MAX_ARTIFACTS])] if artifacts else []
    return fit_to_tokens("\n".join(lines), cap)
