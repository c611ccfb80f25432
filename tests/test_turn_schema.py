"""The JSON form of a turn (`turn_schema`) and its way back to protocol text (`protocol_from_json`).

The way back is checked where it matters: the text it gives is accepted by the GBNF grammar of the same
turn and read by PSE's own parsers as the block the JSON stood for.
"""

from __future__ import annotations

import json
import random
from typing import Any

from gbnf_recognizer import Grammar
from pse.protocol import (
    ParamSpec,
    ToolCall,
    ToolSignature,
    TurnShape,
    find_blocked,
    parse_plan,
    parse_tool_calls,
    parse_verdict,
    protocol_from_json,
    render_tool_calls,
    turn_grammar,
    turn_schema,
)
from pse.roles import Role
from pse.tools import Tool, builtin_tools

_TOOLS = {spec.name: spec.signature for spec in builtin_tools()}
_SPECIALIST = TurnShape(Role.SPECIALIST, (_TOOLS[Tool.READ_FILE], _TOOLS[Tool.WRITE_FILE]))
_EVALUATOR = TurnShape(Role.EVALUATOR, (_TOOLS[Tool.RUN_PYTEST],), ("AC1", "AC2"))


def _variants(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["properties"]["kind"]["const"]: v for v in schema.get("anyOf", [schema])}


def _back(shape: TurnShape, answer: dict[str, Any]) -> str:
    text = protocol_from_json(json.dumps(answer))
    assert Grammar(turn_grammar(shape)).accepts(text), text
    return text


def test_each_role_has_its_kinds_and_every_variant_is_closed() -> None:
    assert set(_variants(turn_schema(TurnShape(Role.PLANNER, ())))) == {"plan", "blocked"}
    assert set(_variants(turn_schema(_SPECIALIST))) == {"report", "blocked", "conflict", "tool_calls"}
    assert set(_variants(turn_schema(TurnShape(Role.EVALUATOR, ())))) == {"verdict", "conflict"}
    for shape in (_SPECIALIST, _EVALUATOR, TurnShape(Role.PLANNER, ())):
        for variant in _variants(turn_schema(shape)).values():
            assert variant["additionalProperties"] is False
            assert variant["required"][0] == "kind" and "note" not in variant["required"]


def test_the_verdict_schema_holds_exactly_the_plans_criteria() -> None:
    criteria = _variants(turn_schema(_EVALUATOR))["verdict"]["properties"]["criteria"]
    assert list(criteria["properties"]) == ["AC1", "AC2"] == criteria["required"]
    assert criteria["additionalProperties"] is False


def test_tool_calls_name_only_granted_tools_with_their_parameters() -> None:
    calls = _variants(turn_schema(_SPECIALIST))["tool_calls"]["properties"]["calls"]
    assert calls["maxItems"] == 16
    by_tool = {
        c["properties"]["tool"]["const"]: c["properties"]["arguments"] for c in calls["items"]["anyOf"]
    }
    assert set(by_tool) == {Tool.READ_FILE, Tool.WRITE_FILE}
    assert by_tool[Tool.WRITE_FILE]["required"] == ["path", "content"]
    assert by_tool[Tool.WRITE_FILE]["additionalProperties"] is False
    optional = TurnShape(Role.EVALUATOR, (ToolSignature("t", (ParamSpec("k", required=False),)),))
    only = _variants(turn_schema(optional))["tool_calls"]["properties"]["calls"]["items"]
    assert only["properties"]["arguments"]["required"] == []


def test_json_tool_calls_come_back_as_the_calls_they_stand_for() -> None:
    content = "if a < b:\n    x = '</parameter>' + \"]]>\"  # & co\n"
    answer = {
        "kind": "tool_calls",
        "note": "Writing the file.",
        "calls": [{"tool": Tool.WRITE_FILE, "arguments": {"path": "a.py", "content": content}}],
    }
    text = _back(_SPECIALIST, answer)
    assert text.startswith("Writing the file.\n<tool_calls>")
    (call,) = parse_tool_calls(text, {t.name: t for t in _SPECIALIST.tools}).items
    assert isinstance(call, ToolCall) and call.arguments == {"path": "a.py", "content": content}


