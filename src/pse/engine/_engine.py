"""The loop engine: plain code that runs cycles, applies the hard gates and the retry rules, keeps budgets,
and writes the trace. No model decides routing, retries or permissions.

Error rule: a model's mistake is an observation (a denied or malformed tool call, answered by the
ToolAgent) or, for a missing/duplicated/malformed plan or verdict, an ERROR of the review recorded in
the trace; infrastructure failure (`RunFailure`) ends the run as ERROR without using a retry; a bug in
our code is recorded as ERROR and then propagates.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from autogen_agentchat.teams import SelectorGroupChat
from autogen_core import CancellationToken

from pse.engine._cycle import CycleHooks, CycleStop, run_cycle
from pse.engine._escalation import write_escalation
from pse.engine._gates import evaluate_gates
from pse.engine._setup import RunSetup
from pse.engine._state import OUTCOME_OF, TERMINAL, State, check_transition
from pse.engine._step_buffer import artifact_list, replan_packet, revise_packet
from pse.engine._trace import CycleRecord, Trace, outcome_event, write_trace
from pse.events import (
    CycleStarted,
    Event,
    MessageEvent,
    MessageRecord,
    RetrievalEvent,
    TokenCount,
    ToolCallEvent,
    TransitionEvent,
    TransitionRecord,
    VerdictEvent,
    utc_now,
)
from pse.protocol import render_plan
from pse.roles import TOOL_AGENT, Role
from pse.team import FailureBox, SpeakerOrder, build_role_agents, build_team
from pse.tokens import count_tokens
from pse.tools import Tool

__all__ = ["Engine", "new_run_id"]

log = logging.getLogger("pse.engine")


def new_run_id(task: str) -> str:
    """A sortable, unique run id: `YYYYmmdd-HHMMSS-<task>-<6 hex>`."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{task}-{secrets.token_hex(3)}"


