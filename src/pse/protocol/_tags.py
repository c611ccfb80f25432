"""Pure parsing of the roles' structured tags: `<plan>`, `<verdict>` and `<blocked>`.

Models write these inside prose and Markdown, and their bodies hold raw text
(code, arrows, `<` signs) that nobody escapes, so this is a small scanner, not an
XML parser: a body runs to its literal closing tag, attributes are `name="value"`
or `name='value'`, and no entity is ever expanded. Everything that is not exactly
the expected shape raises `ProtocolError` with a message saying what was wrong,
because a verdict that is guessed at is worse than none.

Every scan is one forward pass over the message (see `_scan`): a model can send anything, and a scan that
rereads the rest of the text for each tag would let one message stall the event loop.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from pse.events import (
    SEVERITIES,
    BlockedRecord,
    ClarificationRecord,
    CriterionResult,
    FindingRecord,
    PlanItem,
    PlanRecord,
    QuestionRecord,
    VerdictRecord,
)
from pse.exceptions import ProtocolError
from pse.protocol._scan import AttributeScanner, BlockKind, strip_blocks

__all__ = [
    "BLOCKED_REASONS",
    "SPEC_CONFLICT",
    "VERDICT_STATUSES",
    "find_blocked",
    "find_clarification",
    "parse_plan",
    "parse_verdict",
    "render_plan",
    "strip_tool_traffic",
]

_ATTRS = AttributeScanner(r"\w-")
VERDICT_STATUSES = ("PASS", "PARTIAL", "FAIL", "BLOCKED")
"""The statuses a `<verdict>` may have."""
BLOCKED_REASONS = ("MISSING_DATA", "MISSING_PERMISSION", "CONFLICTING_CRITERIA", "OUT_OF_SCOPE")
"""The reason codes of `<blocked>` (prompts/protocol.md): the enum of `block` and of the grammar."""
SPEC_CONFLICT = "SPEC_CONFLICT"
"""The honest way out of a task whose given test contradicts its specification, for the Specialist, the
Evaluator and the single agent: `<blocked reason_code="SPEC_CONFLICT" test="TEST">SENTENCE</blocked>`,
naming the test and quoting the sentence of the specification it contradicts (a grammar kind of its own,
`conflict`; the engine escalates it to a person with both quoted)."""
_CDATA: BlockKind = (re.compile(re.escape("<![CDATA[")), re.compile(re.escape("]]>")))
_TOOL_TRAFFIC: tuple[BlockKind, ...] = (
    (re.compile(r"<tool_calls\b"), re.compile("</tool_calls>")),
    (re.compile(r"<tool_results\b"), re.compile("</tool_results>")),
)


def strip_tool_traffic(text: str) -> str:
    """Remove complete `<tool_calls>` and `<tool_results>` blocks: tags quoted in them are not ours."""
    # CDATA first: a quoted `</tool_results>` inside it must not end a block early.
    return strip_blocks(strip_blocks(text, [_CDATA]), _TOOL_TRAFFIC)


def _attributes(raw: str, where: str) -> dict[str, str]:
    pairs = list(_ATTRS.pairs(raw))
    rest = _outside(raw, pairs).strip().rstrip("/").strip()
    if rest:
        raise ProtocolError(f'{where}: cannot read the attributes {raw.strip()!r}; write name="value" pairs')
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in pairs}


def _outside(text: str, matches: list[re.Match[str]]) -> str:
    """What is left of `text` once the (ordered, disjoint) `matches` are cut out."""
    pieces: list[str] = []
    pos = 0
    for match in matches:
        pieces.append(text[pos : match.start()])
        pos = match.end()
    pieces.append(text[pos:])
    return "".join(pieces)


def _elements(text: str, tag: str, where: str) -> list[tuple[dict[str, str], str]]:
    """Every `<tag attrs>body</tag>` (or `<tag attrs/>`) in `text`, in order, with raw bodies.

    One forward pass: each search starts behind the last element, and the check for a nested opener reads
    only the body. An opener's `[^<>]*` stops at the next `<`, so no character is read for two openers.
    """
    found: list[tuple[dict[str, str], str]] = []
    opening = re.compile(rf"<{tag}(\s[^<>]*)?>|<{tag}\s*/>", re.DOTALL)
    pos = 0
    while True:
        match = opening.search(text, pos)
        if match is None:
            return found
        raw_attrs = match.group(1) or ""
        if match.group(0).endswith("/>"):
            found.append((_attributes(raw_attrs.rstrip("/"), f"<{tag}>"), ""))
            pos = match.end()
            continue
        close = text.find(f"</{tag}>", match.end())
        if close < 0:
            raise ProtocolError(
                f"{where}: <{tag}> opened at character {match.start()} is never closed with </{tag}>"
            )
        nested = opening.search(text, match.end(), close)
        if nested is not None:
            raise ProtocolError(f"{where}: a second <{tag}> starts before the first is closed with </{tag}>")
        found.append((_attributes(raw_attrs, f"<{tag}>"), text[match.end() : close]))
        pos = close + len(tag) + 3


def _exactly_one(text: str, tag: str, where: str) -> tuple[dict[str, str], str]:
    items = _elements(text, tag, where)
    if len(items) != 1:
        what = "no" if not items else f"{len(items)}"
        raise ProtocolError(f"{where}: found {what} <{tag}> element(s), expected exactly one")
    return items[0]


def _numbered(body: str, tag: str, where: str) -> list[PlanItem]:
    items: list[PlanItem] = []
    seen: set[str] = set()  # not a search of `items`: over thousands of ids that is quadratic
    for attrs, text in _elements(body, tag, where):
        item_id = attrs.get("id", "").strip()
        if not item_id:
            raise ProtocolError(f'{where}: a <{tag}> has no id attribute; write <{tag} id="...">')
        if item_id in seen:
            raise ProtocolError(f'{where}: <{tag} id="{item_id}"> appears twice; ids must be unique')
        seen.add(item_id)
        if not text.strip():
            raise ProtocolError(f'{where}: <{tag} id="{item_id}"> is empty')
        depends = [d for d in re.split(r"[\s,]+", attrs.get("depends_on", "")) if d]
        step = attrs.get("step", "").strip() or None
        items.append(PlanItem(id=item_id, text=text.strip(), depends_on=depends, step=step))
    return items


def parse_plan(text: str) -> PlanRecord:
    """Parse the one `<plan>` in a Planner message.

    Raises:
        ProtocolError: no plan or several, no goal, no criterion, duplicate ids, or an output path that is
            absolute or climbs out with `..`.
    """
    where = "plan"
    _, body = _exactly_one(strip_tool_traffic(text), "plan", where)
    _, goal = _exactly_one(body, "goal", where)
    if not goal.strip():
        raise ProtocolError("plan: <goal> is empty")
    criteria = _numbered(body, "criterion", where)
    if not criteria:
        raise ProtocolError('plan: it has no <criterion id="AC1">; every plan needs acceptance criteria')
    outputs: list[str] = []
    output_steps: dict[str, str] = {}
    for attrs, _ in _elements(body, "output", where):
        path = attrs.get("path", "").strip()
        pure = PurePosixPath(path)
        if not path or pure.is_absolute() or ".." in pure.parts:
            raise ProtocolError(f"plan: <output path={path!r}> must be a relative path inside the workspace")
        step = attrs.get("step", "").strip()
        if step and str(pure) in output_steps and output_steps[str(pure)] != step:
            raise ProtocolError(
                f'plan: <output path="{pure}"> is claimed by steps {output_steps[str(pure)]} and {step}; '
                "one step produces each output"
            )
        if str(pure) not in outputs:
            outputs.append(str(pure))
        if step:
            output_steps[str(pure)] = step
    return PlanRecord(
        goal=goal.strip(),
        steps=_numbered(body, "step", where),
        criteria=criteria,
        outputs=outputs,
        output_steps=output_steps,
    )


def render_plan(plan: PlanRecord) -> str:
    """Render a plan back into its `<plan>` form (used in step_buffer packets)."""
    lines = ["<plan>", f"  <goal>{plan.goal}</goal>"]

    def depends(s: PlanItem) -> str:
        return f' depends_on="{",".join(s.depends_on)}"' if s.depends_on else ""

    def bound(step: str | None) -> str:
        return f' step="{step}"' if step else ""

    lines += [f'  <step id="{s.id}"{depends(s)}>{s.text}</step>' for s in plan.steps]
    lines += [f'  <criterion id="{c.id}"{bound(c.step)}>{c.text}</criterion>' for c in plan.criteria]
    lines += [f'  <output path="{p}"{bound(plan.output_steps.get(p))}/>' for p in plan.outputs]
    lines.append("</plan>")
    return "\n".join(lines)


def parse_verdict(text: str) -> VerdictRecord:
    """Parse the one `<verdict>` an Evaluator message must hold.

    Raises:
        ProtocolError: anything but exactly one well-formed verdict (the engine turns this into a review
            ERROR, never a pass).
    """
    where = "verdict"
    attrs, body = _exactly_one(strip_tool_traffic(text), "verdict", where)
    status = attrs.get("status", "").strip().upper()
    if status not in VERDICT_STATUSES:
        raise ProtocolError(
            f"verdict: status={attrs.get('status')!r} is not one of {', '.join(VERDICT_STATUSES)}"
        )
    _, reason_code = _exactly_one(body, "reason_code", where)
    if not reason_code.strip():
        raise ProtocolError("verdict: <reason_code> is empty")
    criteria: list[CriterionResult] = []
    seen: set[str] = set()
    for c_attrs, finding in _elements(body, "criterion", where):
        cid = c_attrs.get("id", "").strip()
        met = c_attrs.get("met", "").strip().lower()
        if not cid:
            raise ProtocolError("verdict: a <criterion> has no id attribute")
        if met not in ("true", "false"):
            raise ProtocolError(f'verdict: <criterion id="{cid}"> needs met="true" or met="false"')
        if cid in seen:
            raise ProtocolError(f'verdict: <criterion id="{cid}"> appears twice')
        seen.add(cid)
        criteria.append(CriterionResult(id=cid, met=met == "true", finding=finding.strip()))
    summaries = _elements(body, "summary", where)
    if len(summaries) > 1:
        raise ProtocolError("verdict: more than one <summary>")
    return VerdictRecord(
        status=status,  # checked against VERDICT_STATUSES above
        reason_code=reason_code.strip(),
        criteria=criteria,
        summary=summaries[0][1].strip() if summaries else "",
        findings=_findings(body, where),
    )


def _findings(body: str, where: str) -> list[FindingRecord]:
    """The verdict's `<finding id= severity= [criterion=] [path=] [line=]>…</finding>`s."""
    findings: list[FindingRecord] = []
    for attrs, text in _elements(body, "finding", where):
        fid = attrs.get("id", "").strip()
        severity = attrs.get("severity", "").strip().lower()
        if not fid:
            raise ProtocolError(
                'verdict: a <finding> has no id attribute (<finding id="F1" severity="high">)'
            )
        if severity not in SEVERITIES:
            raise ProtocolError(
                f'verdict: <finding id="{fid}"> needs severity="high", "medium" or "low", '
                f"not {attrs.get('severity')!r}"
            )
        if any(f.id == fid for f in findings):
            raise ProtocolError(f'verdict: <finding id="{fid}"> appears twice')
        line = attrs.get("line", "").strip()
        if line and not line.isdigit():
            raise ProtocolError(f'verdict: <finding id="{fid}"> line={line!r} is not a line number')
        findings.append(
            FindingRecord(
                id=fid,
                severity=severity,  # checked against SEVERITIES above
                text=text.strip(),
                criterion=attrs.get("criterion", "").strip() or None,
                path=attrs.get("path", "").strip() or None,
                line=int(line) if line else None,
            )
        )
    return findings


