"""One allowed call: run (its outcome, a sandbox refusal or a machinery failure), recorded, or held."""

from __future__ import annotations

from pse.events import ToolCallRecord
from pse.exceptions import SandboxViolation, ToolInfrastructureError
from pse.protocol import truncate_text
from pse.toolagent._approval import HeldCall, preview_of
from pse.toolagent._decide import Allowed
from pse.toolagent._redact import Redactor
from pse.tools import (
    ToolOutcome,
)

__all__ = ["SANDBOX_PATH_RULE", "RunResult", "call_record", "held_call", "run_call"]

SANDBOX_PATH_RULE = "sandbox.path"
"""The rule that denies, while the tool runs, a path outside the workspace (or the call's area)."""

RunResult = ToolOutcome | SandboxViolation | ToolInfrastructureError
"""What running an allowed call gave: the tool's outcome, the sandbox's path refusal, or a machinery
failure (every other exception of a tool is turned into one)."""


def run_call(step: Allowed) -> RunResult:
    """Run a tool; the requester's mistakes become outcomes, machinery failures are returned, not raised."""
    try:
        return step.spec.function(step.context, **step.call.arguments)
    except SandboxViolation as exc:
        return exc
    except ValueError as exc:
        return ToolOutcome("error", str(exc))
    except ToolInfrastructureError as exc:
        return exc
    except OSError as exc:  # e.g. a path component is a file: the request's problem, not the machinery's
        return ToolOutcome("error", f"{type(exc).__name__}: {exc.strerror or exc}")
    except Exception as exc:  # a bug in a tool: reported, and the run ends as ERROR
        error = ToolInfrastructureError(f"tool {step.call.name} failed: {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error


def call_record(
    step: Allowed, result: RunResult, ms: int, *, redactor: Redactor, output_limit: int, sandbox_mode: str
) -> ToolCallRecord:
    """The audit record of a call that ran: redacted and capped output, or the denial or failure."""
    if isinstance(result, SandboxViolation):
        return ToolCallRecord.denied(**step.request, rule=SANDBOX_PATH_RULE, reason=str(result), ms=ms)
    if isinstance(result, ToolInfrastructureError):
        output = f"the tool machinery failed, not your request: {result}"
        return ToolCallRecord.ran(
            **step.request,
            rule=step.rule,
            status="error",
            output=output,
            ms=ms,
            sandbox=sandbox_mode,
        )
    output, removed = truncate_text(redactor.text(result.output), output_limit)
    return ToolCallRecord.ran(
        **step.request,
        rule=step.rule,
        status=result.status,
        output=output,
        ms=ms,
        sandbox=result.sandbox,
        truncated=result.truncated or removed > 0,
        facts=redactor.data(result.facts),
    )


def held_call(step: Allowed, fired: str, message: str, redactor: Redactor) -> HeldCall:
    """The call as a person would see it, held by its grant's approval rule (`fired`: what it matched)."""
    requester, tool = step.request["requester"], step.request["tool"]
    return HeldCall(
        requester=requester,
        tool=tool,
        arguments=dict(step.request["arguments"]),
        index=step.request["index"],
        rule=f"approval.{requester}.{tool}",
        fired=fired,
        preview=redactor.text(preview_of(step.context, step.call.name, step.call.arguments)),
        message=message,
    )