class Engine:
    """Runs one PSE run to its outcome. Build one per run; `run()` may be called once.

    Args:
        setup: the run's wiring (roles, ToolAgent, workspace, settings, callbacks).
        trace: a trace to go on from (resume); None starts a new run.
    """

    def __init__(self, setup: RunSetup, trace: Trace | None = None) -> None:
        self.setup = setup
        self.settings = setup.settings
        self._resuming = trace is not None
        self.trace = trace or Trace(
            run_id=setup.run_id,
            task=setup.task,
            started_at=utc_now(),
            settings=setup.settings.public_dump(),
            inputs=dict(setup.inputs),
            context_mode=setup.settings.context_mode,
            task_message=setup.task_message,
        )
        if setup.sandbox is not None:
            self.trace.sandbox = setup.sandbox  # a resumed run records the sandbox it goes on under
        self._state = State(self.trace.state)
        self._seen_tool_calls = len(setup.tools.records)
        self._token: CancellationToken | None = None
        self._cancel_reason: str | None = None
        self._deadline = 0.0
        self._history_team: tuple[SelectorGroupChat, SpeakerOrder, FailureBox] | None = None
        self._amount = self.trace.cost.amount

    # ---- public ---------------------------------------------------------------------------

    def cancel(self, reason: str = "cancelled by the user") -> None:
        """Stop the run from outside (Ctrl-C, dashboard); the current cycle ends cleanly and is recorded."""
        self._cancel_reason = reason
        if self._token is not None:
            self._token.cancel()

    async def run(self) -> Trace:
        """Run cycles until the run reaches an outcome; return the final trace (also on disk)."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self.settings.run_timeout_s
        if self._resuming:
            self.trace.resumed += 1
        self._save()
        try:
            while self._state not in TERMINAL:
                if self._state == State.BLOCKED:
                    self._move(State.ESCALATED, "blocked: a person must decide")
                    break
                stop = self._external_stop() or self._budget_stop()
                if stop is not None:
                    self._finish_stop(stop)
                    break
                await self._one_cycle()
        except BaseException as exc:
            if self._state not in TERMINAL:
                self._force_error(f"internal error: {type(exc).__name__}: {exc}")
            raise
        finally:
            self._finalize()
        return self.trace

    # ---- one cycle --------------------------------------------------------------------------

    def _next_cycle(self) -> tuple[str, str, str, str | None, dict[str, str | None]]:
        """(kind, first speaker, packet, step_buffer, briefs) for the cycle the current state calls for."""
        task = self.setup.task_message
        plan = self.trace.plan
        last = self.trace.cycles[-1] if self.trace.cycles else None
        cap = self.settings.step_buffer_tokens
        index = len(self.trace.cycles) + 1
        if self._state == State.REVISING and plan is not None and last is not None:
            buffer = revise_packet(
                cycle=index,
                plan=plan,
                verdict=last.verdict,
                gate=last.gate,
                artifacts=artifact_list(self.setup.workspace),
                cap=cap,
            )
            brief = f"{task}\n\n## The plan (fixed)\n{render_plan(plan)}"
            revise_briefs: dict[str, str | None] = {Role.EVALUATOR: brief}
            return "revise", Role.SPECIALIST, f"{task}\n\n{buffer}", buffer, revise_briefs
        if self._state == State.REPLANNING and last is not None:
            buffer = replan_packet(
                cycle=index, reason=last.result_reason, verdict=last.verdict, plan=plan, cap=cap
            )
            briefs: dict[str, str | None] = {Role.SPECIALIST: task, Role.EVALUATOR: task}
            return "replan", Role.PLANNER, f"{task}\n\n{buffer}", buffer, briefs
        return "initial", Role.PLANNER, task, None, {}

    async def _one_cycle(self) -> None:
        kind, first, packet, buffer, briefs = self._next_cycle()
        cycle = CycleRecord(
            index=len(self.trace.cycles) + 1,
            kind=kind,
            first_speaker=first,
            started_at=utc_now(),
            step_buffer=buffer,
            step_buffer_tokens=count_tokens(buffer) if buffer else 0,
            plan=self.trace.plan if kind == "revise" else None,
            positions_at_start=self.setup.positions() if self.setup.positions is not None else {},
        )
        self.trace.cycles.append(cycle)
        self._emit(
            CycleStarted(
                run_id=self.trace.run_id, cycle=cycle.index, cycle_kind=cycle.kind, first_speaker=first
            )
        )
        if cycle.index == 1:
            for query, results in self.setup.injected_retrievals:
                self._retrieval(cycle, query, results)
        self.setup.tools.new_cycle()
        team, _, box = self._team(first, briefs)
        self._token = CancellationToken()
        if self._cancel_reason is not None:
            self._token.cancel()
        hooks = CycleHooks(
            transition=lambda target, reason: self._move(target, reason),
            state=lambda: self._state,
            message=self._on_message,
            tool_calls=self._collect_tool_calls,
            budget_exceeded=lambda: s.reason if (s := self._budget_stop()) else None,
            infrastructure_error=lambda: self.setup.tools.infrastructure_error,
        )
        stop = await run_cycle(
            team, cycle, packet, hooks, box, self._token, self._deadline, self._external_stop
        )
        self._collect_tool_calls(cycle)
        cycle.ended_at = utc_now()
        self._decide(cycle, stop)
        if self.setup.positions is not None:
            self.trace.cassette_positions = self.setup.positions()
        self._save()

    def _team(
        self, first: str, briefs: dict[str, str | None]
    ) -> tuple[SelectorGroupChat, SpeakerOrder, FailureBox]:
        turns = self.settings.turns_per_cycle
        if self.settings.context_mode == "history":
            # The baseline plain AutoGen gives: one team, every role sees the whole history.
            if self._history_team is None:
                box = FailureBox()
                order = SpeakerOrder(first)
                agents = build_role_agents(self.setup.roles, box, None)
                self._history_team = (build_team(agents, self.setup.tool_agent, order, turns), order, box)
            self._history_team[1].first_speaker = first
            return self._history_team
        box = FailureBox()
        order = SpeakerOrder(first)
        agents = build_role_agents(self.setup.roles, box, briefs)
        return build_team(agents, self.setup.tool_agent, order, turns), order, box

    # ---- decisions ----------------------------------------------------------------------------

    def _decide(self, cycle: CycleRecord, stop: CycleStop | None) -> None:
        if cycle.plan is not None:
            self.trace.plan = cycle.plan
        cycle.gate = evaluate_gates(
            verdict=cycle.verdict,
            plan=self.trace.plan,
            tool_calls=cycle.tool_calls,
            policy=self.setup.gates,
            workspace=self.setup.workspace,
            role_written_config=self.setup.tools.role_written_config(),
        )
        self._emit(
            VerdictEvent(
                run_id=self.trace.run_id,
                cycle=cycle.index,
                verdict=cycle.verdict,
                gate=cycle.gate,
                error=cycle.review_error,
            )
        )
        if stop is not None:
            cycle.result, cycle.result_reason = stop.outcome, stop.reason
            self._finish_stop(stop)
            return
        if cycle.blocked is not None:
            cycle.result = "BLOCKED"
            cycle.result_reason = f"{cycle.blocked.role} blocked: {cycle.blocked.reason_code}"
            self._move(State.BLOCKED, cycle.result_reason)
            return
        if cycle.verdict is None:
            reason = (
                cycle.review_error or "REVIEW_ERROR: the cycle ended without a verdict from the Evaluator"
            )
            cycle.result, cycle.result_reason = "ERROR", reason
            self._finish_stop(CycleStop("ERROR", reason))
            return
        self._apply_verdict(cycle)

    def _apply_verdict(self, cycle: CycleRecord) -> None:
        verdict = cycle.verdict
        assert verdict is not None
        status, reason = verdict.status, verdict.reason_code
        if status == "PASS" and not cycle.gate.passed:
            status, reason = "PARTIAL", "HARD_GATE: " + "; ".join(cycle.gate.failures)
        cycle.result, cycle.result_reason = status, reason
        counters = self.trace.counters
        s = self.settings
        if status == "PASS":
            self._move(State.PASSED, f"PASS ({reason}); every hard gate passed")
        elif status == "BLOCKED":
            self._move(State.BLOCKED, f"Evaluator returned BLOCKED ({reason})")
        elif status == "PARTIAL" and counters.partial_retries < s.max_partial_retries:
            counters.partial_retries += 1
            self._move(
                State.REVISING,
                f"PARTIAL ({reason}); revision {counters.partial_retries} of {s.max_partial_retries}",
            )
        elif counters.fail_retries < s.max_fail_retries:
            why = "PARTIAL over its retry cap" if status == "PARTIAL" else "FAIL"
            counters.fail_retries += 1
            counters.partial_retries = 0
            self._move(
                State.REPLANNING, f"{why} ({reason}); re-plan {counters.fail_retries} of {s.max_fail_retries}"
            )
        else:
            self._move(State.ESCALATED, f"{status} ({reason}) with every retry used")

    def _finish_stop(self, stop: CycleStop) -> None:
        self._move(State.TIMEOUT if stop.outcome == "TIMEOUT" else State.ERROR, stop.reason)

    def _force_error(self, reason: str) -> None:
        self.trace.transitions.append(
            TransitionRecord(**{"from": self._state.value, "to": "ERROR", "reason": reason})
        )
        self._state = State.ERROR
        self.trace.state = self._state.value
        self.trace.outcome_reason = reason

    def _move(self, target: State, reason: str) -> None:
        check_transition(self._state, target)
        record = TransitionRecord(**{"from": self._state.value, "to": target.value, "reason": reason})
        self.trace.transitions.append(record)
        self._state = target
        self.trace.state = target.value
        if target in TERMINAL or target == State.BLOCKED:
            self.trace.outcome_reason = reason
        self._emit(TransitionEvent(run_id=self.trace.run_id, transition=record))

    # ---- budgets and stops ----------------------------------------------------------------------

    def _external_stop(self) -> CycleStop | None:
        return CycleStop("ERROR", f"CANCELLED: {self._cancel_reason}") if self._cancel_reason else None

    def _budget_stop(self) -> CycleStop | None:
        s = self.settings
        used = self.trace.tokens.total
        if used >= s.token_budget:
            return CycleStop(
                "TIMEOUT", f"token budget exhausted: {used} of {s.token_budget} (PSE_TOKEN_BUDGET)"
            )
        if s.cost_budget is not None and self._amount >= s.cost_budget:
            return CycleStop(
                "TIMEOUT", f"cost budget exhausted: {self._amount:.4f} of {s.cost_budget} (PSE_COST_BUDGET)"
            )
        if asyncio.get_running_loop().time() >= self._deadline:
            return CycleStop("TIMEOUT", "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)")
        return None

    # ---- accounting and events ----------------------------------------------------------------------

    def _on_message(self, cycle: CycleRecord, record: MessageRecord, source: str) -> None:
        if source != TOOL_AGENT:
            tokens = self.trace.tokens
            tokens.by_role.setdefault(source, TokenCount()).add(
                record.prompt_tokens, record.completion_tokens
            )
            tokens.prompt += record.prompt_tokens
            tokens.completion += record.completion_tokens
            tokens.total = tokens.prompt + tokens.completion
            self._charge(source, record.prompt_tokens, record.completion_tokens)
        self._emit(MessageEvent(run_id=self.trace.run_id, cycle=cycle.index, message=record))

    def _charge(self, role: str, prompt: int, completion: int) -> None:
        if self.setup.price is None:
            return
        amount, currency, priced = self.setup.price(role, prompt, completion)
        self._amount += amount
        cost = self.trace.cost
        cost.amount = round(self._amount, 6)
        cost.currency = currency
        model = self.setup.model_names.get(role, role)
        if not priced and model not in cost.unpriced_models:
            cost.unpriced_models.append(model)

    def _collect_tool_calls(self, cycle: CycleRecord) -> None:
        records = self.setup.tools.records
        for record in records[self._seen_tool_calls :]:
            cycle.tool_calls.append(record)
            self._emit(ToolCallEvent(run_id=self.trace.run_id, cycle=cycle.index, call=record))
            if record.tool == Tool.SEARCH_KNOWLEDGE and record.status == "ok" and "citations" in record.facts:
                query = str(record.facts.get("query", record.arguments.get("query", "")))
                self._retrieval(cycle, query, list(record.facts["citations"]))
        self._seen_tool_calls = len(records)

    def _retrieval(self, cycle: CycleRecord, query: str, results: list[dict[str, Any]]) -> None:
        event = RetrievalEvent(run_id=self.trace.run_id, cycle=cycle.index, query=query, results=results)
        cycle.retrievals.append(event)
        self._emit(event)

    def _emit(self, event: Event) -> None:
        if self.setup.on_event is None:
            return
        try:
            self.setup.on_event(event)
        except Exception:  # a broken live view must not break the run
            log.exception("event consumer failed on %s", event.kind)

    def _save(self) -> None:
        write_trace(self.trace, self.setup.run_dir)

    def _finalize(self) -> None:
        trace = self.trace
        if self._state in TERMINAL:
            trace.outcome = OUTCOME_OF[self._state]  # type: ignore[assignment]
            trace.ended_at = utc_now()
            if self._state == State.ESCALATED:
                trace.escalation = str(write_escalation(trace, self.setup.run_dir, self.setup.workspace))
            self._emit(outcome_event(trace))
        self._save()