def test_json_plan_verdict_report_and_blocked_come_back_as_protocol_text() -> None:
    planner = TurnShape(Role.PLANNER, ())
    plan = parse_plan(
        _back(
            planner,
            {"kind": "plan", "goal": "g", "steps": ["s1", "s2"], "criteria": ["c1"], "outputs": ["o.md"]},
        )
    )
    assert [s.id for s in plan.steps] == ["S1", "S2"] and [c.id for c in plan.criteria] == ["AC1"]
    assert plan.outputs == ["o.md"]
    judged = {"AC1": {"met": True, "finding": "ok"}, "AC2": {"met": False, "finding": "2 failed"}}
    verdict = parse_verdict(
        _back(
            _EVALUATOR,
            {
                "kind": "verdict",
                "status": "PARTIAL",
                "reason_code": "TESTS_FAILING",
                "criteria": judged,
                "summary": "1 of 2",
            },
        )
    )
    assert [(c.id, c.met) for c in verdict.criteria] == [("AC1", True), ("AC2", False)]
    assert verdict.status == "PARTIAL" and verdict.summary == "1 of 2"
    report = {
        "kind": "report",
        "artifacts": "a.py",
        "evidence": "read back",
        "assumptions": "none",
        "unresolved": "none",
    }
    assert _back(_SPECIALIST, report).startswith("<report>\nArtifacts: a.py\n")
    blocked = find_blocked(
        _back(planner, {"kind": "blocked", "reason_code": "MISSING_DATA", "detail": "no logs"}), Role.PLANNER
    )
    assert blocked is not None and (blocked.reason_code, blocked.detail) == ("MISSING_DATA", "no logs")
    conflict = {"kind": "conflict", "test": "test_visible.py::test_2", "specification": "Return the sum."}
    found = find_blocked(_back(_EVALUATOR, conflict), Role.EVALUATOR)
    assert found is not None
    assert (found.reason_code, found.test, found.detail) == (
        "SPEC_CONFLICT",
        "test_visible.py::test_2",
        "Return the sum.",
    )


def test_anything_that_is_no_json_turn_comes_back_unchanged() -> None:
    for text in [
        "plain prose",
        "[1, 2]",
        '{"kind": "poem"}',
        '{"kind": "verdict", "status": "PASS"}',  # fields missing
        '{"kind": "plan", "goal": "g", "criteria": "not a list"}',
        render_tool_calls([(Tool.READ_FILE, {"path": "a"})]),
        '{"kind": "tool_calls", "calls": [{"tool": "x"}]',  # truncated JSON
    ]:
        assert protocol_from_json(text) == text


def test_random_values_are_rendered_so_the_grammar_accepts_them_and_they_read_back() -> None:
    """What `render_tool_calls` writes (raw where it can, CDATA where it must), the grammar allows."""
    pieces = ["<", "/", "parameter", "</parameter", ">", "]]>", "]", "<![CDATA[", "x", "\n", " ", "&", '"']
    grammar = Grammar(turn_grammar(_SPECIALIST))
    signatures = {t.name: t for t in _SPECIALIST.tools}
    rng = random.Random(7)
    for _ in range(300):
        value = "".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
        text = render_tool_calls([(Tool.WRITE_FILE, {"path": "p", "content": value})])
        assert grammar.accepts(text), value
        (call,) = parse_tool_calls(text, signatures).items
        assert isinstance(call, ToolCall) and call.arguments["content"] == value


def test_an_evaluator_told_of_findings_lists_them_and_they_come_back_numbered() -> None:
    told = TurnShape(Role.EVALUATOR, (_TOOLS[Tool.RUN_PYTEST],), ("AC1", "AC2"), findings=True)
    assert "findings" not in _variants(turn_schema(_EVALUATOR))["verdict"]["properties"]
    verdict = _variants(turn_schema(told))["verdict"]
    assert verdict["required"] == ["kind", "status", "reason_code", "criteria", "findings", "summary"]
    findings = verdict["properties"]["findings"]
    assert (findings["minItems"], findings["maxItems"]) == (0, 8)
    assert findings["items"]["required"] == ["severity", "text"]
    assert findings["items"]["properties"]["criterion"] == {"enum": ["AC1", "AC2"]}
    answer = {
        "kind": "verdict",
        "status": "PASS",
        "reason_code": "ALL_MET",
        "criteria": {"AC1": {"met": True, "finding": "ok"}, "AC2": {"met": True, "finding": "2 passed"}},
        "findings": [
            {
                "severity": "high",
                "text": "add overflows",
                "criterion": "AC1",
                "path": "calc/core.py",
                "line": 2,
            },
            {"severity": "low", "text": "a name says too little"},
        ],
        "summary": "met, not mergeable",
    }
    text = _back(told, answer)
    assert [
        (f.id, f.severity, f.text, f.criterion, f.path, f.line) for f in parse_verdict(text).findings
    ] == [
        ("F1", "high", "add overflows", "AC1", "calc/core.py", 2),
        ("F2", "low", "a name says too little", None, None, None),
    ]
    assert parse_verdict(_back(told, {**answer, "findings": []})).findings == []
