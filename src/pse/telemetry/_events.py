"""The span events of a cycle: what happened at a moment, rather than over a time (see `pse.telemetry`).

Each carries PSE's own words (statuses, reason codes, rules, gate details); what a model or a person
wrote (findings, summaries, questions, notes, diffs) only with `content`.
"""

from __future__ import annotations

from pse.events import TransitionRecord
from pse.telemetry._tree import Attributes, Draft, ns
from pse.trace import CycleRecord, Trace

__all__ = ["cycle_events", "transition"]


def cycle_events(
    span: Draft, c: CycleRecord, trace: Trace, transitions: list[TransitionRecord], *, content: bool
) -> None:
    """The cycle's events: verdict, gates, blocked, questions, repairs, drifts, retrievals, approvals,
    transitions (its own and its verdict's)."""
    ended = ns(c.ended_at) if c.ended_at else span.end
    if c.verdict is not None:
        v = c.verdict
        found: Attributes = {
            "pse.verdict.status": v.status,
            "pse.verdict.reason_code": v.reason_code,
            "pse.verdict.criteria_met": sum(1 for r in v.criteria if r.met),
            "pse.verdict.criteria_total": len(v.criteria),
            "pse.verdict.unmet": [r.id for r in v.criteria if not r.met],
        }
        if content:
            found["pse.verdict.summary"] = v.summary
            found["pse.verdict.findings"] = [f"{r.id}: {r.finding}" for r in v.criteria]
        span.event("pse.verdict", ended, found)
    elif c.review_error is not None:
        span.event("pse.review_error", ended, {"pse.review_error": c.review_error} if content else {})
    if c.ended_at is not None:
        for gate in c.gate.results:
            span.event(
                "pse.gate",
                ended,
                {
                    "pse.gate.name": gate.name,
                    "pse.gate.passed": gate.passed,
                    "pse.gate.detail": gate.detail,
                },
            )
    if c.blocked is not None:
        blocked: Attributes = {
            "pse.blocked.role": c.blocked.role,
            "pse.blocked.reason_code": c.blocked.reason_code,
        }
        if content:
            blocked["pse.blocked.detail"] = c.blocked.detail
        span.event("pse.blocked", ended, blocked)
    if c.clarification is not None:
        asked: Attributes = {"pse.clarification.questions": len(c.clarification.questions)}
        if content:
            asked["pse.clarification.text"] = [q.text for q in c.clarification.questions]
        span.event("pse.clarification", ended, asked)
    for fix in c.repairs:
        repaired: Attributes = {"pse.repair.role": fix.role, "pse.repair.attempt": fix.attempt}
        if content:
            repaired["pse.repair.error"] = fix.error
        span.event("pse.format_repair", ns(fix.at), repaired)
    for d in c.drifts:
        drift: Attributes = {
            "pse.drift.role": d.role,
            "pse.drift.turn": d.turn,
            "pse.drift.message": d.message,
            "pse.drift.speaker": d.speaker,
            "pse.drift.recorded_chars": d.recorded_chars,
            "pse.drift.chars": d.chars,
        }
        if content:
            drift["pse.drift.diff"] = d.diff
        span.event("pse.drift", ns(d.at), drift)
    for r in c.retrievals:
        got: Attributes = {"pse.retrieval.results": len(r.results)}
        if content:
            got["pse.retrieval.query"] = r.query
        span.event("pse.retrieval", ns(r.at), got)
    for a in (a for a in trace.approvals if a.cycle == c.index):
        held: Attributes = {
            "pse.approval.id": a.id,
            "pse.approval.requester": a.requester,
            "pse.approval.tool": a.tool,
            "pse.approval.rule": a.rule,
            "pse.approval.decision": a.decision or "",
            "pse.approval.via": a.via or "",
            "pse.approval.scope": a.scope,
        }
        if content:
            held |= {"pse.approval.fired": a.fired, "pse.approval.preview": a.preview}
            held |= {"pse.approval.by": a.by or "", "pse.approval.reason": a.reason}
        span.event("pse.approval", ns(a.decided_at or a.requested_at), held)
    for t in transitions:
        span.event("pse.transition", ns(t.at), transition(t))


def transition(t: TransitionRecord) -> Attributes:
    """The attributes of a `pse.transition` event."""
    return {"pse.transition.from": t.from_, "pse.transition.to": t.to, "pse.transition.reason": t.reason}
