"""Why a run ended as it did, in one line: the causal story of its cycles.

    cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator PASS → PASSED

Computed from the trace alone (each cycle's verdict, gates and result, the transitions, the people's
answers, the outcome and its reason), so `pse trace show` and the dashboard tell the same story. An
ERROR run's story is its root cause: the gates a stopped cycle failed ("the Evaluator did not run
run_pytest") are consequences of the stop, not causes. The error comes first; then, "set off by", what
led to it, with the detail of its gate: a cycle whose PASS a gate overruled (without it the run would
have ended there), or, when the error is an exhaustion (a cassette that ran out because the run needed
more cycles than were recorded), the first cycle that did not pass:

    cycle 2: ERROR: CassetteExhaustedError: cassette has no turn 3 for role Specialist · set off by
    cycle 1: Evaluator PASS → gate `outputs_exist` failed (missing: summary.md) → PARTIAL

A run still going tells what is happening now instead of its open cycle's story (`now_line`):

    cycle 1 · Specialist writing quicksort.py · 3 tool calls

Pure: no I/O. It takes a `Trace` or the trace's JSON as read from `trace.json` (a dict), and returns
plain text; whoever prints it escapes it (a model wrote the reason codes).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pse.roles import CREWS, PSE_CREW, TOOL_AGENT, Role
from pse.tools import Tool
from pse.trace import Trace

__all__ = [
    "CycleLink",
    "causal_line",
    "causal_links",
    "cycle_link",
    "first_cause",
    "first_sentence",
    "gate_details",
    "now_line",
    "reviewer_of",
    "root_cause",
]

_WAITING = {"AWAITING_ANSWER": "waiting for answers", "AWAITING_APPROVAL": "waiting for approval"}
_OPEN = "RUNNING"
"""A live view's result for a cycle not yet reviewed: no result, so never said ("running → RUNNING")."""
_EXHAUSTIONS = ("CassetteExhaustedError",)
"""Errors that say the run went on longer than it could, not why: a cycle before them that did not
pass is their cause."""
_TOOL_DOING: dict[str, str] = {
    Tool.WRITE_FILE: "writing",
    Tool.READ_FILE: "reading",
    Tool.LIST_FILES: "looking at files",
    Tool.RUN_PYTEST: "running pytest",
    Tool.RUN_RUFF: "running ruff",
    Tool.RUN_CHECK: "running a check",
    Tool.BASH: "running a command",
    Tool.SEARCH_KNOWLEDGE: "searching knowledge",
}
"""What a role is doing while its last tool call is the one named (the dashboard's lib/run.js TOOL_DOING)."""
_ROLE_DOING: dict[str, str] = {
    Role.PLANNER: "planning",
    Role.SPECIALIST: "working",
    Role.EVALUATOR: "reviewing",
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`])")
_MAX_CAUSE = 300


@dataclass(frozen=True)
class CycleLink:
    """One cycle of the story: who decided what, the gates that failed, and what it came to.

    Attributes:
        cycle: the cycle's index, from 1.
        said: the decision that drove the cycle: "Evaluator PARTIAL", "Specialist blocked
            (MISSING_DATA)", "Planner asked 2 question(s)", "ERROR: <root cause>".
        gates: the hard gates the cycle failed (names such as `check:pytest`).
        enforced: False when the gates were recorded but not applied (PSE_HARD_GATES=false).
        result: what the cycle came to (PASS, PARTIAL, FAIL, BLOCKED, ERROR, TIMEOUT, QUESTIONS).
        then: what followed: for the last cycle, the run's outcome or waiting state; for another, the
            outcome a person answered and their answer (empty when the next cycle simply began).
        status: the result `said` already states (a verdict's status, BLOCKED), not repeated after it.
        details: what each failed gate found (`missing: summary.md`), when the link names a first cause;
            empty otherwise (the cycle's details hold them).
        cause: the link is what set an ERROR off, told after the error ("set off by cycle 1: …").
    """

    cycle: int
    said: str
    gates: tuple[str, ...] = ()
    enforced: bool = True
    result: str = ""
    then: tuple[str, ...] = ()
    status: str = ""
    details: tuple[str, ...] = ()
    cause: bool = False

    def text(self) -> str:
        """The link as it reads in the line: `cycle 1: Evaluator PASS → gate `x` failed → PARTIAL`."""
        parts = [self.said]
        if self.gates:
            names = ", ".join(f"`{g}`" for g in self.gates)
            parts.append(f"gate{'s' if len(self.gates) > 1 else ''} {names} failed")
            if not self.enforced:
                parts[-1] += " (not enforced)"
            if self.details:
                parts[-1] += f" ({gate_details(self.gates, self.details)})"
        if self.result and (self.gates or self.result != self.status):
            parts.append(self.result)
        parts += [step for step in self.then if step != parts[-1]]  # "running", not "running → running"
        return ("set off by " if self.cause else "") + f"cycle {self.cycle}: " + " → ".join(parts)


def _data(trace: Trace | Mapping[str, Any]) -> Mapping[str, Any]:
    return trace.model_dump(mode="json", by_alias=True) if isinstance(trace, Trace) else trace


def first_sentence(text: str) -> str:
    """The cause without its advice: a reason reads "X failed. Check that ..."; keep "X failed."."""
    flat = " ".join(str(text).split())
    head = _SENTENCE_END.split(flat, maxsplit=1)[0]
    return head if len(head) <= _MAX_CAUSE else head[: _MAX_CAUSE - 1] + "…"


def gate_details(gates: Sequence[str], details: Sequence[str]) -> str:
    """`missing: summary.md`, or for several gates `a: …; b: …` (each detail cut to its first sentence)."""
    if len(gates) == 1:
        return first_sentence(details[0])
    return "; ".join(
        f"{gate}: {first_sentence(detail)}" for gate, detail in zip(gates, details, strict=False)
    )


def _failed(gate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The failed gates of a cycle, each with what it found."""
    results = gate.get("results") or []
    if results:
        return [
            (str(r.get("name", "")), str(r.get("detail", ""))) for r in results if not r.get("passed", True)
        ]
    found = []
    for failure in gate.get("failures") or []:
        name, _, detail = str(failure).partition(": ")
        found.append((name, detail))
    return found


def _failed_gates(gate: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(name for name, _ in _failed(gate))


def _overruled(cycle: Mapping[str, Any]) -> bool:
    """The Evaluator said PASS and the engine judged the cycle PARTIAL: only enforced failed gates do
    that (`pse.engine._decide.judge`), and without them the run ended there."""
    verdict = cycle.get("verdict") or {}
    return verdict.get("status") == "PASS" and cycle.get("result") == "PARTIAL"


def first_cause(trace: Trace | Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The cycle that set an ERROR run's error off, when one did (see the module): the earliest cycle
    before the error whose PASS a gate overruled, or, for an exhaustion, the earliest that did not pass."""
    data = _data(trace)
    cycles = list(data.get("cycles") or [])
    failing = [i for i, c in enumerate(cycles) if c.get("result") == "ERROR"]
    if data.get("outcome") != "ERROR" or not failing:
        return None
    before = cycles[: failing[-1]]
    exhausted = root_cause(data).startswith(_EXHAUSTIONS)
    for cycle in before:
        if _overruled(cycle) or (exhausted and cycle.get("result") in ("PARTIAL", "FAIL")):
            return cycle  # type: ignore[no-any-return]
    return None


def root_cause(trace: Trace | Mapping[str, Any]) -> str:
    """Why an ERROR run (or any run that was stopped) stopped: the first sentence of the cause.

    The last cycle that ended in ERROR names it (its stop, or its review error); a run stopped before
    its first cycle has only its outcome reason, or the reason of its last transition.
    """
    data = _data(trace)
    for cycle in reversed(data.get("cycles") or []):
        if cycle.get("result") == "ERROR":
            cause = cycle.get("stopped") or cycle.get("review_error") or cycle.get("result_reason")
            if cause:
                return first_sentence(cause)
    if data.get("outcome_reason"):
        return first_sentence(data["outcome_reason"])
    transitions = data.get("transitions") or []
    return first_sentence(transitions[-1].get("reason", "")) if transitions else ""


def reviewer_of(trace: Trace | Mapping[str, Any]) -> str:
    """Who gives a run's verdicts: the Evaluator, or the Agent of the single team (its own review)."""
    data = _data(trace)
    return CREWS.get(str((data.get("settings") or {}).get("team")), PSE_CREW).reviewer


def _said(cycle: Mapping[str, Any], reviewer: str) -> tuple[str, str]:
    """What drove the cycle, and the result that already states."""
    verdict = cycle.get("verdict")
    if verdict:
        status = str(verdict.get("status", "?"))
        return f"{reviewer} {status}", status
    blocked = cycle.get("blocked")
    if blocked:
        return f"{blocked.get('role', '?')} blocked ({blocked.get('reason_code', '?')})", "BLOCKED"
    asked = cycle.get("clarification")
    if asked:
        return f"{Role.PLANNER} asked {len(asked.get('questions') or [])} question(s)", "QUESTIONS"
    steps = cycle.get("steps") or []
    if steps:
        last: dict[str, str] = {}
        for attempt in steps:
            last[str(attempt.get("step", "?"))] = str(attempt.get("result") or "running")
        return "steps " + ", ".join(f"{step} {result}" for step, result in last.items()), ""
    if cycle.get("stopped"):
        return f"stopped: {first_sentence(cycle['stopped'])}", ""
    if cycle.get("review_error"):
        return f"no verdict: {first_sentence(cycle['review_error'])}", ""
    return ("no verdict" if cycle.get("ended_at") else "running"), ""


def _answered(answers: Sequence[Mapping[str, Any]], after: int) -> tuple[str, ...]:
    """The outcome a person found after cycle `after`, and what they answered (empty: no answer)."""
    found = [a for a in answers if a.get("after_cycle") == after]
    if not found:
        return ()
    said = ", ".join(
        "answered the questions" if a.get("decision") == "answer" else str(a.get("decision")) for a in found
    )
    return (str(found[0].get("outcome_before") or ""), f"a person: {said}")


def _end(data: Mapping[str, Any]) -> str:
    if data.get("outcome"):
        return str(data["outcome"])
    state = str(data.get("state") or "")
    return _WAITING.get(state, "running" if data.get("cycles") else state.lower() or "not started")


def cycle_link(
    cycle: Mapping[str, Any],
    reviewer: str = Role.EVALUATOR,
    *,
    then: tuple[str, ...] = (),
    detailed: bool = False,
) -> CycleLink:
    """The link of one cycle (a trace's cycle as JSON, or what a live view knows of it: its index,
    verdict, gate, stop, review error and result). Gates count only when there was a verdict: without
    a review, they failed because the cycle was stopped. `detailed`: the link says what each failed
    gate found (a first cause, told where nothing else shows it)."""
    gate = cycle.get("gate") or {}
    said, status = _said(cycle, reviewer)
    failed = _failed(gate) if cycle.get("verdict") else []
    return CycleLink(
        cycle=int(cycle.get("index", 0)),
        said=said,
        gates=tuple(name for name, _ in failed),
        enforced=bool(gate.get("enforced", True)),
        result="" if cycle.get("result") == _OPEN else str(cycle.get("result") or ""),
        then=then,
        status=status,
        details=tuple(detail for _, detail in failed) if detailed else (),
    )


def _moment(at: Any) -> float:
    try:
        return datetime.fromisoformat(str(at)).timestamp()
    except ValueError:
        return 0.0


def now_line(cycle: Mapping[str, Any]) -> str:
    """What an open cycle is doing now, from what it holds so far (a trace's cycle as JSON, or what a
    live view knows of it: index, first_speaker, messages with source and at, tool calls with requester,
    tool, arguments and at): `cycle 1 · Specialist writing quicksort.py · 3 tool calls`. Who acted last
    (the ToolAgent's results aside), doing what its last call does, or its role's work when its last
    act was a message; the cycle's first speaker before anyone spoke. The dashboard's lib/run.js
    nowLine says the same."""
    acts: list[tuple[float, str, Mapping[str, Any] | None]] = [
        (_moment(m.get("at")), str(m.get("source", "")), None) for m in cycle.get("messages") or []
    ]
    calls = list(cycle.get("tool_calls") or [])
    acts += [(_moment(t.get("at")), str(t.get("requester", "")), t) for t in calls]
    acts = [act for act in acts if act[1] != TOOL_AGENT]
    acts.sort(key=lambda act: act[0])  # stable: in one instant, a message before the calls it asked for
    role = acts[-1][1] if acts else str(cycle.get("first_speaker") or "")
    call = acts[-1][2] if acts else None
    doing = _ROLE_DOING.get(role, "working")
    if call is not None:
        tool = str(call.get("tool", ""))
        doing = _TOOL_DOING.get(tool, f"calling {tool}")
        path = (call.get("arguments") or {}).get("path")
        if tool == Tool.WRITE_FILE and path:
            doing += f" {path}"
    count = f"{len(calls)} tool call{'' if len(calls) == 1 else 's'}"
    return " · ".join((f"cycle {cycle.get('index', 0)}", f"{role} {doing}".strip(), count))


def _open(data: Mapping[str, Any], cycle: Mapping[str, Any]) -> bool:
    """The last cycle of a run that is still going and not waiting for a person: it has no end yet."""
    return not data.get("outcome") and not cycle.get("ended_at") and str(data.get("state")) not in _WAITING


def causal_links(trace: Trace | Mapping[str, Any]) -> list[CycleLink]:
    """The cycles of the story, in order; for an ERROR run, the error's cycle first, then the cycle that
    set it off (if one did)."""
    data = _data(trace)
    cycles = list(data.get("cycles") or [])
    end = _end(data)
    if data.get("outcome") == "ERROR":
        failing = [c for c in cycles if c.get("result") == "ERROR"]
        where = failing[-1] if failing else (cycles[-1] if cycles else None)
        cause = root_cause(data)
        if where is None:
            return [CycleLink(cycle=0, said=f"ERROR: {cause}" if cause else "ERROR")]
        error = CycleLink(cycle=int(where.get("index", 0)), said=f"ERROR: {cause}" if cause else "ERROR")
        first = first_cause(data)
        if first is None:
            return [error]
        return [error, dataclasses.replace(cycle_link(first, reviewer_of(data), detailed=True), cause=True)]
    reviewer = reviewer_of(data)
    answers = list(data.get("answers") or [])
    links: list[CycleLink] = []
    for position, cycle in enumerate(cycles):
        index = int(cycle.get("index", position + 1))
        then = (end,) if position == len(cycles) - 1 else _answered(answers, index)
        links.append(cycle_link(cycle, reviewer, then=then))
    return links


def causal_line(trace: Trace | Mapping[str, Any], *, live: bool = False) -> str:
    """The whole story in one line, its cycles joined by ` · `.

    Example: `cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator
    PASS → PASSED`; for an ERROR run `cycle 2: ERROR: <root cause> · set off by cycle 1: …` (or the
    error alone); before any cycle, the outcome or
    the state alone (`ERROR: <reason>`, `not started`). `live`: the run is still going (a process
    executes it), so its open last cycle says what is happening now (`now_line`), not "running".
    """
    data = _data(trace)
    links = causal_links(data)
    if not links:
        return _end(data)
    if links[0].cycle == 0:  # an ERROR before the first cycle
        return links[0].said
    texts = [link.text() for link in links]
    cycles = list(data.get("cycles") or [])
    if live and cycles and _open(data, cycles[-1]):
        texts[-1] = now_line(cycles[-1])
    return " · ".join(texts)
