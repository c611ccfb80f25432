"""Pure parsing of the roles' structured tags: `<plan>`, `<verdict>` and `<blocked>`.

Models write these inside prose and Markdown, and their bodies hold raw text
(code, arrows, `<` signs) that nobody escapes, so this is a small scanner, not an
XML parser: a body runs to its literal closing tag, attributes are `name="value"`
or `name='value'`, and no entity is ever expanded. Everything that is not exactly
the expected shape raises `ProtocolError` with a message saying what was wrong,
because a verdict that is guessed at is worse than none.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from pse.events import BlockedRecord, CriterionResult, PlanItem, PlanRecord, VerdictRecord
from pse.exceptions import ProtocolError

__all__ = ["find_blocked", "parse_plan", "parse_verdict", "render_plan", "strip_tool_traffic"]

_ATTR = re.compile(r"""([A-Za-z_][\w-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_VERDICT_STATUSES = ("PASS", "PARTIAL", "FAIL", "BLOCKED")
_TOOL_TRAFFIC = re.compile(r"<tool_calls\b.*?</tool_calls>|<tool_results\b.*?</tool_results>", re.DOTALL)
_CDATA = re.compile(r"<!\[CDATA\[.*?\]\]>", re.DOTALL)


def strip_tool_traffic(text: str) -> str:
    """Remove complete `<tool_calls>` and `<tool_results>` blocks: tags quoted in them are not ours."""
    # CDATA first: a quoted `</tool_results>` inside it must not end a block early.
    return _TOOL_TRAFFIC.sub("", _CDATA.sub("", text))


def _attributes(raw: str, where: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    rest = _ATTR.sub("", raw).strip().rstrip("/").strip()
    if rest:
        raise ProtocolError(f'{where}: cannot read the attributes {raw.strip()!r}; write name="value" pairs')
    for match in _ATTR.finditer(raw):
        attrs[match.group(1)] = match.group(2) if match.group(2) is not None else match.group(3)
    return attrs


def _elements(text: str, tag: str, where: str) -> list[tuple[dict[str, str], str]]:
    """Every `<tag attrs>body</tag>` (or `<tag attrs/>`) in `text`, in order, with raw bodies."""
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
    for attrs, text in _elements(body, tag, where):
        item_id = attrs.get("id", "").strip()
        if not item_id:
            raise ProtocolError(f'{where}: a <{tag}> has no id attribute; write <{tag} id="...">')
        if any(i.id == item_id for i in items):
            raise ProtocolError(f'{where}: <{tag} id="{item_id}"> appears twice; ids must be unique')
        if not text.strip():
            raise ProtocolError(f'{where}: <{tag} id="{item_id}"> is empty')
        items.append(PlanItem(id=item_id, text=text.strip()))
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
    for attrs, _ in _elements(body, "output", where):
        path = attrs.get("path", "").strip()
        pure = PurePosixPath(path)
        if not path or pure.is_absolute() or ".." in pure.parts:
            raise ProtocolError(f"plan: <output path={path!r}> must be a relative path inside the workspace")
        outputs.append(str(pure))
    return PlanRecord(
        goal=goal.strip(), steps=_numbered(body, "step", where), criteria=criteria, outputs=outputs
    )


def render_plan(plan: PlanRecord) -> str:
    """Render a plan back into its `<plan>` form (used in step_buffer packets)."""
    lines = ["<plan>", f"  <goal>{plan.goal}</goal>"]
    lines += [f'  <step id="{s.id}">{s.text}</step>' for s in plan.steps]
    lines += [f'  <criterion id="{c.id}">{c.text}</criterion>' for c in plan.criteria]
    lines += [f'  <output path="{p}"/>' for p in plan.outputs]
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
    if status not in _VERDICT_STATUSES:
        raise ProtocolError(
            f"verdict: status={attrs.get('status')!r} is not one of {', '.join(_VERDICT_STATUSES)}"
        )
    _, reason_code = _exactly_one(body, "reason_code", where)
    if not reason_code.strip():
        raise ProtocolError("verdict: <reason_code> is empty")
    criteria: list[CriterionResult] = []
    for c_attrs, finding in _elements(body, "criterion", where):
        cid = c_attrs.get("id", "").strip()
        met = c_attrs.get("met", "").strip().lower()
        if not cid:
            raise ProtocolError("verdict: a <criterion> has no id attribute")
        if met not in ("true", "false"):
            raise ProtocolError(f'verdict: <criterion id="{cid}"> needs met="true" or met="false"')
        if any(c.id == cid for c in criteria):
            raise ProtocolError(f'verdict: <criterion id="{cid}"> appears twice')
        criteria.append(CriterionResult(id=cid, met=met == "true", finding=finding.strip()))
    summaries = _elements(body, "summary", where)
    if len(summaries) > 1:
        raise ProtocolError("verdict: more than one <summary>")
    return VerdictRecord(
        status=status,  # checked against _VERDICT_STATUSES above
        reason_code=reason_code.strip(),
        criteria=criteria,
        summary=summaries[0][1].strip() if summaries else "",
    )


def find_blocked(text: str, role: str) -> BlockedRecord | None:
    """The `<blocked reason_code="...">why</blocked>` in a Planner or Specialist message, if any."""
    items = _elements(strip_tool_traffic(text), "blocked", "blocked")
    if not items:
        return None
    attrs, detail = items[0]
    return BlockedRecord(
        role=role, reason_code=attrs.get("reason_code", "").strip() or "UNSPECIFIED", detail=detail.strip()
    )
