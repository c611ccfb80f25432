"""The executor: answer a role's message by deciding each request, running the allowed ones, auditing all.

Plain code with no AutoGen in it, so the engine and tests use it directly; `ToolAgent` wraps it.
`pse.toolagent._decide` decides; this module runs what it allows and keeps the audit.

Error rule (`pse.exceptions`): a malformed request, a denied tool, a bad path or a failing command is
an observation for the requester (a result with status error / denied / timeout), never an exception.
A failure of the machinery itself (the sandbox cannot start, a tool function crashes) is kept as
`infrastructure_error`; the batch stops there and the engine ends the run as ERROR. So is a replayed
call that differs from its recording (`ToolReplayMismatchError`): nothing runs in its place. Allowed
calls go through a `ToolRunner` (`pse.toolagent._runners`): executed, recorded or replayed.

Approvals: an allowed call its grant's `ApprovalRule` matches is held, and the executor waits for the
run's `Approver` before it runs it (approved) or answers `denied` with the person's reason
(`pse.toolagent._holding`). A resumed run that stopped while a call was held goes through its
interrupted cycle again: `replay` holds that cycle's records, and each request is answered from them,
in order, without running anything again.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from pse.config import Settings
from pse.events import ToolCallRecord
from pse.exceptions import RunFailure, ToolInfrastructureError, ToolReplayMismatchError
from pse.protocol import ResultItem, render_tool_results
from pse.sandbox import Sandbox
from pse.toolagent._approval import Approver
from pse.toolagent._call import RunResult, call_record, run_call
from pse.toolagent._decide import Allowed, Decider, Scope, Step
from pse.toolagent._holding import ask, held, holds
from pse.toolagent._offload import MAX_TOOL_THREADS, Offload, complete, on_this_thread, on_tool_pool
from pse.toolagent._policy import Grant, Policy
from pse.toolagent._provenance import Provenance, evidence_guard
from pse.toolagent._redact import Redactor, settings_secrets
from pse.toolagent._repeats import Repeats
from pse.toolagent._runners import ToolRunner, resumed_mismatch, run_tools
from pse.toolagent._sandbox import sandbox_for
from pse.tools import (
    EvidenceRules,
    Manifest,
    ToolContext,
    ToolRegistry,
    build_manifest,
    builtin_tools,
    check_config_reason,
    declared_config,
)

__all__ = ["MAX_TOOL_THREADS", "ToolBatch", "ToolExecutor"]


@dataclass(frozen=True, slots=True)
class ToolBatch:
    """The answer to one message: the rendered `<tool_results>` text and one audit record per result."""

    requester: str
    text: str
    records: tuple[ToolCallRecord, ...]


class ToolExecutor:
    """Decides and runs the tool requests of one run's roles, in one workspace.

    Args:
        workspace: the run workspace (must exist).
        settings: limits (timeouts, output cap, invokes per message, sandbox mode).
        policy: who may call what; default `Policy.default(settings, registry)`.
        registry: the tools; default `builtin_tools()`.
        checks: the task's named check commands for `run_check`.
        task_dir: the task's folder (`{task_dir}` in check commands; mounted read-only for them).
        on_record: called with every audit record as it is decided (on the caller's thread/loop).
        evaluation_dir: the Evaluator's evaluation area, when the task has independent tests.
        check_config: check-configuration files the task lets roles write.
        pytest_plugins: the pytest plugins the task's checks load (`[verification] pytest_plugins`).
        history: the audit records of the run so far (a resumed run), for who wrote which file.
        redactor: replaces secret values in outputs; default the secrets of `settings`.
        runner: gives each allowed call's record: executes it (default), records or replays it.
        inputs: the run's inputs, which `read_file` gives by name where no such file exists.
        approver: decides the calls an approval rule holds (None: denied, nobody can be asked).
        replay: the records of an interrupted cycle that is run again: its requests are answered
            from them, in order, and nothing runs twice.
        sandbox: the sandbox for tools (default `sandbox_for(workspace, settings)`); a run's MCP one.
        evidence: what the task declares as evidence (expected outputs, `[verification] evidence` globs,
            the plan's outputs as the run goes): each check's manifest is built from it (`pse.tools`'s
            `build_manifest`). Default: no declared output, so every file a role wrote is left out.
        ruff_fixes: `write_file` applies ruff's safe fixes to the Python files roles write (`pse.tools`).

    Raises:
        ToolInfrastructureError: `settings.sandbox` is `bwrap` and bwrap cannot run here.
    """

    def __init__(
        self,
        workspace: Path,
        settings: Settings,
        policy: Policy | None = None,
        *,
        registry: ToolRegistry | None = None,
        checks: Mapping[str, str] | None = None,
        inputs: Mapping[str, str] | None = None,
        task_dir: Path | None = None,
        on_record: Callable[[ToolCallRecord], None] | None = None,
        evaluation_dir: Path | None = None,
        check_config: Iterable[str] = (),
        pytest_plugins: Iterable[str] = (),
        history: Iterable[ToolCallRecord] = (),
        redactor: Redactor | None = None,
        runner: ToolRunner = run_tools,
        approver: Approver | None = None,
        replay: Sequence[ToolCallRecord] = (),
        sandbox: Sandbox | None = None,
        evidence: EvidenceRules | None = None,
        ruff_fixes: bool = False,
    ) -> None:
        if not workspace.is_dir():
            raise ToolInfrastructureError(f"workspace {workspace} does not exist or is not a directory")
        self.workspace = Path(os.path.realpath(workspace))
        self.settings = settings
        self.registry = registry if registry is not None else builtin_tools()
        self.policy = policy if policy is not None else Policy.default(settings, self.registry)
        self.checks = dict(checks or {})
        self.inputs = dict(inputs or {})
        self.task_dir, self.evaluation_dir = task_dir, evaluation_dir
        self.check_config = declared_config(check_config)
        self.pytest_plugins, self.ruff_fixes = tuple(pytest_plugins), ruff_fixes
        self.sandbox = sandbox if sandbox is not None else sandbox_for(self.workspace, settings)
        self.provenance = Provenance(history)
        self.redactor = redactor if redactor is not None else Redactor(settings_secrets(settings))
        rules = evidence or EvidenceRules()  # a write a person approved is declared by that person
        self.evidence = replace(rules, check_config=self.check_config, approved=self.provenance.approved)
        self._accept = evidence_guard(
            self.check_config, rules.expected_outputs, self.provenance, self.workspace, rules.repository
        )
        self._decider = Decider(self.policy, self.registry, settings, self._context, self._accept)
        self._on_record = on_record
        self._runner = runner
        self.approver = approver
        # One queue per step of a steps plan (None: the Planner and whole-task phases): steps run at
        # once, so only within a step is the order of its calls the recording's.
        self._replay: dict[str | None, deque[ToolCallRecord]] = {}
        for record in replay:
            self._replay.setdefault(record.step, deque()).append(record)
        self._records: list[ToolCallRecord] = []
        self._infrastructure_error: RunFailure | None = None
        self._repeats = Repeats()

    @property
    def records(self) -> list[ToolCallRecord]:
        """Every audit record so far, in order (a copy)."""
        return list(self._records)

    @property
    def infrastructure_error(self) -> RunFailure | None:
        """The first failure of the tool machinery (or of a tool replay), if any: the run ends as ERROR."""
        return self._infrastructure_error

    def report_infrastructure_error(self, error: RunFailure) -> None:
        """Keep a failure of the tool machinery met outside a tool (e.g. by the ToolAgent); the first wins."""
        self._infrastructure_error = self._infrastructure_error or error

    def new_cycle(self) -> None:
        """Start a cycle: every role's per-tool budget is full again."""
        self._decider.new_cycle()
        self._repeats.new_cycle()

    def stop_at(self, deadline: float | None) -> None:
        """No command runs past the run's wall-clock limit (a `time.monotonic()` instant)."""
        self.sandbox.stop_at(deadline)

    def halt(self, reason: str) -> None:
        """The run was stopped: kill the commands running now, and run no call after (of any tool)."""
        self.sandbox.halt(reason)

    def manifest(self, evaluation: bool = True) -> Manifest:
        """The files a check would see now (the evaluation area's too, when the run has one)."""
        area = self.evaluation_dir if evaluation else None
        return build_manifest(self.workspace, area, self.evidence, self.provenance.author)

    def role_written_config(self) -> dict[str, str]:
        """Check-configuration files still in the workspace that a role wrote: path → author."""
        return {
            path: who
            for path, who in self.provenance.written_by_roles("workspace").items()
            if check_config_reason(path) is not None and os.path.lexists(self.workspace / path)
        }

    async def execute(self, requester: str, message_text: str, scope: Scope | None = None) -> ToolBatch:
        """Answer one message; parsing and tools run on the shared tool thread pool, so the event loop
        never blocks on a hostile message or a slow command. `scope`: the step of a steps plan the
        message belongs to (its budgets, its write scope, its records)."""
        return await self._answer(requester, message_text, on_tool_pool, self.approver, scope)

    def execute_sync(self, requester: str, message_text: str) -> ToolBatch:
        """`execute` with every step on the calling thread (for scripts and benchmarks); a call that
        needs approval is denied (nobody can be asked without an event loop)."""
        return complete(self._answer(requester, message_text, on_this_thread, None))

    async def _answer(
        self,
        requester: str,
        text: str,
        offload: Offload,
        approver: Approver | None,
        scope: Scope | None = None,
    ) -> ToolBatch:
        steps: list[Step] = await offload(partial(self._decider.decide, requester, text, scope))
        records: list[ToolCallRecord] = []
        wrote = False  # once a call of the block may write, the calls after it keep their order
        position = 0
        while position < len(steps):
            # Calls run at once on the tool pool only (the calling-thread path has no event loop).
            together = [] if wrote or offload is not on_tool_pool else self._independent(steps, position)
            if len(together) > 1:
                records += [self._emit(r, scope) for r in await self._run_together(together, offload)]
                position += len(together)
                continue
            step = steps[position]
            position += 1
            if isinstance(step, Allowed) and (step.context.writable or step.context.evaluation_writable):
                wrote = True
                self._repeats.wrote()
            queue = self._replay.get(scope.step if scope is not None else None)
            if queue and self._infrastructure_error is None:
                record = self._replayed(step, queue)
            elif isinstance(step, ToolCallRecord):
                record = step
            elif self._infrastructure_error is not None:
                self._decider.give_back(step)
                reason = "not run: the tool machinery failed on an earlier request"
                record = ToolCallRecord.not_run(**step.request, rule=step.rule, reason=reason)
            else:
                call = held(step, self.approver, text, self.redactor)
                refusal, approval = None, None
                if call is not None:
                    refusal, approval = await ask(step, call, approver, self._decider.give_back)
                if refusal is not None:
                    record = refusal
                else:
                    record = await offload(partial(self._run_step, step))
                    if approval is not None:
                        record = record.model_copy(update={"approval": approval})
            records.append(self._emit(record, scope))
        # No `ms` in what the role sees: timings differ between runs, and anything run-specific in a
        # prompt would break strict replay of a recorded cassette. The audit record keeps the timing.
        items = [ResultItem(r.index, r.tool, r.status, r.output) for r in records]
        text = render_tool_results(requester, items)
        # After the results, never inside one: a read_file's result is the file's text, word for word.
        again = self._repeats.note(requester, scope.step if scope is not None else None, records)
        return ToolBatch(requester, text if again is None else f"{text}\n{again}", tuple(records))

    def _independent(self, steps: Sequence[Step], start: int) -> list[Allowed]:
        """The read-only calls from `start` on that may run at the same time (none held for a person,
        none writing); empty when tools are recorded or replayed, whose order is the recording's."""
        replaying = any(self._replay.values())
        if self.settings.tool_parallel_calls < 2 or self._runner is not run_tools or replaying:
            return []
        together: list[Allowed] = []
        for step in steps[start:]:
            if not isinstance(step, Allowed) or step.context.writable or step.context.evaluation_writable:
                break
            if holds(step, self.approver):
                break
            together.append(step)
        return together

    async def _run_together(self, steps: Sequence[Allowed], offload: Offload) -> list[ToolCallRecord]:
        """Run independent read-only calls at once, at most `PSE_TOOL_PARALLEL_CALLS` at a time; their
        records come back in the order of the block."""
        gate = asyncio.Semaphore(self.settings.tool_parallel_calls)

        async def one(step: Allowed) -> ToolCallRecord:
            async with gate:
                if self._infrastructure_error is not None:
                    self._decider.give_back(step)
                    reason = "not run: the tool machinery failed on an earlier request"
                    return ToolCallRecord.not_run(**step.request, rule=step.rule, reason=reason)
                return await offload(partial(self._run_step, step))

        return list(await asyncio.gather(*(one(step) for step in steps)))

    def _replayed(self, step: Step, queue: deque[ToolCallRecord]) -> ToolCallRecord:
        """The next record of the interrupted cycle in `queue` (the step's), for the same request;
        nothing runs again. A request that differs from the recorded one stops the run (a replay must
        not guess)."""
        recorded = queue.popleft()
        error = resumed_mismatch(step.request if isinstance(step, Allowed) else step, recorded)
        if error is not None:
            self.report_infrastructure_error(error)
            self._replay.clear()  # every step's: the run stops
            if isinstance(step, ToolCallRecord):
                return step
            return ToolCallRecord.not_run(**step.request, rule=step.rule, reason=f"not run: {error}")
        if isinstance(step, Allowed) and recorded.decision == "denied":
            self._decider.give_back(step)
        return recorded

    def _run_step(self, step: Allowed) -> ToolCallRecord:
        """One allowed call through the runner; a replay that cannot answer it stops the run, unrun.
        Once the run was halted (it ended, or was cancelled) no call runs, whatever its tool: a
        ToolAgent turn still going after its run stopped (a call held past the deadline, then
        approved) must not act for a run whose trace is already written."""
        halted = self.sandbox.halted
        if halted is not None:
            self._decider.give_back(step)
            return ToolCallRecord.not_run(**step.request, rule=step.rule, reason=f"not run: {halted}")
        try:
            return self._runner(step, self._execute)
        except ToolReplayMismatchError as exc:
            self.report_infrastructure_error(exc)
            return ToolCallRecord.not_run(**step.request, rule=step.rule, reason=f"not run: {exc}")

    def _execute(self, step: Allowed) -> ToolCallRecord:
        """Run the call for real and keep its audit record."""
        started = time.perf_counter()
        result = run_call(step)
        record = self._record(step, result, int((time.perf_counter() - started) * 1000))
        if step.call.normalised:  # what ran is not the message's raw text: the record says how it differs
            record = record.model_copy(update={"normalised": dict(step.call.normalised)})
        return record

    def _context(self, grant: Grant) -> ToolContext:
        """What one call may use: the workspace and, if the grant reaches it, the evaluation area."""
        read_write = grant.mode == "read-write"
        evaluation = self.evaluation_dir if "evaluation" in grant.areas else None
        return ToolContext(
            self.workspace,
            self.sandbox,
            writable=read_write and "workspace" in grant.areas,
            checks=self.checks,
            inputs=self.inputs,
            task_dir=self.task_dir,
            evaluation=evaluation,
            evaluation_writable=read_write and evaluation is not None,
            accept=self._accept,
            check_config=self.check_config,
            pytest_plugins=self.pytest_plugins,
            author=self.provenance.author,
            evidence=partial(self.manifest, evaluation is not None),
            ruff_fixes=self.ruff_fixes,
        )

    def _record(self, step: Allowed, result: RunResult, ms: int) -> ToolCallRecord:
        """The audit record of a call that ran; a machinery failure is also kept for the run's end."""
        if isinstance(result, ToolInfrastructureError):
            self.report_infrastructure_error(result)
        return call_record(
            step,
            result,
            ms,
            redactor=self.redactor,
            output_limit=self.settings.tool_output_limit,
            sandbox_mode=self.sandbox.mode,
        )

    def _emit(self, record: ToolCallRecord, scope: Scope | None = None) -> ToolCallRecord:
        if scope is not None and record.step is None:
            record = record.model_copy(update={"step": scope.step})
        self.provenance.note(record)
        self._records.append(record)
        if self._on_record is not None:
            self._on_record(record)
        return record
