"""A run's spans, built from its trace: the one code path of the live export and of `pse trace export`.

Every id and every time comes from the trace: the trace id from the run id, each span id from the run
id and the span's place in the run (`cycle/2/tool/3`), start and end times from the records' own
timestamps. So the spans a run exports when it ends and those exported from its trace a year later are
the same spans, ids included, and AutoGen's spans, parented live to a cycle's id (`cycle_span_context`),
hang under the same cycle span either way.

The tree: `invoke_workflow TASK` (the run) → `cycle N` → `step S` (steps runs only) → `chat MODEL` (one
per role turn) and `execute_tool TOOL` (one per tool call); a server's grammar-support probe is a
`chat MODEL` span of the run, with `pse.probe`. Verdicts, gates, transitions, repairs,
approvals and escalations are span events. Content (prompts, outputs, tool arguments and results,
findings) is added only with `content=True`.

Times a record does not keep are taken from its neighbours, and say so here: a role turn starts when
the message before it in its cycle (or step) was recorded, or when the cycle (step) began; a tool call
started `ms` before it was recorded; a span ends no earlier than its last child or event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, Status, StatusCode

from pse.config import ModelSpec, RoleSettings, Settings
from pse.events import TransitionRecord
from pse.roles import ALL_ROLES, ROLES
from pse.telemetry import _attributes as A
from pse.telemetry._events import cycle_events, transition
from pse.telemetry._tree import Attributes, Draft, finished, ns
from pse.trace import CycleRecord, Trace

__all__ = ["build_spans"]


def _models(trace: Trace) -> dict[str, ModelSpec | None]:
    """Each speaker's provider and model as the run resolved them, from the trace's public settings."""
    per_role = {str(role).lower() for role in ROLES}  # the settings' role fields: planner, ...
    names = {n for n in Settings.model_fields if n not in per_role}
    names |= {f"{role}_{key}" for role in per_role for key in RoleSettings.model_fields}
    try:
        settings = Settings.model_validate({k: v for k, v in trace.settings.items() if k in names})
    except Exception:  # a trace of older settings: no model attributes rather than none of its spans
        return dict.fromkeys(ALL_ROLES)
    return {role: settings.model_spec(role) for role in ALL_ROLES}


def _server(base_url: str | None) -> Attributes:
    """server.address and server.port of a model endpoint (never its path, query or user info)."""
    if not base_url:
        return {}
    parts = urlsplit(base_url)
    found: Attributes = {"server.address": parts.hostname} if parts.hostname else {}
    try:
        if parts.port is not None:
            found["server.port"] = parts.port
    except ValueError:
        pass
    return found


def _scalars(prefix: str, values: Mapping[str, Any]) -> Attributes:
    """The numbers and flags of a mapping (a tool's facts): never its strings, which may be content."""
    return {f"{prefix}.{k}": v for k, v in values.items() if isinstance(v, bool | int | float)}


class _Builder:
    """Drafts the spans of one trace, parents first."""

    def __init__(self, trace: Trace, content: bool) -> None:
        self.trace, self.content = trace, content
        self.run_id = trace.run_id
        self.spans: list[Draft] = []
        self.models = _models(trace)

    def add(self, span: Draft) -> Draft:
        self.spans.append(span)
        return span

    def run(self) -> Draft:
        t = self.trace
        start = ns(t.started_at)
        attributes: Attributes = {
            A.GEN_AI_OPERATION_NAME: A.OP_INVOKE_WORKFLOW,
            A.GEN_AI_WORKFLOW_NAME: t.task,
            A.GEN_AI_CONVERSATION_ID: t.run_id,
            "pse.run_id": t.run_id,
            "pse.task": t.task,
            "pse.state": t.state,
            "pse.outcome": t.outcome or "",
            "pse.outcome_reason": t.outcome_reason,
            "pse.cycles": len(t.cycles),
            "pse.tokens.prompt": t.tokens.prompt,
            "pse.tokens.completion": t.tokens.completion,
            "pse.tokens.cached": t.tokens.cached,
            "pse.cost.amount": t.cost.amount,
            "pse.cost.currency": t.cost.currency,
            "pse.resumed": t.resumed,
            "pse.context_mode": t.context_mode,
        }
        for key in ("team", "protocol"):
            if isinstance(t.settings.get(key), str):
                attributes[f"pse.{key}"] = t.settings[key]
        if t.sandbox is not None:
            attributes["pse.sandbox.mode"] = t.sandbox.mode
        attributes |= {f"pse.tag.{k}": v for k, v in t.tags.items()}
        if self.content and t.task_message:
            attributes[A.GEN_AI_INPUT_MESSAGES] = _messages("user", t.task_message)
        end = ns(t.ended_at) if t.ended_at else start
        span = self.add(Draft(f"{A.OP_INVOKE_WORKFLOW} {t.task}", "run", None, start, end, attributes))
        if t.outcome == "ERROR":
            span.status = Status(StatusCode.ERROR, t.outcome_reason)
        for answer in t.answers:
            found: Attributes = {
                "pse.answer.decision": answer.decision,
                "pse.answer.via": answer.via,
                "pse.answer.after_cycle": answer.after_cycle,
                "pse.answer.retries": answer.retries,
                "pse.answer.replan": answer.replan,
                "pse.answer.grants": list(answer.grants),
            }
            if self.content:
                found |= {"pse.answer.by": answer.by, "pse.answer.note": answer.note or ""}
                found["pse.answer.text"] = answer.text or ""
            span.event("pse.human_answer", ns(answer.at), found)
        return span

    def cycle(self, c: CycleRecord, transitions: list[TransitionRecord]) -> Draft:
        attributes: Attributes = {
            "pse.run_id": self.run_id,
            "pse.cycle.index": c.index,
            "pse.cycle.kind": c.kind,
            "pse.cycle.first_speaker": c.first_speaker,
            "pse.cycle.result": c.result,
            "pse.cycle.result_reason": c.result_reason,
            "pse.cycle.turns": c.turns,
            "pse.step_buffer_tokens": c.step_buffer_tokens,
            "pse.gate.passed": c.gate.passed,
            "pse.gate.enforced": c.gate.enforced,
            "pse.tokens.prompt": sum(n.prompt for n in c.tokens.values()),
            "pse.tokens.completion": sum(n.completion for n in c.tokens.values()),
        }
        if c.verdict is not None:
            attributes["pse.verdict.status"] = c.verdict.status
        if c.stopped is not None:
            attributes["pse.cycle.stopped"] = c.stopped
        if self.content and c.step_buffer:
            attributes["pse.step_buffer"] = c.step_buffer
        start = ns(c.started_at)
        end = ns(c.ended_at) if c.ended_at else start
        span = self.add(Draft(f"cycle {c.index}", f"cycle/{c.index}", "run", start, end, attributes))
        cycle_events(span, c, self.trace, transitions, content=self.content)
        return span

    def steps(self, c: CycleRecord) -> dict[tuple[str, int], Draft]:
        found: dict[tuple[str, int], Draft] = {}
        for attempt in c.steps:
            start = ns(attempt.started_at)
            end = ns(attempt.ended_at) if attempt.ended_at else start
            attributes: Attributes = {
                "pse.run_id": self.run_id,
                "pse.cycle.index": c.index,
                "pse.step.id": attempt.step,
                "pse.step.attempt": attempt.attempt,
                "pse.step.result": attempt.result,
                "pse.step.result_reason": attempt.result_reason,
            }
            path = f"cycle/{c.index}/step/{attempt.step}/{attempt.attempt}"
            span = Draft(f"step {attempt.step}", path, f"cycle/{c.index}", start, end, attributes)
            found[(attempt.step, attempt.attempt)] = self.add(span)
        return found

    def chat(self, c: CycleRecord, index: int, parent: Draft, start: int) -> None:
        m = c.messages[index]
        spec = self.models.get(m.source)
        attributes: Attributes = {
            A.GEN_AI_OPERATION_NAME: A.OP_CHAT,
            A.GEN_AI_AGENT_NAME: m.source,
            A.GEN_AI_CONVERSATION_ID: self.run_id,
            A.GEN_AI_USAGE_INPUT_TOKENS: m.prompt_tokens,
            A.GEN_AI_USAGE_OUTPUT_TOKENS: m.completion_tokens,
            "pse.run_id": self.run_id,
            "pse.cycle.index": c.index,
            "pse.message.index": index + 1,
            "pse.thought_tokens": m.thought_tokens,
            "pse.late": m.late,
        }
        if spec is not None:
            attributes |= {
                A.GEN_AI_PROVIDER_NAME: spec.provider,
                A.GEN_AI_SYSTEM: spec.provider,
                A.GEN_AI_REQUEST_MODEL: spec.model,
            }
            attributes |= _server(spec.base_url)
        if m.step is not None:
            attributes["pse.step.id"] = m.step
        if m.finish_reason is not None:
            attributes[A.GEN_AI_RESPONSE_FINISH_REASONS] = (m.finish_reason,)
        if self.content:
            parts = [{"type": "reasoning", "content": m.thought}] if m.thought else []
            parts.append({"type": "text", "content": m.content})
            attributes[A.GEN_AI_OUTPUT_MESSAGES] = json.dumps([{"role": "assistant", "parts": parts}])
        model = spec.model if spec is not None else m.source
        end = ns(m.at)
        start = min(start, end)  # since the event before it, or the model's own time when known
        if m.model_ms is not None:
            start = max(start, end - m.model_ms * 1_000_000)
        path = f"cycle/{c.index}/message/{index + 1}"
        self.add(Draft(f"{A.OP_CHAT} {model}", path, parent.path, start, end, attributes, SpanKind.CLIENT))

    def probe(self, index: int, parent: Draft) -> None:
        """A call PSE made of its own (a server's grammar-support probe): a `chat` span of the run, marked."""
        p = self.trace.probes[index]
        attributes: Attributes = {
            A.GEN_AI_OPERATION_NAME: A.OP_CHAT,
            A.GEN_AI_AGENT_NAME: p.role,
            A.GEN_AI_CONVERSATION_ID: self.run_id,
            A.GEN_AI_REQUEST_MODEL: p.model,
            A.GEN_AI_USAGE_INPUT_TOKENS: p.prompt_tokens,
            A.GEN_AI_USAGE_OUTPUT_TOKENS: p.completion_tokens,
            "pse.run_id": self.run_id,
            "pse.probe": True,
            "pse.probe.learned": p.learned,
        }
        attributes |= _server(p.server)
        end = ns(p.at)
        start = end - (p.ms or 0) * 1_000_000
        path = f"probe/{index + 1}"
        self.add(Draft(f"{A.OP_CHAT} {p.model}", path, parent.path, start, end, attributes, SpanKind.CLIENT))

    def tool(self, c: CycleRecord, index: int, parent: Draft) -> None:
        call = c.tool_calls[index]
        attributes: Attributes = {
            A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: call.tool,
            A.GEN_AI_TOOL_TYPE: "function",
            A.GEN_AI_TOOL_CALL_ID: f"{c.index}.{index + 1}",
            A.GEN_AI_AGENT_NAME: call.requester,
            "pse.run_id": self.run_id,
            "pse.cycle.index": c.index,
            "pse.tool.requester": call.requester,
            "pse.tool.decision": call.decision,
            "pse.tool.status": call.status,
            "pse.tool.rule": call.rule,
            "pse.tool.ms": call.ms,
            "pse.tool.index": call.index,
            "pse.tool.truncated": call.truncated,
        }
        attributes.update(_scalars("pse.tool.facts", call.facts))
        for key, value in (("sandbox", call.sandbox), ("approval", call.approval), ("step", call.step)):
            if value is not None:
                attributes[f"pse.tool.{key}"] = value
        if self.content:
            attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = json.dumps(call.arguments)
            attributes[A.GEN_AI_TOOL_CALL_RESULT] = call.output
        end = ns(call.at)
        path = f"cycle/{c.index}/tool/{index + 1}"
        span = self.add(
            Draft(
                f"{A.OP_EXECUTE_TOOL} {call.tool}",
                path,
                parent.path,
                end - call.ms * 1_000_000,
                end,
                attributes,
            )
        )
        if call.status in ("error", "timeout"):
            span.attributes["error.type"] = call.status
            span.status = Status(StatusCode.ERROR, f"{call.tool} {call.status}")


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _transitions_by_cycle(trace: Trace) -> tuple[list[TransitionRecord], dict[int, list[TransitionRecord]]]:
    """The run's transitions: those before its first cycle, and those of each cycle (its verdict's too)."""
    cuts: list[int] = []
    for i, c in enumerate(trace.cycles):
        if c.transitions_at_start is not None:
            cuts.append(c.transitions_at_start)
        else:  # an older trace: by time
            cuts.append(
                next(
                    (n for n, t in enumerate(trace.transitions) if t.at >= c.started_at),
                    len(trace.transitions),
                )
            )
        if i and cuts[i] < cuts[i - 1]:
            cuts[i] = cuts[i - 1]
    bounds = [*cuts, len(trace.transitions)]
    before = trace.transitions[: cuts[0]] if cuts else list(trace.transitions)
    return before, {c.index: trace.transitions[bounds[i] : bounds[i + 1]] for i, c in enumerate(trace.cycles)}


def _group_of(
    c: CycleRecord, step: str | None, at: str, steps: dict[tuple[str, int], Draft]
) -> tuple[str, int] | None:
    """The step attempt a message or call of `step` at time `at` belongs to (None: the cycle itself)."""
    if step is None:
        return None
    attempts = [a for a in c.steps if a.step == step]
    inside = [a for a in attempts if a.started_at <= at and (a.ended_at is None or at <= a.ended_at)]
    begun = [a for a in attempts if a.started_at <= at]
    candidates = inside or begun or attempts
    if not candidates:
        return None
    key = (candidates[-1].step, candidates[-1].attempt)
    return key if key in steps else None


def build_spans(trace: Trace, *, content: bool, resource: Resource) -> list[ReadableSpan]:
    """The spans of a run, parents before children (see the module docstring)."""
    b = _Builder(trace, content)
    run = b.run()
    before, by_cycle = _transitions_by_cycle(trace)
    for t in before:
        run.event("pse.transition", ns(t.at), transition(t))
    if trace.outcome == "ESCALATED" or trace.escalation:
        run.event("pse.escalation", run.end, {"pse.outcome_reason": trace.outcome_reason})
    for i in range(len(trace.probes)):
        b.probe(i, run)
    for c in trace.cycles:
        cycle = b.cycle(c, by_cycle.get(c.index, []))
        steps = b.steps(c)
        previous: dict[tuple[str, int] | None, int] = {}
        for i, m in enumerate(c.messages):
            group = _group_of(c, m.step, m.at, steps)
            parent = steps[group] if group is not None else cycle
            start = previous.get(group, parent.start)
            previous[group] = ns(m.at)
            if m.source in ALL_ROLES:
                b.chat(c, i, parent, start)
        for i, call in enumerate(c.tool_calls):
            group = _group_of(c, call.step, call.at, steps)
            b.tool(c, i, steps[group] if group is not None else cycle)
    return finished(b.spans, trace.run_id, resource)
