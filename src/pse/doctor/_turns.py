"""How well a run's models kept PSE's protocol: the share of role turns that parsed on the first try.

Counted from the trace alone, with PSE's own parsers, so any run can be scored after the fact (the
real-model tests and `make bench` share this). A *turn* is what a role owes at one point of a phase:
a tool request or its final message. Each role message is one *attempt*; an attempt that does not
parse, followed by another message of the same role before any other role speaks (the ToolAgent's
error result or the engine's repair request in between), is the same turn tried again. What parses:

- a message holding `<tool_calls>`: every request in it is well-formed (`parse_tool_calls`: a known
  tool, its required parameters, closed tags); a policy denial is no parse failure;
- the Planner's final message: a `<plan>` (`parse_plan`) or a `<blocked>`;
- the Specialist's final message: a report (any text) or a `<blocked>`; not empty, and no stray
  `<invoke>` outside a `<tool_calls>` block;
- the Evaluator's final message: exactly one `<verdict>` (`parse_verdict`), or a `<blocked>` (the
  SPEC_CONFLICT its grammar allows, when the message holds no verdict; whether it stands is the engine's
  decision, not a parse).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pse.exceptions import ProtocolError
from pse.protocol import (
    DsmlError,
    ParamSpec,
    ToolSignature,
    find_blocked,
    has_tool_calls,
    parse_plan,
    parse_tool_calls,
    parse_verdict,
)
from pse.roles import ROLES, Role
from pse.tools import Tool, builtin_tools
from pse.trace import Trace

__all__ = [
    "FORMAT_ERRORS",
    "ParseShare",
    "RunScore",
    "TurnParse",
    "parse_share",
    "parse_turns",
    "protocol_signatures",
    "score_run",
]

FORMAT_ERRORS = ("PLAN_ERROR", "REPORT_ERROR", "REVIEW_ERROR")
"""How the reason of an ERROR caused by format starts: no parseable plan, report or verdict."""

_STRAY = ("<invoke", "<parameter", "<tool_call ", "<tool_call>")


def protocol_signatures() -> dict[str, ToolSignature]:
    """Every tool a role of a built-in task may request (the built-ins and `search_knowledge`)."""
    signatures = builtin_tools().signatures()
    query, k = ParamSpec("query"), ParamSpec("k", required=False, default="5")
    signatures[Tool.SEARCH_KNOWLEDGE] = ToolSignature(Tool.SEARCH_KNOWLEDGE, (query, k))
    return signatures


@dataclass(frozen=True)
class TurnParse:
    """One role turn: how many attempts it took and whether any parsed."""

    cycle: int
    role: str
    kind: str
    """tool_calls, plan, report, verdict or blocked: what the turn's last attempt was."""
    attempts: int
    parsed: bool
    problem: str = ""
    """Why the first attempt did not parse ("" when it did)."""

    @property
    def first_try(self) -> bool:
        """Parsed at the first attempt."""
        return self.parsed and self.attempts == 1


