"""The native protocol's translation: a model's function calls to the DSML the ToolAgent reads, and back.

The ToolAgent, the engine and the trace know one format. A native model's reply is translated into it
(`render_native`) before anything else sees it, as one message:

    prose                        the text the model wrote beside its calls, `&` and `<` escaped
    <tool_calls>…</tool_calls>   one invoke per tool call, in the order called (`render_invoke`)
    <plan>…</plan> …             one element per output function called, in order

Rules:

* Prose is never a request nor a final answer: it is escaped (`&amp;`, `&lt;`), so no parser reads a
  tag in it. Only function calls act.
* A tool call's arguments must decode as one JSON object. Strings are taken as they are, numbers and
  booleans as their JSON text, null as absent. Anything else (bad JSON, an array, a nested object, a name
  that is no parameter name) makes the invoke fail as `bad_arguments`, with the reason; nothing of it
  runs, and its raw text is kept as the parameter `arguments` for the audit.
* Everything else is the DSML parser's to judge, with its own errors: an unknown function is an invoke
  of that name (`unknown_tool`), a missing argument is missing (`missing_parameter`), and so on.
* An output function's arguments become its element with whatever parts they hold; a missing part is
  missing, so the engine's parser names it (`plan: found no <goal>`). Arguments that are no JSON object
  become a line of prose saying so.

`read_native` is the inverse, for the role's own earlier messages when its next request is built: the
prose, the tool calls with their arguments as JSON, and each final element as its output function's
call. `function_results` gives each tool call the text of its result from the ToolAgent's answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pse.exceptions import ProtocolError
from pse.protocol._dsml import _parse_block, _SyntaxProblem
from pse.protocol._dsml_render import render_invoke
from pse.protocol._functions import OutputFunction
from pse.protocol._results import ResultItem, parse_tool_results
from pse.protocol._tags import _elements, parse_plan, parse_verdict

__all__ = ["NativeCall", "NativeTurn", "escape_prose", "function_results", "read_native", "render_native"]

_NAME = re.compile(r"[A-Za-z_][\w.-]*")
_FINAL = re.compile(r"<(plan|report|verdict|blocked)(?=[\s>/])")
_WS = re.compile(r"\s*")
_REPORT_LINES = (
    ("artifacts", "Artifacts"),
    ("evidence", "Evidence"),
    ("assumptions", "Assumptions"),
    ("unresolved", "Unresolved"),
)
_NO_ARTIFACTS = "none"
_ADVICE = "send one JSON object with a text value per parameter"


@dataclass(frozen=True, slots=True)
class NativeCall:
    """One function call as a model makes it: the function's name and its arguments as JSON text."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class NativeTurn:
    """A role's message read back as function calls: its prose, its tool calls, then its output calls."""

    prose: str
    tool_calls: tuple[NativeCall, ...] = ()
    outputs: tuple[NativeCall, ...] = ()


def escape_prose(text: str) -> str:
    """`text` with `&` and `<` escaped, so no parser finds a tag in it (`_unescape_prose` reverses it)."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _unescape_prose(text: str) -> str:
    """The inverse of `escape_prose`."""
    return text.replace("&lt;", "<").replace("&amp;", "&")


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "text"
    return "null" if value is None else "a number" if isinstance(value, int | float) else "a boolean"


def _attribute_safe(text: str) -> str:
    return text.replace('"', "'").replace("<", "").replace(">", "")


def _decode_arguments(raw: str) -> dict[str, Any] | str:
    """A call's arguments as an object, or why they are not one (empty text is no arguments)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return f"the arguments are {_kind(value)}, not a JSON object"
    return value


def _tool_arguments(raw: str) -> dict[str, str] | str:
    """A tool call's arguments as text values, or why they cannot be (see the module docstring)."""
    value = _decode_arguments(raw)
    if isinstance(value, str):
        return value
    arguments: dict[str, str] = {}
    for name, item in value.items():
        if not _NAME.fullmatch(name):
            return f"{name[:40]!r} is not a parameter name"
        if item is None:
            continue
        if isinstance(item, bool):
            arguments[name] = "true" if item else "false"
        elif isinstance(item, int | float):
            arguments[name] = json.dumps(item)
        elif isinstance(item, str):
            arguments[name] = item
        else:
            return f"parameter {name!r} is {_kind(item)}, not text"
    return arguments


def _function_name(name: str) -> str:
    """The name as an invoke can carry it (a provider already allows only letters, digits, `_` and `-`)."""
    return re.sub(r"[^\w.-]", "_", name) or "_"


