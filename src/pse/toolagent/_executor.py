"""The executor: parse a role's message, decide each request against the policy, run it, audit it.

Plain code with no AutoGen in it, so the engine and tests use it directly; `ToolAgent` wraps it.

Error rule (ARCHITECTURE.md): a malformed request, a denied tool, a bad path or a failing command is an
observation for the requester (a result with status error / denied / timeout) and never an exception.
A failure of the machinery itself (the sandbox cannot start, a tool function crashes) is recorded as
`infrastructure_error`; the batch stops there and the engine ends the run as ERROR.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pse.config import Settings
from pse.events import ToolCallRecord
from pse.exceptions import SandboxViolation, ToolInfrastructureError
from pse.protocol import DsmlError, ResultItem, ToolCall, parse_tool_calls, render_tool_results, truncate_text
from pse.sandbox import Sandbox, SandboxLimits
from pse.toolagent._policy import Grant, Policy
from pse.toolagent._provenance import Provenance, check_config_guard
from pse.toolagent._redact import Redactor, settings_secrets
from pse.tools import (
    Tool,
    ToolContext,
    ToolOutcome,
    ToolRegistry,
    ToolSpec,
    builtin_tools,
    check_config_reason,
    declared_config,
    resolve_path,
)

__all__ = ["MAX_TOOL_THREADS", "PROTECT_RULE", "RECORD_ARGUMENT_CHARS", "ToolBatch", "ToolExecutor"]

MAX_TOOL_THREADS = 64
"""Tool calls of all runs in this process share one pool of this many threads (50 runs may share it)."""
PROTECT_RULE = "protect.check_config"
"""The rule that denies writing a check-configuration file the task did not declare."""
RECORD_ARGUMENT_CHARS = 4000
"""Audit records keep each argument up to this many characters (written files are in the workspace)."""

NO_TOOL_CALLS_MESSAGE = (
    "your message was routed to the ToolAgent but holds no <tool_calls> block, so nothing was run. "
    'Request tools like this: <tool_calls><invoke name="read_file"><parameter name="path">README.md'
    "</parameter></invoke></tool_calls>"
)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _tool_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=MAX_TOOL_THREADS, thread_name_prefix="pse-tool")
        return _pool


@dataclass(frozen=True, slots=True)
class ToolBatch:
    """The answer to one message: the rendered `<tool_results>` text and one audit record per result."""

    requester: str
    text: str
    records: tuple[ToolCallRecord, ...]


@dataclass(slots=True)
class _Pending:
    """An allowed call, ready to run."""

    call: ToolCall
    spec: ToolSpec
    context: ToolContext
    rule: str
    extra: dict[str, Any] = field(default_factory=dict)


def _limits(settings: Settings) -> SandboxLimits:
    return SandboxLimits(
        timeout_s=settings.tool_timeout_s,
        cpu_s=settings.tool_cpu_s,
        memory_mb=settings.tool_memory_mb,
        file_size_mb=settings.tool_file_size_mb,
        max_processes=settings.tool_max_processes,
        output_limit=settings.tool_output_limit,
    )


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
        task_dir: Path | None = None,
        on_record: Callable[[ToolCallRecord], None] | None = None,
        evaluation_dir: Path | None = None,
        check_config: Iterable[str] = (),
        history: Iterable[ToolCallRecord] = (),
        redactor: Redactor | None = None,
    ) -> None:
        if not workspace.is_dir():
            raise ToolInfrastructureError(f"workspace {workspace} does not exist or is not a directory")
        self.workspace = Path(os.path.realpath(workspace))
        self.settings = settings
        self.registry = registry if registry is not None else builtin_tools()
        self.policy = policy if policy is not None else Policy.default(settings, self.registry)
        self.checks = dict(checks or {})
        self.task_dir = task_dir
        self.evaluation_dir = evaluation_dir
        self.check_config = declared_config(check_config)
        self.sandbox = Sandbox(
            self.workspace, _limits(settings), settings.sandbox, sandbox_uid=settings.sandbox_uid
        )
        self.provenance = Provenance(history)
        self.redactor = redactor if redactor is not None else Redactor(settings_secrets(settings))
        self.infrastructure_error: ToolInfrastructureError | None = None
        self._accept = check_config_guard(self.check_config)
        self._on_record = on_record
        self._records: list[ToolCallRecord] = []
        self._used: Counter[tuple[str, str]] = Counter()

    @property
    def records(self) -> list[ToolCallRecord]:
        """Every audit record so far, in order (a copy)."""
        return list(self._records)

    @property
    def sandbox_mode(self) -> str:
        """`bwrap` or `fallback`: what commands run under."""
        return self.sandbox.mode

    def new_cycle(self) -> None:
        """Start a cycle: every role's per-tool budget is full again."""
        self._used.clear()

    def role_written_config(self) -> dict[str, str]:
        """Check-configuration files still in the workspace that a role wrote: path → author."""
        return {
            path: who
            for path, who in self.provenance.written_by_roles("workspace").items()
            if check_config_reason(path) is not None and os.path.lexists(self.workspace / path)
        }

    async def execute(self, requester: str, message_text: str) -> ToolBatch:
        """Answer one message; parsing and tools run on the shared tool thread pool, so the event loop
        never blocks on a hostile message or a slow command."""
        loop = asyncio.get_running_loop()
        steps = await loop.run_in_executor(_tool_pool(), self._begin, requester, message_text)
        results: list[ToolCallRecord] = []
        for step in steps:
            if isinstance(step, _Pending) and self.infrastructure_error is None:
                started = time.perf_counter()
                outcome = await loop.run_in_executor(_tool_pool(), self._run_guarded, step)
                results.append(self._emit(self._finish(requester, step, outcome, started)))
            else:
                results.append(self._emit(self._settled(requester, step)))
        return self._answer(requester, results)

    def execute_sync(self, requester: str, message_text: str) -> ToolBatch:
        """`execute` on the calling thread (for scripts and benchmarks; not from inside an event loop)."""
        results: list[ToolCallRecord] = []
        for step in self._begin(requester, message_text):
            if isinstance(step, _Pending) and self.infrastructure_error is None:
                started = time.perf_counter()
                results.append(self._emit(self._finish(requester, step, self._run_guarded(step), started)))
            else:
                results.append(self._emit(self._settled(requester, step)))
        return self._answer(requester, results)

    def _settled(self, requester: str, step: _Pending | ToolCallRecord) -> ToolCallRecord:
        """A step that needs no run: already decided, or skipped after an infrastructure failure."""
        return step if isinstance(step, ToolCallRecord) else self._skipped(requester, step)

    # -- steps ------------------------------------------------------------------------------------

    def _begin(self, requester: str, text: str) -> list[_Pending | ToolCallRecord]:
        parsed = parse_tool_calls(
            text,
            self.registry.signatures(),
            max_invokes=self.settings.max_invokes_per_message,
            max_value_bytes=self.settings.max_parameter_bytes,
        )
        if not parsed.found_block:
            return [
                self._record(
                    requester,
                    "(none)",
                    {},
                    "denied",
                    "protocol.no_tool_calls",
                    "error",
                    NO_TOOL_CALLS_MESSAGE,
                    1,
                )
            ]
        steps: list[_Pending | ToolCallRecord] = []
        for item in parsed.items:
            if isinstance(item, DsmlError):
                steps.append(
                    self._record(
                        requester,
                        item.name or "(parse)",
                        item.arguments,
                        "denied",
                        f"protocol.{item.kind}",
                        "error",
                        item.message,
                        item.index,
                    )
                )
            else:
                steps.append(self._decide(requester, item))
        return steps

    def _decide(self, requester: str, call: ToolCall) -> _Pending | ToolCallRecord:
        decision = self.policy.decide(requester, call.name)
        if not decision.allowed or decision.grant is None:
            why = f"{requester} may not call {call.name} (policy: {decision.rule})"
            return self._record(
                requester, call.name, call.arguments, "denied", decision.rule, "denied", why, call.index
            )
        key = (requester, call.name)
        if self._used[key] >= decision.grant.budget:
            rule = f"budget.{requester}.{call.name}"
            why = (
                f"{requester} has used all {decision.grant.budget} {call.name} calls of this cycle "
                f"(policy: {rule}); work with the results you have"
            )
            return self._record(
                requester, call.name, call.arguments, "denied", rule, "denied", why, call.index
            )
        context = self._context(decision.grant)
        if call.name == Tool.WRITE_FILE:
            refusal = self._write_refusal(context, call)
            if refusal is not None:
                return self._record(
                    requester,
                    call.name,
                    call.arguments,
                    "denied",
                    PROTECT_RULE,
                    "denied",
                    refusal,
                    call.index,
                )
        self._used[key] += 1
        spec = self.registry.get(call.name)
        assert spec is not None  # the parser only lets registered tools through
        return _Pending(call, spec, context, decision.rule)

    def _context(self, grant: Grant) -> ToolContext:
        """What one call may use: the workspace and, if the grant reaches it, the evaluation area."""
        read_write = grant.mode == "read-write"
        evaluation = self.evaluation_dir if "evaluation" in grant.areas else None
        return ToolContext(
            self.workspace,
            self.sandbox,
            writable=read_write and "workspace" in grant.areas,
            checks=self.checks,
            task_dir=self.task_dir,
            evaluation=evaluation,
            evaluation_writable=read_write and evaluation is not None,
            accept=self._accept,
            check_config=self.check_config,
            author=self.provenance.author,
        )

    def _write_refusal(self, context: ToolContext, call: ToolCall) -> str | None:
        """Why a write_file request is refused before it runs (a check-configuration file), if it is."""
        try:
            _, real, root = resolve_path(context, call.arguments.get("path", ""))
        except SandboxViolation:
            return None  # the tool itself answers a bad path, with its own message
        reason = self._accept(real.relative_to(root).as_posix())
        if reason is None:
            return None
        return (
            f"{call.arguments.get('path', '').strip()} may not be written: {reason} (policy: {PROTECT_RULE})"
        )

    def _run_guarded(self, item: _Pending) -> ToolOutcome | BaseException:
        """Run a tool; model-caused failures become outcomes, machinery failures are returned for _finish."""
        try:
            return item.spec.function(item.context, **item.call.arguments)
        except SandboxViolation as exc:
            item.extra["denied_by"] = "sandbox.path"
            return ToolOutcome("error", str(exc))
        except ValueError as exc:
            return ToolOutcome("error", str(exc))
        except ToolInfrastructureError as exc:
            return exc
        except OSError as exc:  # e.g. a path component is a file: the request's problem, not the machinery's
            return ToolOutcome("error", f"{type(exc).__name__}: {exc.strerror or exc}")
        except Exception as exc:  # a bug in a tool: reported, and the run ends as ERROR
            return exc

    def _finish(
        self, requester: str, item: _Pending, outcome: ToolOutcome | BaseException, started: float
    ) -> ToolCallRecord:
        ms = int((time.perf_counter() - started) * 1000)
        call = item.call
        if isinstance(outcome, BaseException):
            if isinstance(outcome, ToolInfrastructureError):
                error = outcome
            else:
                error = ToolInfrastructureError(
                    f"tool {call.name} failed: {type(outcome).__name__}: {outcome}"
                )
                error.__cause__ = outcome
            self.infrastructure_error = self.infrastructure_error or error
            message = f"the tool machinery failed, not your request: {error}"
            return self._record(
                requester,
                call.name,
                call.arguments,
                "allowed",
                item.rule,
                "error",
                message,
                call.index,
                ms=ms,
                sandbox=self.sandbox_mode,
            )
        if "denied_by" in item.extra:
            return self._record(
                requester,
                call.name,
                call.arguments,
                "denied",
                item.extra["denied_by"],
                "denied",
                outcome.output,
                call.index,
                ms=ms,
            )
        output, removed = truncate_text(self.redactor.text(outcome.output), self.settings.tool_output_limit)
        return self._record(
            requester,
            call.name,
            call.arguments,
            "allowed",
            item.rule,
            outcome.status,
            output,
            call.index,
            ms=ms,
            sandbox=outcome.sandbox,
            truncated=outcome.truncated or removed > 0,
            facts=self.redactor.data(outcome.facts),
        )

    def _skipped(self, requester: str, item: _Pending) -> ToolCallRecord:
        self._used[(requester, item.call.name)] -= 1  # not run: give the budget back
        return self._record(
            requester,
            item.call.name,
            item.call.arguments,
            "allowed",
            item.rule,
            "error",
            "not run: the tool machinery failed on an earlier request",
            item.call.index,
        )

    def _record(
        self,
        requester: str,
        tool: str,
        arguments: Mapping[str, str],
        decision: Any,
        rule: str,
        status: Any,
        output: str,
        index: int,
        *,
        ms: int = 0,
        sandbox: str | None = None,
        truncated: bool = False,
        facts: dict[str, Any] | None = None,
    ) -> ToolCallRecord:
        kept = {k: truncate_text(v, RECORD_ARGUMENT_CHARS)[0] for k, v in arguments.items()}
        return ToolCallRecord(
            requester=requester,
            tool=tool,
            arguments=kept,
            decision=decision,
            rule=rule,
            status=status,
            ms=ms,
            output=output,
            index=index,
            sandbox=sandbox,
            truncated=truncated,
            facts=facts or {},
        )

    def _emit(self, record: ToolCallRecord) -> ToolCallRecord:
        self.provenance.note(record)
        self._records.append(record)
        if self._on_record is not None:
            self._on_record(record)
        return record

    def _answer(self, requester: str, records: list[ToolCallRecord]) -> ToolBatch:
        # No `ms` in what the role sees: timings differ between runs, and anything run-specific in a
        # prompt would break strict replay of a recorded cassette. The audit record keeps the timing.
        items = [ResultItem(r.index, r.tool, r.status, r.output) for r in records]
        return ToolBatch(requester, render_tool_results(requester, items), tuple(records))