@dataclass(frozen=True)
class ParseShare:
    """Turn counts of a run (or of several, added with `+`)."""

    turns: int = 0
    first_try: int = 0
    after_repair: int = 0
    """Turns that parsed at all, the first attempt or a later one."""
    by_role: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    """role → (turns, first_try, after_repair)."""
    problems: tuple[str, ...] = ()
    """Why first attempts failed, in order (`cycle N Role: ...`)."""

    @property
    def first_try_share(self) -> float | None:
        """first_try / turns, None without turns."""
        return self.first_try / self.turns if self.turns else None

    @property
    def after_repair_share(self) -> float | None:
        """after_repair / turns, None without turns."""
        return self.after_repair / self.turns if self.turns else None

    def __add__(self, other: ParseShare) -> ParseShare:
        zero = (0, 0, 0)
        by_role: dict[str, tuple[int, int, int]] = {}
        for role in (r for r in ROLES if r in self.by_role or r in other.by_role):
            (t1, f1, a1), (t2, f2, a2) = self.by_role.get(role, zero), other.by_role.get(role, zero)
            by_role[role] = (t1 + t2, f1 + f2, a1 + a2)
        return ParseShare(
            self.turns + other.turns,
            self.first_try + other.first_try,
            self.after_repair + other.after_repair,
            by_role,
            self.problems + other.problems,
        )

    def as_dict(self) -> dict[str, object]:
        """Plain JSON-able figures (shares rounded to 3 places)."""

        def share(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {
            "turns": self.turns,
            "first_try": self.first_try,
            "after_repair": self.after_repair,
            "first_try_share": share(self.first_try_share),
            "after_repair_share": share(self.after_repair_share),
            "by_role": {
                role: {"turns": t, "first_try": f, "after_repair": a}
                for role, (t, f, a) in self.by_role.items()
            },
            "problems": list(self.problems),
        }


def _attempt(
    role: str, text: str, signatures: Mapping[str, ToolSignature], max_invokes: int
) -> tuple[str, str]:
    """(kind, problem) of one role message; problem is "" when it parses."""
    if has_tool_calls(text):
        parsed = parse_tool_calls(text, signatures, max_invokes=max_invokes)
        errors = [item for item in parsed.items if isinstance(item, DsmlError)]
        problem = f"{errors[0].kind}: {errors[0].message}" if errors else ""
        return "tool_calls", problem if parsed.items else "empty <tool_calls>"
    judging = role == Role.EVALUATOR
    try:  # as the engine reads a final (`read_final`): a judge's message holding a verdict is the verdict
        if not (judging and "<verdict" in text) and find_blocked(text, role) is not None:
            return "blocked", ""
    except ProtocolError as exc:
        return "blocked", str(exc)
    if judging:
        try:
            parse_verdict(text)
        except ProtocolError as exc:
            return "verdict", str(exc)
        return "verdict", ""
    if role == Role.PLANNER:
        try:
            parse_plan(text)
        except ProtocolError as exc:
            return "plan", str(exc)
        return "plan", ""
    if not text.strip():
        return "report", "empty message"
    stray = next((tag for tag in _STRAY if tag in text), None)
    return "report", f"{stray.strip()}> outside a <tool_calls> block" if stray else ""


def parse_turns(trace: Trace, signatures: Mapping[str, ToolSignature] | None = None) -> list[TurnParse]:
    """Every role turn of the run, in order (see the module docstring for what parses)."""
    tools = signatures if signatures is not None else protocol_signatures()
    max_invokes = int(str(trace.settings.get("max_invokes_per_message", 16)))
    turns: list[TurnParse] = []
    for cycle in trace.cycles:
        open_turn: TurnParse | None = None
        for message in cycle.messages:
            if message.source not in ROLES:
                continue  # the ToolAgent's results and the task message keep a turn open
            kind, problem = _attempt(message.source, message.content, tools, max_invokes)
            if open_turn is not None and open_turn.role == message.source and not open_turn.parsed:
                turns[-1] = open_turn = TurnParse(
                    cycle.index, message.source, kind, open_turn.attempts + 1, not problem, open_turn.problem
                )
                continue
            open_turn = TurnParse(cycle.index, message.source, kind, 1, not problem, problem)
            turns.append(open_turn)
    return turns


def parse_share(trace: Trace, signatures: Mapping[str, ToolSignature] | None = None) -> ParseShare:
    """The run's turn counts: how many parsed on the first try, how many after a repair."""
    turns = parse_turns(trace, signatures)
    by_role: dict[str, tuple[int, int, int]] = {}
    for role in ROLES:
        mine = [t for t in turns if t.role == role]
        if mine:
            by_role[role] = (len(mine), sum(t.first_try for t in mine), sum(t.parsed for t in mine))
    return ParseShare(
        turns=len(turns),
        first_try=sum(t.first_try for t in turns),
        after_repair=sum(t.parsed for t in turns),
        by_role=by_role,
        problems=tuple(f"cycle {t.cycle} {t.role}: {t.problem}" for t in turns if t.problem),
    )


@dataclass(frozen=True)
class RunScore:
    """One finished run as the real-model tests and the bench report it."""

    task: str
    outcome: str | None
    outcome_reason: str
    format_error: bool
    """The run ended as ERROR because a role's final message did not parse (`FORMAT_ERRORS`)."""
    cycles: int
    tokens: int
    wall_s: float | None
    tool_calls: int
    """Tool requests the ToolAgent ran (allowed by the policy)."""
    parse: ParseShare

    def as_dict(self) -> dict[str, object]:
        """Plain JSON-able figures."""
        return {
            "task": self.task,
            "outcome": self.outcome,
            "outcome_reason": self.outcome_reason,
            "format_error": self.format_error,
            "cycles": self.cycles,
            "tokens": self.tokens,
            "wall_s": self.wall_s,
            "tool_calls": self.tool_calls,
            "parse": self.parse.as_dict(),
        }


def score_run(trace: Trace, signatures: Mapping[str, ToolSignature] | None = None) -> RunScore:
    """Outcome, whether format caused an ERROR, cycles, tokens, wall time, tool calls and the parse share."""
    wall = None
    if trace.ended_at is not None:
        wall = round(
            (
                datetime.fromisoformat(trace.ended_at) - datetime.fromisoformat(trace.started_at)
            ).total_seconds(),
            1,
        )
    return RunScore(
        task=trace.task,
        outcome=trace.outcome,
        outcome_reason=trace.outcome_reason,
        format_error=trace.outcome == "ERROR" and trace.outcome_reason.startswith(FORMAT_ERRORS),
        cycles=len(trace.cycles),
        tokens=trace.tokens.total,
        wall_s=wall,
        tool_calls=sum(1 for c in trace.cycles for call in c.tool_calls if call.decision == "allowed"),
        parse=parse_share(trace, signatures),
    )
