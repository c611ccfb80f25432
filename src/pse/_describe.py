"""What a message or a tool call did, in a few words: the live view's lines, `pse trace show`'s and the
dashboard's (one module beside both, so the CLI and the web tell the same words and neither imports the
other).

A role's message is shown as what it amounts to ("plan: … (2 steps, 4 criteria)", "verdict PARTIAL
(TESTS_FAILING): AC1 ✗ AC2 ✓", "report: …", its prose before a tool request), never as the raw
protocol XML. A tool call is shown as its effect ("wrote quicksort.py (433 B)", "pytest: 5 passed,
2 failed"), and its kind says how to colour it: a check that ran and found problems is a *finding*
(what the Evaluator is there to find), not a failure of the tool.

Everything returned is plain text a model or a tool wrote, with control sequences removed; callers
put it into `rich.text.Text` (never into markup) or escape it.
"""

from __future__ import annotations

import re
from typing import Literal

from pse._control import strip_control
from pse.events import ToolCallRecord
from pse.exceptions import ProtocolError
from pse.protocol import find_blocked, find_clarification, parse_plan, parse_verdict, strip_tool_traffic
from pse.tools import Tool

__all__ = ["CallKind", "describe_call", "describe_evidence", "describe_message", "flat"]

CallKind = Literal["ok", "finding", "failed", "denied"]
"""ok: it did what was asked; finding: a check ran and found problems; failed: the tool could not do
it (an error, a timeout); denied: a rule refused it, or the request could not be read."""

_BLOCKS = {
    tag: re.compile(rf"<{tag}\b")
    for tag in ("plan", "verdict", "report", "blocked", "clarification", "think")
}
_TAG = re.compile(
    r"</?(?:tool_calls|tool_results|invoke|parameter|result|plan|goal|step|criterion|output|verdict"
    r"|reason_code|summary|report|blocked|clarification|question|think)\b"
)
_INVOKE = re.compile(r"""<invoke\s+name=["']([\w.:-]{1,64})["']""")
_MAX_SCAN = 200_000  # a message is cut here before it is scanned: a line needs its start only


def flat(text: str, width: int = 0) -> str:
    """`text` on one line, control sequences removed, cut to `width` characters with … (0: not cut)."""
    line = " ".join(strip_control(str(text)).split())
    return line if width <= 0 or len(line) <= width else line[: width - 1] + "…"


def _size(n: object) -> str:
    size = int(n) if isinstance(n, int | float | str) and str(n).isdigit() else 0
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


def _duration(ms: int) -> str:
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _counts(facts: dict[str, object], names: tuple[str, ...]) -> str:
    shown = [f"{facts.get(name, 0)} {name}" for name in names if facts.get(name) or name == names[0]]
    return ", ".join(shown)


def describe_call(call: ToolCallRecord) -> tuple[str, CallKind]:
    """What a tool call did, and its kind (see `CallKind`)."""
    tool, args, facts = call.tool, call.arguments, call.facts
    if call.decision == "denied":
        if call.rule.startswith("protocol."):
            return f"{tool}: request not readable ({_first_line(call.output)})", "denied"
        why = _first_line(call.output)
        return f"{tool} denied by {call.rule}" + (f": {why}" if why else ""), "denied"
    if call.status == "timeout":
        return f"{tool} timed out after {_duration(call.ms)}", "failed"
    took = f" ({_duration(call.ms)})" if call.ms >= 100 else ""
    found: CallKind = "ok" if call.status == "ok" else "finding"
    unproven = facts.get("unproven") or []
    proof = f" · not evidence: {flat(str(unproven[0]), 90)}" if unproven else ""
    if tool == Tool.RUN_PYTEST and facts.get("report") == "checker":
        return f"pytest: {_counts(facts, ('passed', 'failed', 'errors', 'skipped'))}{proof}{took}", found
    if tool == Tool.RUN_RUFF and isinstance(facts.get("findings"), int):
        n = int(facts["findings"])
        return f"ruff: {n or 'no'} finding{'' if n == 1 else 's'}{proof}{took}", found
    if tool == Tool.RUN_CHECK and "exit_code" in facts:
        name = facts.get("check") or args.get("name", "")
        verdict = "passed" if call.status == "ok" else f"failed (exit code {facts['exit_code']})"
        return f"check {name}: {verdict}{took}", found
    if tool == Tool.BASH and "exit_code" in facts:
        return f"bash `{flat(args.get('command', ''), 60)}`: exit code {facts['exit_code']}{took}", found
    if call.status != "ok":
        return f"{tool} failed: {_first_line(call.output) or call.status}{took}", "failed"
    if tool == Tool.WRITE_FILE:
        return f"wrote {facts.get('path') or args.get('path', '')} ({_size(facts.get('bytes'))})", "ok"
    if tool == Tool.READ_FILE:
        return f"read {args.get('path', '')} ({_size(facts.get('bytes'))})", "ok"
    if tool == Tool.LIST_FILES:
        return f"listed {args.get('path') or '.'} ({facts.get('entries', 0)} entries)", "ok"
    if tool == Tool.SEARCH_KNOWLEDGE:
        return f'searched the knowledge base for "{flat(args.get("query", ""), 60)}"{took}', "ok"
    return f"{tool} ok{took}", "ok"


_CHECKS = (Tool.RUN_PYTEST, Tool.RUN_RUFF, Tool.RUN_CHECK)


