"""The JSON form of a turn, for servers that constrain decoding by JSON schema only, and its way back.

`turn_schema` is the same shape as `turn_grammar`, as one JSON object with a `kind`: `tool_calls`,
`plan`, `report`, `blocked`, `conflict` (a `SPEC_CONFLICT` block: `test` and `specification`) or
`verdict`, plus an optional `note` (the prose before a block). It takes
the grammar's bounds (`TurnShape.sizes()`): the note, every text, the lists of a plan, the invokes of a
message and each tool value (a short parameter at its `max_chars`) have the same most lengths and
counts. Under a token budget that bounds a looping model the same way; whether the whole answer fits
the limit is not measured for JSON (keys, quotes and escapes add to it), only for the grammar. A
plan's steps and criteria are lists of texts, numbered S1.. and AC1.. on the way back; an
Evaluator's `criteria` is an object with exactly the plan's ids as keys, and an Evaluator told of
findings (`TurnShape.findings`) gives a list of them, numbered F1.. on the way back.

`protocol_from_json` turns the model's JSON answer into the protocol text it stands for, rendered by the
protocol's own renderers, so everything downstream (the ToolAgent, the engine's parsers, the trace,
recordings) sees the same text as from a model that wrote it. Anything that is no JSON turn is returned
as it came: the engine's parsers then report what is wrong, as for any malformed message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pse.events import SEVERITIES, PlanItem, PlanRecord
from pse.protocol._budget import CONFLICT_TEST_CHARS, FINDING_LINE_DIGITS, GrammarSizes
from pse.protocol._dsml_render import render_tool_calls
from pse.protocol._grammar import TurnShape
from pse.protocol._tags import BLOCKED_REASONS, SPEC_CONFLICT, VERDICT_STATUSES, render_plan
from pse.protocol._types import ParamSpec, ToolSignature

__all__ = ["protocol_from_json", "turn_schema"]

JsonObject = dict[str, Any]
_REPORT_FIELDS = ("artifacts", "evidence", "assumptions", "unresolved")


def _text(sizes: GrammarSizes) -> JsonObject:
    return {"type": "string", "minLength": 1, "maxLength": sizes.text}


def _kind(kind: str, properties: Mapping[str, JsonObject], sizes: GrammarSizes) -> JsonObject:
    """One variant: `kind`, its required properties in order, then the optional `note`."""
    return {
        "type": "object",
        "properties": {
            "kind": {"const": kind},
            **properties,
            "note": {"type": "string", "maxLength": sizes.prose},
        },
        "required": ["kind", *properties],
        "additionalProperties": False,
    }


def turn_schema(shape: TurnShape) -> JsonObject:
    """The JSON schema of every answer `shape.role` may give now (`anyOf` its kinds). A JSON answer holds
    its writes as `write_file` calls, whatever the write format."""
    shape = replace(shape, files=False)
    sizes = shape.sizes()
    variants: list[JsonObject] = []
    for kind in shape.kinds():  # the same kinds as `turn_grammar`, in the same order
        if kind == "plan":
            variants.append(_plan(sizes))
        elif kind == "report":
            variants.append(_kind("report", dict.fromkeys(_REPORT_FIELDS, _text(sizes)), sizes))
        elif kind == "verdict":
            variants.append(_verdict(shape.criteria, sizes, shape.findings))
        elif kind == "blocked":
            variants.append(_blocked(sizes))
        elif kind == "conflict":
            variants.append(_conflict(sizes))
        elif kind == "clarification":
            variants.append(_kind("clarification", {"questions": _list(_text(sizes), sizes, least=1)}, sizes))
        else:
            calls = [_call(tool, sizes) for tool in shape.tools]
            items = {"anyOf": calls} if len(calls) > 1 else calls[0]
            array = {"type": "array", "items": items, "minItems": 1, "maxItems": sizes.invokes}
            variants.append(_kind("tool_calls", {"calls": array}, sizes))
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _list(items: JsonObject, sizes: GrammarSizes, *, least: int) -> JsonObject:
    return {"type": "array", "items": items, "minItems": least, "maxItems": sizes.items}


def _path(sizes: GrammarSizes) -> JsonObject:
    """A relative path, as bounded as the grammar's (`..` is refused where it is used). No `\\s` in the
    pattern: llama.cpp's converter has no such escape, and refused the whole schema for it."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": 2 + 2 * sizes.path,
        "pattern": r'^[^/"<> \t\r\n][^"<> \t\r\n]*$',
    }


def _plan(sizes: GrammarSizes) -> JsonObject:
    path = _path(sizes)
    text = _text(sizes)
    return _kind(
        "plan",
        {
            "goal": {**text, "maxLength": sizes.goal or sizes.text},
            "steps": _list(text, sizes, least=0),
            "criteria": _list(text, sizes, least=1),
            "outputs": _list(path, sizes, least=0),
        },
        sizes,
    )


def _blocked(sizes: GrammarSizes) -> JsonObject:
    return _kind("blocked", {"reason_code": {"enum": list(BLOCKED_REASONS)}, "detail": _text(sizes)}, sizes)


def _conflict(sizes: GrammarSizes) -> JsonObject:
    test = {
        "type": "string",
        "minLength": 1,
        "maxLength": CONFLICT_TEST_CHARS,
        "pattern": r'^[^"<> \t\r\n][^"<>\r\n]*$',  # no \s: llama.cpp's converter has no such escape
    }
    return _kind("conflict", {"test": test, "specification": _text(sizes)}, sizes)


