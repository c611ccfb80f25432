"""One cycle: the phases of the roles, in order, each one role with the ToolAgent until its final message.

`run_cycle` runs them and returns a typed `CycleOutcome`: the plan, the verdict or the review error, a
`<blocked>`, or why the cycle was stopped (deadline, budget, cancellation, turn cap, infrastructure).
Each role's final message is parsed once, here. Between phases the run's state machine moves through
its table (PLANNED → RUNNING → REVIEWING); what the outcome *means* (gates, retries, escalation) is the
engine's decision. Every message is recorded in the cycle, charged to the ledger and announced as it
arrives; tool records arrive pushed by the executor (see `RunEvents`).

Stopping: the deadline is a timer on the event loop. A stop first closes the cycle's failure box (no
model call starts any more) and cancels the cycle's token, and only then closes AutoGen's stream, which
waits for the team to wind down: cancelling first is what makes that wait short.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from autogen_agentchat.base import ChatAgent
from autogen_agentchat.messages import BaseChatMessage, ThoughtEvent
from autogen_core import CancellationToken
from autogen_core.models import AssistantMessage, LLMMessage, UserMessage

from pse.engine._events import RunEvents
from pse.engine._graph import graph_problem
from pse.engine._ledger import Ledger
from pse.engine._nudges import blocked_early, pass_early, to_write, unwritten
from pse.engine._state import State, StateMachine
from pse.engine._steps import StepWiring, run_steps
from pse.events import (
    BlockedRecord,
    ClarificationRecord,
    FormatRepair,
    FormatRepairEvent,
    MessageEvent,
    MessageRecord,
    PlanRecord,
    ToolCallRecord,
    VerdictRecord,
)
from pse.exceptions import ProtocolError, RunCancelled, RunFailure, ToolInfrastructureError
from pse.protocol import find_blocked, find_clarification, parse_plan, parse_verdict, render_plan
from pse.roles import SINGLE_AGENT, TASK_SOURCE, TOOL_AGENT, Role
from pse.team import ContextFactory, CycleOpening, FailureBox, Phase, RoleSetup
from pse.tokens import count_tokens
from pse.trace import CycleRecord

__all__ = [
    "Crew",
    "CycleOutcome",
    "CycleStop",
    "NextCycle",
    "RunControl",
    "phase_order",
    "repair_request",
    "run_cycle",
]

CycleKind = Literal["initial", "revise", "replan"]
DEADLINE_REASON = "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)"


@dataclass(frozen=True)
class CycleStop:
    """Why a cycle was stopped before its natural end: TIMEOUT or ERROR, with a reason."""

    outcome: Literal["TIMEOUT", "ERROR"]
    reason: str


@dataclass(frozen=True)
class NextCycle:
    """The cycle the run's state calls for: its kind, the roles' phases in order, and what crosses into it.

    Attributes:
        kind: initial, revise (after a PARTIAL: the Specialist starts) or replan (after a FAIL).
        roles: the phases, in order.
        packet: the task message of the cycle (the task, plus the step_buffer after the first cycle).
        step_buffer: what crossed from the previous cycle (None on the first).
        briefs: role → the text that replaces the packet in its context (the bare task on a revise).
        carried: final messages of an earlier cycle that still hold, placed before this cycle's own
            (the fixed plan on a revise, as the Planner's: the same text the first cycle's roles saw).
        notes: role → a message placed after the finals in its context (the step_buffer for the
            Specialist on a revise), so everything before it is a prefix an earlier prompt sent.
    """

    kind: CycleKind
    roles: tuple[str, ...]
    packet: str
    step_buffer: str | None = None
    briefs: Mapping[str, str] = field(default_factory=dict)
    carried: tuple[tuple[str, str], ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass
class CycleOutcome:
    """What a cycle came to. At most one of verdict / review_error is set; `stop` when it was cut short."""

    plan: PlanRecord | None = None
    verdict: VerdictRecord | None = None
    review_error: str | None = None
    blocked: BlockedRecord | None = None
    clarification: ClarificationRecord | None = None
    stop: CycleStop | None = None
    step_failure: str | None = None
    """execution = steps: a step failed, or went over its retries (the engine re-plans)."""
    review_plan: PlanRecord | None = None
    """execution = steps: the part of the plan the final verdict judges (its gates use it)."""


@dataclass(frozen=True)
class Crew:
    """Who works in a cycle: the roles, the ToolAgent beside them, and how their contexts open."""

    roles: Mapping[str, RoleSetup]
    tool_agent: ChatAgent
    contexts: ContextFactory
    turns_per_cycle: int
    format_retries: int = 1
    questions: bool = False  # the Planner may ask a person (PSE_PLANNER_QUESTIONS)
    steps: StepWiring | None = None  # execution = steps: the plan's steps run one by one (`_steps`)
    missing: Callable[[Sequence[str]], list[str]] | None = None
    """Which of these workspace paths do not exist: a Specialist's report before every output of the plan
    is written is sent back once, as a format repair (small models report after the first file)."""
    owed: Callable[[Sequence[ToolCallRecord]], list[str]] | None = None
    """The required checks an Evaluator's PASS comes before (`evidence_owed`): such a PASS is sent back once,
    so a model that forgot a check runs it in its phase instead of losing the cycle to a hard gate."""


@dataclass
class RunControl:
    """The run's state a cycle works against: the state machine, the ledger, the event sink, the limits.

    Attributes:
        infrastructure_error: the tool machinery's failure, if any (the run must end as ERROR).
        external_stop: why the run was stopped from outside (Ctrl-C, the dashboard), if it was.
    """

    machine: StateMachine
    ledger: Ledger
    events: RunEvents
    deadline: float
    infrastructure_error: Callable[[], RunFailure | None]
    external_stop: Callable[[], str | None]
    token: CancellationToken = field(default_factory=CancellationToken)


_ENTRY: dict[str, tuple[tuple[State, str], ...]] = {
    Role.SPECIALIST: ((State.RUNNING, "Specialist started"),),
    Role.EVALUATOR: ((State.REVIEWING, "Specialist reported; Evaluator started"),),
    # The single team's one agent: no Planner (the task is its plan), no Evaluator (it reviews itself).
    SINGLE_AGENT: (
        (State.PLANNED, "single team: no Planner, the task is the plan"),
        (State.RUNNING, "Agent started"),
    ),
}


async def run_cycle(crew: Crew, spec: NextCycle, record: CycleRecord, run: RunControl) -> CycleOutcome:
    """Run the phases of `spec` in order, filling `record`; return what the cycle came to."""
    outcome = CycleOutcome()
    box = FailureBox(admit=run.ledger.admits)
    finals: list[tuple[str, str]] = list(spec.carried)
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        box.close(DEADLINE_REASON)
        run.token.cancel()

    alarm = asyncio.get_running_loop().call_at(run.deadline, expire)
    crew.contexts.record(TASK_SOURCE, spec.packet)
    try:
        for role in spec.roles:
            if role == Role.SPECIALIST and crew.steps is not None and spec.kind != "revise":
                if outcome.plan is not None:
                    await run_steps(crew, crew.steps, spec, record, run, box, outcome)
                break
            for state, why in _ENTRY.get(role, ()):
                run.machine.enter(state, why)
            notes = spec.notes
            todo = (
                to_write(record.plan, spec.packet, spec.kind)
                if role == Role.SPECIALIST and spec.kind != "revise"
                else None
            )
            if todo is not None:  # the one thing a small model must not mistake for missing data
                notes = {**notes, role: "\n\n".join(filter(None, [notes.get(role), todo]))}
            opening = crew.contexts.opening(
                role, CycleOpening(spec.packet, spec.briefs, tuple(finals), notes)
            )
            while True:
                start = len(record.messages)
                phase = Phase(
                    crew.roles[role], opening, crew.tool_agent, box, crew.turns_per_cycle - record.turns
                )
                final = await _run_phase(phase, crew.contexts, record, run, box, outcome)
                if outcome.stop is None and (expired or box.refused is not None):
                    outcome.stop = CycleStop("TIMEOUT", DEADLINE_REASON if expired else str(box.refused))
                if outcome.stop is None and box.failure is None and not phase.finished.fired:
                    turns = f"turn cap: {crew.turns_per_cycle} turns in one cycle (PSE_TURNS_PER_CYCLE)"
                    outcome.stop = CycleStop("TIMEOUT", turns)
                if outcome.stop is not None or box.failure is not None:
                    return _closed(outcome, box)
                problem = _read_final(role, final, outcome, run, questions=crew.questions, steps=crew.steps)
                # A report before every output exists goes back once, and so does a block on missing data
                # while outputs are unwritten (what is missing may be the Specialist's own files); after
                # that the gates judge the report, and a block stands: the honest exit stays open.
                early = (
                    unwritten(crew.missing, record.plan, _told(crew, role, spec.packet))
                    if role == Role.SPECIALIST and problem is None
                    else None
                )
                if outcome.blocked is not None:
                    early = blocked_early(early, outcome.blocked.reason_code)
                if role == Role.EVALUATOR and problem is None:
                    early = pass_early(crew.owed, outcome.verdict, record.tool_calls)
                record.plan = outcome.plan or record.plan  # in force at once: approvals read its outputs
                if outcome.stop is not None:
                    return _closed(outcome, box)
                repairs = sum(1 for fix in record.repairs if fix.role == role)
                wrong = problem or early
                if wrong is None or repairs >= crew.format_retries:
                    break
                if early is not None and problem is None and role == Role.EVALUATOR:
                    outcome.verdict = None  # asked again: the next turn's verdict is the one
                # Ask once more, with the parser's own words: the turn, not the run, was malformed.
                fix = FormatRepair(role=role, error=wrong, attempt=repairs + 1)
                record.repairs.append(fix)
                run.events.emit(
                    FormatRepairEvent(run_id=run.events.run_id, at=fix.at, cycle=record.index, repair=fix)
                )
                # A parse problem gets the repair frame; a nudge is sent as it is (said as what is owed, a
                # small model followed it; framed as an unreadable message, it wrote its last file again).
                request = repair_request(role, problem) if problem is not None else wrong
                crew.contexts.record(TASK_SOURCE, request)
                seen = [_as_seen_by(role, m.source, m.content) for m in record.messages[start:]]
                opening = [*opening, *seen, UserMessage(content=request, source=TASK_SOURCE)]
            if not _conclude(role, final, problem, outcome):
                break
            # The plan crosses as PSE read it, rendered: what it enforces, and the very text a revise
            # cycle sends again (a prefix a provider's cache can serve), never the Planner's prose.
            shown = render_plan(outcome.plan) if role == Role.PLANNER and outcome.plan is not None else final
            finals.append((role, shown))
    finally:
        alarm.cancel()
    return _closed(outcome, box)


def _told(crew: Crew, role: str, packet: str) -> tuple[str, ...]:
    """What `role` was told in words, the most specific first: its system message (whose general parts name
    no file: the prompts show placeholders only, so a sentence naming an output is the task's), then its
    task message."""
    return (crew.roles[role].system_message, packet)


def _closed(outcome: CycleOutcome, box: FailureBox) -> CycleOutcome:
    if box.failure is not None:
        outcome.stop = CycleStop("ERROR", f"{type(box.failure).__name__}: {box.failure}")
    return outcome


def _as_seen_by(role: str, source: str, text: str) -> LLMMessage:
    """A message of `role`'s phase as its model saw it: its own turns as assistant, results as user."""
    return (
        AssistantMessage(content=text, source=source)
        if source == role
        else UserMessage(content=text, source=source)
    )


_OWED: dict[str, str] = {
    Role.SPECIALIST: "every output of the plan written with write_file, then exactly one <report> (or "
    '<blocked reason_code="…">why</blocked> if the plan cannot be carried out)',
    Role.PLANNER: 'exactly one <plan> with a <goal>, numbered <criterion id="AC1">…</criterion> entries and '
    '<output path="…"/> entries (or <blocked reason_code="…">why</blocked> if you cannot plan)',
    Role.EVALUATOR: 'exactly one <verdict status="PASS|PARTIAL|FAIL|BLOCKED"> holding <reason_code>, one '
    '<criterion id="…" met="true|false">finding</criterion> per plan criterion, and <summary>',
    SINGLE_AGENT: 'exactly one <verdict status="PASS|PARTIAL|FAIL|BLOCKED"> on your own work, holding '
    '<reason_code>, one <criterion id="…" met="true|false">finding</criterion> per requirement you '
    "checked, and <summary>",
}


def repair_request(role: str, problem: str) -> str:
    """What the engine says to a role whose final message could not be read."""
    return (
        f"PSE could not read your last message: {problem}. Your turn must end with {_OWED[role]}. "
        "Send that message now; nothing else is needed."
    )


def _read_final(
    role: str,
    text: str,
    outcome: CycleOutcome,
    run: RunControl,
    *,
    questions: bool = False,
    steps: StepWiring | None = None,
) -> str | None:
    """Parse a role's final message once: None when it holds what the role owes, else the parse error.

    With `questions`, a Planner's `<clarification>` is what it owes too (the run then waits for a person).
    An Evaluator or the single agent may end with `<blocked>` instead of a verdict (SPEC_CONFLICT: a given
    test contradicts the specification); a message that holds a verdict is read as the verdict.
    """
    if role in (Role.PLANNER, Role.SPECIALIST) or (
        role in (Role.EVALUATOR, SINGLE_AGENT) and "<verdict" not in text
    ):
        try:
            outcome.blocked = find_blocked(text, role)
        except ProtocolError as exc:  # a <blocked> the model never closed: its mistake, not ours
            if role != Role.SPECIALIST:
                return str(exc)  # repaired like a missing plan or verdict, else PLAN_ERROR / REVIEW_ERROR
            outcome.review_error = f"REPORT_ERROR: {exc}"
            outcome.stop = CycleStop("ERROR", outcome.review_error)
            return None
        if outcome.blocked is not None:
            return None
    if role == Role.PLANNER and questions and "<clarification" in text:
        try:
            outcome.clarification = find_clarification(text)
        except ProtocolError as exc:
            return str(exc)
        if outcome.clarification is not None:
            return None
    if role == Role.PLANNER:
        try:
            plan = parse_plan(text)
        except ProtocolError as exc:
            return str(exc)
        if steps is not None and (problem := graph_problem(plan, steps.max_steps, steps.kept)) is not None:
            return f"plan: {problem}"
        outcome.plan = plan
        how = f"{len(plan.steps)} steps and " if steps is not None else ""
        run.machine.move(State.PLANNED, f"plan fixed with {how}{len(plan.criteria)} criteria")
    elif role in (Role.EVALUATOR, SINGLE_AGENT):
        try:
            outcome.verdict = parse_verdict(text)
        except ProtocolError as exc:
            return str(exc)
        if role == SINGLE_AGENT:
            run.machine.move(State.REVIEWING, "the Agent reviewed its own work")
    return None


def _conclude(role: str, final: str, problem: str | None, outcome: CycleOutcome) -> bool:
    """Record what an unrepaired problem means; False when the cycle ends here (blocked, or no plan)."""
    if outcome.blocked is not None or outcome.clarification is not None:
        return False
    if problem is None:
        return True
    if role == Role.PLANNER:
        outcome.review_error = f"PLAN_ERROR: {problem}"
        outcome.stop = CycleStop("ERROR", outcome.review_error)
        return False
    outcome.review_error = f"REVIEW_ERROR: {problem}"
    return True


async def _run_phase(
    phase: Phase,
    contexts: ContextFactory,
    record: CycleRecord,
    run: RunControl,
    box: FailureBox,
    outcome: CycleOutcome,
    step: str | None = None,
) -> str:
    """Stream one phase into the cycle's record; return the role's last message (its final one)."""
    final = ""
    thoughts: dict[str, str] = {}
    try:
        # aclosing: a phase stopped early (break) must close its stream now, not at garbage collection.
        async with contextlib.aclosing(phase.run_stream(run.token)) as stream:
            async for item in stream:
                if isinstance(item, ThoughtEvent):
                    thoughts[item.source] = item.content  # it comes just before its message
                    continue
                if not isinstance(item, BaseChatMessage):
                    continue  # the TaskResult, and AutoGen's other events
                text = _record(item, record, run, thoughts.pop(item.source, None), step)
                contexts.record(item.source, text)
                if item.source != TOOL_AGENT:
                    final = text
                stop = _stop_now(item, run)
                if stop is not None:
                    outcome.stop = stop
                    box.close(stop.reason)
                    run.token.cancel()
                    break
    except asyncio.CancelledError:
        # Our own token (a stop decided here, the deadline, or from outside) surfaces as CancelledError;
        # a cancellation of the task that runs the engine must still propagate.
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        reason = run.external_stop()
        if outcome.stop is None and reason is not None:
            outcome.stop = CycleStop("ERROR", f"CANCELLED: {reason}")
        elif outcome.stop is None and box.closed is None:
            outcome.stop = CycleStop("ERROR", "cycle cancelled")
    except (RunFailure, RunCancelled):
        # A model failure the box holds (the cycle ends ERROR with it), or a call refused once the
        # box was closed (the stop already says why). Anything else is a bug and propagates.
        if box.failure is None and box.closed is None:
            raise
    return final


def _record(
    item: BaseChatMessage, record: CycleRecord, run: RunControl, thought: str | None, step: str | None = None
) -> str:
    """File and announce one message (with the reasoning that came with it); return its text."""
    usage = item.models_usage
    prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)
    text = item.to_text()
    finish, model_ms = (
        run.ledger.claim_reply(item.source, text) if item.source != TOOL_AGENT else (None, None)
    )
    message = MessageRecord(
        source=item.source,
        content=text,
        prompt_tokens=prompt,
        completion_tokens=completion,
        thought=thought,
        thought_tokens=count_tokens(thought) if thought else 0,
        step=step,
        finish_reason=finish,
        model_ms=model_ms,
    )
    record.messages.append(message)
    record.turns += 1
    run.events.emit(
        MessageEvent(run_id=run.events.run_id, cycle=record.index, message=message, at=message.at)
    )
    return text


def _stop_now(item: BaseChatMessage, run: RunControl) -> CycleStop | None:
    """Why the cycle must stop after this message, if it must."""
    if item.source == TOOL_AGENT:
        failure = run.infrastructure_error()
        if isinstance(failure, ToolInfrastructureError):
            return CycleStop("ERROR", f"tool infrastructure failed: {failure}")
        if failure is not None:  # e.g. a replayed tool call that differs from its recording
            return CycleStop("ERROR", f"{type(failure).__name__}: {failure}")
    reason = run.external_stop()
    if reason is not None:
        return CycleStop("ERROR", f"CANCELLED: {reason}")
    budget = run.ledger.exhausted()
    return CycleStop("TIMEOUT", budget) if budget is not None else None


def phase_order(first: str) -> tuple[str, ...]:
    """The phases of a cycle that starts with `first`: always ending with the Evaluator's review."""
    order: Sequence[str] = (Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR)
    return tuple(order[order.index(first) :])