def describe_evidence(calls: list[ToolCallRecord]) -> list[str]:
    """What the last run of each check saw and proved: its sealed files, what was left out (and who wrote
    it), the tests by author, the calls the tests made into each delivered module, and why it is not
    evidence, if it is not."""
    last: dict[str, ToolCallRecord] = {}
    for call in calls:
        if (
            call.tool in _CHECKS
            and call.decision == "allowed"
            and isinstance(call.facts.get("evidence"), dict)
        ):
            key = (
                call.tool if call.tool != Tool.RUN_CHECK else f"{call.tool}({call.arguments.get('name', '')})"
            )
            last[key] = call
    lines: list[str] = []
    for key, call in last.items():
        evidence, facts = call.facts["evidence"], call.facts
        kinds: dict[str, list[str]] = {}
        for entry in evidence.get("files") or []:
            kinds.setdefault(str(entry.get("kind")), []).append(str(entry.get("path")))
        held = "; ".join(
            f"{kind}s: {', '.join(paths[:6])}{f' +{len(paths) - 6}' if len(paths) > 6 else ''}"
            for kind, paths in kinds.items()
        )
        line = f"Evidence of the last {key}: {evidence.get('count', 0)} file(s) sealed" + (
            f" ({held})" if held else ""
        )
        left = evidence.get("left_out") or []
        if left:
            line += " · left out: " + ", ".join(f"{e.get('path')} ({e.get('author')})" for e in left[:6])
        lines.append(flat(line))
        authors = facts.get("by_author") or {}
        if authors:
            who = ", ".join(
                f"{author}: {_counts(counts, ('passed', 'failed', 'errors', 'skipped'))}"
                for author, counts in authors.items()
                if isinstance(counts, dict)
            )
            lines.append(flat(f"  tests by author (PSE's write records): {who}"))
        for module, used in (facts.get("exercised") or {}).items():
            if isinstance(used, dict):
                mark = "✓" if used.get("proven") else "✗"
                count = used.get("calls")
                ran = f"{count} call(s) from the tests" if used.get("imported") else "never imported"
                lines.append(flat(f"  exercised {mark} {module}: {ran}"))
        for why in facts.get("unproven") or []:
            lines.append(flat(f"  not positive evidence: {why}"))
    return lines


def _without_blocks(text: str) -> str:
    """The prose of a message: its protocol blocks and any leftover tag removed (one pass per tag)."""
    text = strip_tool_traffic(text)
    for tag, opening in _BLOCKS.items():
        pieces, at = [], 0
        while (found := opening.search(text, at)) is not None:
            pieces.append(text[at : found.start()])
            end = text.find(f"</{tag}>", found.end())
            at = len(text) if end < 0 else end + len(tag) + 3
        text = "".join(pieces) + text[at:]
    out, at = [], 0
    for left in _TAG.finditer(text):  # a protocol tag left over: an unclosed block, a tag cut short
        if left.start() < at:
            continue
        close = text.find(">", left.end(), left.end() + 200)
        out.append(text[at : left.start()])
        at = len(text) if close < 0 else close + 1  # cut mid-tag: nothing after it is readable prose
    return "".join(out) + text[at:]


def _requested(text: str) -> str:
    """The tools a message asks for (the ToolAgent's lines say what became of each)."""
    if "<tool_calls" not in text:
        return ""
    names = [m.group(1) for m in _INVOKE.finditer(text)] or ["a tool"]
    counted = {name: names.count(name) for name in names}
    return ", ".join(name if n == 1 else f"{name} ×{n}" for name, n in counted.items())


def _report(text: str) -> str:
    start = text.find("<report")
    open_end = text.find(">", start)
    if start < 0 or open_end < 0:
        return ""
    end = text.find("</report>", open_end)
    return _first_line(text[open_end + 1 : end if end >= 0 else len(text)])


def describe_message(source: str, content: str) -> str:
    """What a role's message amounts to, on one line, without its protocol XML."""
    text = content[:_MAX_SCAN]
    bare = strip_tool_traffic(text)  # a tag inside a written file or a tool result is not the role's
    prose = flat(_without_blocks(text))
    try:
        if _BLOCKS["verdict"].search(bare):
            v = parse_verdict(text)
            marks = " ".join(f"{c.id} {'✓' if c.met else '✗'}" for c in v.criteria)
            return flat(f"verdict {v.status} ({v.reason_code})" + (f": {marks}" if marks else ""))
        if _BLOCKS["plan"].search(bare):
            p = parse_plan(text)
            return flat(f"plan: {p.goal} ({len(p.steps)} steps, {len(p.criteria)} criteria)")
        if _BLOCKS["clarification"].search(bare) and (asked := find_clarification(text)) is not None:
            return flat("asks: " + " ".join(f"{q.id} {q.text}" for q in asked.questions))
        if _BLOCKS["blocked"].search(bare) and (blocked := find_blocked(text, source)) is not None:
            return flat(f"blocked ({blocked.reason_code}): {blocked.detail}")
    except ProtocolError as exc:
        return flat(f"{prose} (unreadable: {exc})" if prose else f"unreadable: {exc}")
    if report := _report(bare):
        return flat(f"report: {report}")
    requested = _requested(text)
    if requested:
        return f"{prose} → {requested}" if prose else f"requests {requested}"
    return prose or "(no text)"
