"""Why a run ended as it did, in one line: the causal story of its cycles.

    cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator PASS → PASSED

Computed from the trace alone (each cycle's verdict, gates and result, the transitions, the people's
answers, the outcome and its reason), so `pse trace show` and the dashboard tell the same story. An
ERROR run's story is its root cause only: the gates a stopped cycle failed ("the Evaluator did not run
run_pytest") are consequences of the stop, not causes.

Pure: no I/O. It takes a `Trace` or the trace's JSON as read from `trace.json` (a dict), and returns
plain text; whoever prints it escapes it (a model wrote the reason codes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pse.roles import SINGLE_AGENT, Role
from pse.trace import Trace

__all__ = [
    "CycleLink",
    "causal_line",
    "causal_links",
    "cycle_link",
    "first_sentence",
    "reviewer_of",
    "root_cause",
]

_WAITING = {"AWAITING_ANSWER": "waiting for answers", "AWAITING_APPROVAL": "waiting for approval"}
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
    """

    cycle: int
    said: str
    gates: tuple[str, ...] = ()
    enforced: bool = True
    result: str = ""
    then: tuple[str, ...] = ()
    status: str = ""

    def text(self) -> str:
        """The link as it reads in the line: `cycle 1: Evaluator PASS → gate `x` failed → PARTIAL`."""
        parts = [f"cycle {self.cycle}: {self.said}"]
        if self.gates:
            names = ", ".join(f"`{g}`" for g in self.gates)
            parts.append(f"gate{'s' if len(self.gates) > 1 else ''} {names} failed")
            if not self.enforced:
                parts[-1] += " (not enforced)"
        if self.result and (self.gates or self.result != self.status):
            parts.append(self.result)
        parts += [step for step in self.then if step != parts[-1]]
        return " → ".join(parts)


def _data(trace: Trace | Mapping[str, Any]) -> Mapping[str, Any]:
    return trace.model_dump(mode="json", by_alias=True) if isinstance(trace, Trace) else trace


def first_sentence(text: str) -> str:
    """The cause without its advice: a reason reads "X failed. Check that ..."; keep "X failed."."""
    flat = " ".join(str(text).split())
    head = _SENTENCE_END.split(flat, maxsplit=1)[0]
    return head if len(head) <= _MAX_CAUSE else head[: _MAX_CAUSE - 1] + "…"


def _failed_gates(gate: Mapping[str, Any]) -> tuple[str, ...]:
    results = gate.get("results") or []
    if results:
        return tuple(str(r.get("name", "")) for r in results if not r.get("passed", True))
    return tuple(str(f).split(": ", 1)[0] for f in gate.get("failures") or [])


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
    return SINGLE_AGENT if (data.get("settings") or {}).get("team") == "single" else str(Role.EVALUATOR)


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
    cycle: Mapping[str, Any], reviewer: str = Role.EVALUATOR, *, then: tuple[str, ...] = ()
) -> CycleLink:
    """The link of one cycle (a trace's cycle as JSON, or what a live view knows of it: its index,
    verdict, gate, stop, review error and result). Gates count only when there was a verdict: without
    a review, they failed because the cycle was stopped."""
    gate = cycle.get("gate") or {}
    said, status = _said(cycle, reviewer)
    return CycleLink(
        cycle=int(cycle.get("index", 0)),
        said=said,
        gates=_failed_gates(gate) if cycle.get("verdict") else (),
        enforced=bool(gate.get("enforced", True)),
        result=str(cycle.get("result") or ""),
        then=then,
        status=status,
    )


def causal_links(trace: Trace | Mapping[str, Any]) -> list[CycleLink]:
    """The cycles of the story, in order (for an ERROR run, only the cycle that holds the root cause)."""
    data = _data(trace)
    cycles = list(data.get("cycles") or [])
    end = _end(data)
    if data.get("outcome") == "ERROR":
        failing = [c for c in cycles if c.get("result") == "ERROR"]
        where = failing[-1] if failing else (cycles[-1] if cycles else None)
        cause = root_cause(data)
        if where is None:
            return [CycleLink(cycle=0, said=f"ERROR: {cause}" if cause else "ERROR")]
        return [CycleLink(cycle=int(where.get("index", 0)), said=f"ERROR: {cause}" if cause else "ERROR")]
    reviewer = reviewer_of(data)
    answers = list(data.get("answers") or [])
    links: list[CycleLink] = []
    for position, cycle in enumerate(cycles):
        index = int(cycle.get("index", position + 1))
        then = (end,) if position == len(cycles) - 1 else _answered(answers, index)
        links.append(cycle_link(cycle, reviewer, then=then))
    return links


def causal_line(trace: Trace | Mapping[str, Any]) -> str:
    """The whole story in one line, its cycles joined by ` · `.

    Example: `cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator
    PASS → PASSED`; for an ERROR run `cycle 1: ERROR: <root cause>`; before any cycle, the outcome or
    the state alone (`ERROR: <reason>`, `not started`).
    """
    links = causal_links(trace)
    if not links:
        return _end(_data(trace))
    if links[0].cycle == 0:  # an ERROR before the first cycle
        return links[0].said
    return " · ".join(link.text() for link in links)