def find_clarification(text: str) -> ClarificationRecord | None:
    """The `<clarification>` of a Planner message, if any: one or more `<question id="Q1">…</question>`.

    Raises:
        ProtocolError: more than one clarification, none or an empty question, a question without an
            id, or the same id twice.
    """
    where = "clarification"
    cleaned = strip_tool_traffic(text)
    found = _elements(cleaned, "clarification", where)
    if not found:
        return None
    if len(found) > 1:
        raise ProtocolError("clarification: more than one <clarification>; ask every question in one")
    questions: list[QuestionRecord] = []
    for attrs, body in _elements(found[0][1], "question", where):
        qid = attrs.get("id", "").strip()
        if not qid:
            raise ProtocolError('clarification: a <question> has no id (<question id="Q1">…</question>)')
        if any(q.id == qid for q in questions):
            raise ProtocolError(f'clarification: <question id="{qid}"> appears twice')
        if not body.strip():
            raise ProtocolError(f'clarification: <question id="{qid}"> is empty')
        questions.append(QuestionRecord(id=qid, text=body.strip()))
    if not questions:
        raise ProtocolError('clarification: no <question id="Q1">…</question> inside <clarification>')
    return ClarificationRecord(questions=questions)


def find_blocked(text: str, role: str) -> BlockedRecord | None:
    """The `<blocked reason_code="..." [test="..."]>why</blocked>` in a role's message, if any."""
    items = _elements(strip_tool_traffic(text), "blocked", "blocked")
    if not items:
        return None
    attrs, detail = items[0]
    return BlockedRecord(
        role=role,
        reason_code=attrs.get("reason_code", "").strip() or "UNSPECIFIED",
        detail=detail.strip(),
        test=attrs.get("test", "").strip() or None,
    )