def _findings(criteria: tuple[str, ...] | None, sizes: GrammarSizes) -> JsonObject:
    """Up to `sizes.findings` findings, each a severity and a text, and where it is when known."""
    criterion: JsonObject = (
        {"enum": list(criteria)}
        if criteria
        else {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.]{0,15}$"}
    )
    finding = {
        "type": "object",
        "properties": {
            "severity": {"enum": list(SEVERITIES)},
            "text": _text(sizes),
            "criterion": criterion,
            "path": _path(sizes),
            "line": {"type": "integer", "minimum": 1, "maximum": 10**FINDING_LINE_DIGITS - 1},
        },
        "required": ["severity", "text"],
        "additionalProperties": False,
    }
    return {"type": "array", "items": finding, "minItems": 0, "maxItems": sizes.findings}


def _verdict(criteria: tuple[str, ...] | None, sizes: GrammarSizes, findings: bool = False) -> JsonObject:
    judged: JsonObject = {
        "type": "object",
        "properties": {"met": {"type": "boolean"}, "finding": _text(sizes)},
        "required": ["met", "finding"],
        "additionalProperties": False,
    }
    by_id: JsonObject = (
        {
            "type": "object",
            "properties": dict.fromkeys(criteria, judged),
            "required": list(criteria),
            "additionalProperties": False,
        }
        if criteria
        else {
            "type": "object",
            "additionalProperties": judged,
            "minProperties": 1,
            "maxProperties": sizes.items,
        }
    )
    return _kind(
        "verdict",
        {
            "status": {"enum": list(VERDICT_STATUSES)},
            "reason_code": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]{0,39}$"},
            "criteria": by_id,
            **({"findings": _findings(criteria, sizes)} if findings and sizes.findings else {}),
            "summary": _text(sizes),
        },
        sizes,
    )


def _value(param: ParamSpec, sizes: GrammarSizes) -> JsonObject:
    """A tool value's schema: bounded as in the grammar (a short one at its `max_chars`) under a budget."""
    if sizes.value is None:
        return {"type": "string"}
    if param.max_chars is not None and sizes.short is not None:
        return {"type": "string", "maxLength": min(param.max_chars, sizes.short)}
    return {"type": "string", "maxLength": sizes.value}


def _call(tool: ToolSignature, sizes: GrammarSizes) -> JsonObject:
    arguments: JsonObject = {
        "type": "object",
        "properties": {p.name: _value(p, sizes) for p in tool.params},
        "required": [p.name for p in tool.params if p.required],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"tool": {"const": tool.name}, "arguments": arguments},
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }


def protocol_from_json(text: str) -> str:
    """The protocol message a JSON turn (`turn_schema`) stands for; `text` unchanged when it is none."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    render = _RENDER.get(data.get("kind")) if isinstance(data, dict) else None
    if render is None:
        return text
    try:
        block = render(data)
    except (KeyError, TypeError, AttributeError, ValueError):  # ValueError: pydantic's
        return text
    note = data.get("note")
    return f"{note.strip()}\n{block}" if isinstance(note, str) and note.strip() else block


def _texts(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise TypeError("expected a list")
    return [str(v) for v in value]


def _render_calls(data: JsonObject) -> str:
    calls = [(str(c["tool"]), {str(k): str(v) for k, v in c["arguments"].items()}) for c in data["calls"]]
    return render_tool_calls(calls)


def _render_plan(data: JsonObject) -> str:
    plan = PlanRecord(
        goal=str(data["goal"]),
        steps=[PlanItem(id=f"S{i}", text=t) for i, t in enumerate(_texts(data.get("steps", [])), 1)],
        criteria=[PlanItem(id=f"AC{i}", text=t) for i, t in enumerate(_texts(data["criteria"]), 1)],
        outputs=_texts(data.get("outputs", [])),
    )
    return render_plan(plan)


def _render_report(data: JsonObject) -> str:
    lines = [f"{field.capitalize()}: {data[field]}" for field in _REPORT_FIELDS]
    return "\n".join(["<report>", *lines, "</report>"])


def _render_clarification(data: JsonObject) -> str:
    asked = "".join(f'<question id="Q{i}">{q}</question>\n' for i, q in enumerate(data["questions"], start=1))
    return f"<clarification>\n{asked}</clarification>"


def _render_blocked(data: JsonObject) -> str:
    return f'<blocked reason_code="{data["reason_code"]}">{data["detail"]}</blocked>'


def _render_conflict(data: JsonObject) -> str:
    return f'<blocked reason_code="{SPEC_CONFLICT}" test="{data["test"]}">{data["specification"]}</blocked>'


def _render_verdict(data: JsonObject) -> str:
    lines = [f'<verdict status="{data["status"]}">', f"  <reason_code>{data['reason_code']}</reason_code>"]
    for cid, judged in data["criteria"].items():
        met = "true" if judged["met"] is True else "false"
        lines.append(f'  <criterion id="{cid}" met="{met}">{judged["finding"]}</criterion>')
    for number, found in enumerate(data.get("findings") or [], start=1):
        where = "".join(f' {key}="{found[key]}"' for key in ("criterion", "path", "line") if key in found)
        lines.append(
            f'  <finding id="F{number}" severity="{found["severity"]}"{where}>{found["text"]}</finding>'
        )
    lines += [f"  <summary>{data['summary']}</summary>", "</verdict>"]
    return "\n".join(lines)


_RENDER: dict[object, Callable[[JsonObject], str]] = {
    "tool_calls": _render_calls,
    "plan": _render_plan,
    "report": _render_report,
    "blocked": _render_blocked,
    "conflict": _render_conflict,
    "clarification": _render_clarification,
    "verdict": _render_verdict,
}