def render_native(prose: str, calls: Sequence[NativeCall], outputs: Collection[str]) -> str:
    """One message of canonical DSML for a model's reply: its prose and function calls (module docstring).

    Args:
        prose: the text beside the calls (escaped here).
        calls: the function calls, in order.
        outputs: the names of the role's output functions; every other name is a tool request.
    """
    invokes: list[str] = []
    finals: list[str] = []
    for call in calls:
        name = _function_name(call.name)
        if name in outputs and name in _RENDER:
            finals.append(_render_output(OutputFunction(name), call.arguments))
            continue
        arguments = _tool_arguments(call.arguments)
        if isinstance(arguments, str):
            error = _attribute_safe(f"{arguments}; {_ADVICE}")
            invokes.append(render_invoke(name, {"arguments": call.arguments}, error=error))
        else:
            invokes.append(render_invoke(name, arguments))
    parts = [escape_prose(prose.strip())] if prose.strip() else []
    if invokes:
        parts.append("\n".join(["<tool_calls>", *invokes, "</tool_calls>"]))
    return "\n".join(parts + finals)


# --- output functions → elements -------------------------------------------------------------


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _entries(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else [] if value is None else [value]


def _numbered(tag: str, value: object) -> list[str]:
    lines = []
    for entry in _entries(value):
        fields = entry if isinstance(entry, dict) else {"text": entry}
        item_id = _attribute_safe(_text(fields.get("id", "")))
        lines.append(f'  <{tag} id="{item_id}">{_text(fields.get("text", ""))}</{tag}>')
    return lines


def _plan(args: Mapping[str, Any]) -> str:
    lines = ["<plan>"]
    if "goal" in args:
        lines.append(f"  <goal>{_text(args['goal'])}</goal>")
    lines += _numbered("step", args.get("steps")) + _numbered("criterion", args.get("criteria"))
    lines += [f'  <output path="{_attribute_safe(_text(path))}"/>' for path in _entries(args.get("outputs"))]
    return "\n".join([*lines, "</plan>"])


def _report(args: Mapping[str, Any]) -> str:
    lines = ["<report>"]
    for key, label in _REPORT_LINES:
        if key not in args:
            continue
        value = args[key]
        if key == "artifacts":
            value = ", ".join(_text(a) for a in _entries(value)) or _NO_ARTIFACTS
        lines.append(f"{label}: {_text(value)}")
    return "\n".join([*lines, "</report>"])


def _verdict(args: Mapping[str, Any]) -> str:
    status = f' status="{_attribute_safe(_text(args["status"]))}"' if "status" in args else ""
    lines = [f"<verdict{status}>"]
    if "reason_code" in args:
        lines.append(f"  <reason_code>{_text(args['reason_code'])}</reason_code>")
    for entry in _entries(args.get("criteria")):
        fields = entry if isinstance(entry, dict) else {"finding": entry}
        met = fields.get("met")
        met_attribute = "" if met is None else f' met="{_attribute_safe(_text(met))}"'
        cid = _attribute_safe(_text(fields.get("id", "")))
        lines.append(f'  <criterion id="{cid}"{met_attribute}>{_text(fields.get("finding", ""))}</criterion>')
    lines += [_finding(entry) for entry in _entries(args.get("findings"))]
    if "summary" in args:
        lines.append(f"  <summary>{_text(args['summary'])}</summary>")
    return "\n".join([*lines, "</verdict>"])


def _finding(entry: object) -> str:
    """One entry of `findings` as its `<finding>`; an attribute given as null is left out."""
    fields = entry if isinstance(entry, dict) else {"text": entry}
    attributes = "".join(
        f' {name}="{_attribute_safe(_text(fields[name]))}"'
        for name in ("id", "severity", "criterion", "path", "line")
        if fields.get(name) is not None
    )
    return f"  <finding{attributes}>{_text(fields.get('text', ''))}</finding>"


def _blocked(args: Mapping[str, Any]) -> str:
    code = f' reason_code="{_attribute_safe(_text(args["reason_code"]))}"' if "reason_code" in args else ""
    return f"<blocked{code}>{_text(args.get('detail', ''))}</blocked>"


_RENDER: Mapping[OutputFunction, Callable[[Mapping[str, Any]], str]] = {
    OutputFunction.SUBMIT_PLAN: _plan,
    OutputFunction.SUBMIT_REPORT: _report,
    OutputFunction.SUBMIT_VERDICT: _verdict,
    OutputFunction.BLOCK: _blocked,
}


def _render_output(name: OutputFunction, raw: str) -> str:
    args = _decode_arguments(raw)
    if isinstance(args, str):
        return escape_prose(f"{name}: {args}; nothing was submitted")
    return _RENDER[name](args)


# --- a message → function calls ------------------------------------------------------------------


def _arguments(args: Mapping[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)


def _plan_call(element: str) -> NativeCall:
    plan = parse_plan(element)
    args = {
        "goal": plan.goal,
        "steps": [{"id": s.id, "text": s.text} for s in plan.steps],
        "criteria": [{"id": c.id, "text": c.text} for c in plan.criteria],
        "outputs": list(plan.outputs),
    }
    return NativeCall(OutputFunction.SUBMIT_PLAN.value, _arguments(args))


def _verdict_call(element: str) -> NativeCall:
    verdict = parse_verdict(element)
    args = {
        "status": verdict.status,
        "reason_code": verdict.reason_code,
        "criteria": [{"id": c.id, "met": c.met, "finding": c.finding} for c in verdict.criteria],
        "summary": verdict.summary,
    }
    if verdict.findings:  # only then: a verdict without findings is sent as it always was
        args["findings"] = [
            {
                "id": f.id,
                "severity": f.severity,
                "text": f.text,
                "criterion": f.criterion,
                "path": f.path,
                "line": f.line,
            }
            for f in verdict.findings
        ]
    return NativeCall(OutputFunction.SUBMIT_VERDICT.value, _arguments(args))


def _blocked_call(element: str) -> NativeCall:
    attributes, detail = _elements(element, "blocked", "blocked")[0]
    args = {"reason_code": attributes.get("reason_code", ""), "detail": detail}
    return NativeCall(OutputFunction.BLOCK.value, _arguments(args))


def _report_call(element: str) -> NativeCall:
    body = element[len("<report>") : -len("</report>")].strip("\n")
    args: dict[str, Any] = {}
    current = ""
    for line in body.split("\n"):
        key = next((k for k, label in _REPORT_LINES if line.startswith(f"{label}: ") and k not in args), None)
        if key is not None:
            current = key
            args[key] = line.split(": ", 1)[1]
        elif current:
            args[current] += "\n" + line
        else:
            raise ProtocolError("report: text before its first line (Artifacts: …)")
    if "artifacts" in args:
        text = args["artifacts"]
        args["artifacts"] = [] if text == _NO_ARTIFACTS else text.split(", ")
    return NativeCall(OutputFunction.SUBMIT_REPORT.value, _arguments(args))


_READ: Mapping[str, Callable[[str], NativeCall]] = {
    "plan": _plan_call,
    "report": _report_call,
    "verdict": _verdict_call,
    "blocked": _blocked_call,
}


def read_native(text: str) -> NativeTurn | None:
    """A message as the function calls that would have written it; None when it is not of that shape.

    The shape is what `render_native` writes: prose without a tag, then at most one `<tool_calls>`
    block, then final elements (`<plan>`, `<report>`, `<verdict>`, `<blocked>`) and nothing else.
    """
    start = text.find("<")
    if start < 0:
        return NativeTurn(_unescape_prose(text).strip())
    prose = _unescape_prose(text[:start]).strip()
    pos = start
    tool_calls: list[NativeCall] = []
    if text.startswith("<tool_calls", pos):
        try:
            invokes, pos = _parse_block(text, pos)
        except _SyntaxProblem:
            return None
        for invoke in invokes:
            params = dict(invoke.params)
            raw = params.get("arguments", "") if invoke.error is not None else _arguments(params)
            tool_calls.append(NativeCall(invoke.name, raw))
    outputs: list[NativeCall] = []
    while (pos := _WS.match(text, pos).end()) < len(text):  # type: ignore[union-attr]
        final = _FINAL.match(text, pos)
        if final is None:
            return None
        tag = final.group(1)
        close = text.find(f"</{tag}>", pos)
        if close < 0:
            return None
        end = close + len(tag) + 3
        try:
            outputs.append(_READ[tag](text[pos:end]))
        except ProtocolError:
            return None
        pos = end
    return NativeTurn(prose, tuple(tool_calls), tuple(outputs))


def _result_text(item: ResultItem) -> str:
    return item.output if item.status == "ok" else f"[{item.status}] {item.output}"


def function_results(text: str, requester: str, calls: int) -> list[tuple[str, bool]] | None:
    """What each of `calls` tool calls gets back from the ToolAgent's answer `text`: (text, is_error).

    A result that is not `ok` starts with its status in brackets (`[denied] …`). When the answer does
    not hold one result per call (too many calls in one message: one error for all), every call gets
    the whole answer. None when `text` is no answer to `requester`.
    """
    try:
        addressee, items = parse_tool_results(text)
    except ValueError:
        return None
    if addressee != requester:
        return None
    if [item.index for item in items] == list(range(1, calls + 1)):
        return [(_result_text(item), item.status != "ok") for item in items]
    joint = "\n".join(f"{item.name}: {_result_text(item)}" for item in items)
    return [(joint, True)] * calls
