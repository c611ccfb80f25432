"""The grammar of a turn (`turn_grammar`) against the reference cassettes, malformed messages and the parsers.

Acceptance is decided by `gbnf_recognizer`, a small GBNF recognizer that works like llama.cpp's sampler
(tests/test_grammar_llama_cpp.py repeats the cassette check with llama.cpp's own grammar engine).
"""

from __future__ import annotations

import random

import pytest

from gbnf_recognizer import Grammar, GrammarSyntaxError
from pse.protocol import (
    PROSE_CHARS,
    SPEC_CONFLICT,
    ToolCall,
    TurnShape,
    find_blocked,
    has_tool_calls,
    parse_plan,
    parse_tool_calls,
    parse_verdict,
    plan_criteria,
    render_plan,
    render_tool_calls,
    turn_grammar,
)
from pse.roles import Role
from pse.tools import Tool, builtin_tools
from reference_turns import reference_turns, role_tools

_BLOCKS = ("<tool_calls>", "<plan>", "<verdict", "<report>", "<blocked")


def test_every_protocol_message_of_the_reference_cassettes_is_accepted(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    rejected = []
    checked = 0
    for where, role, content, criteria, tools in reference_turns(tmp_path_factory):
        grammar = Grammar(turn_grammar(TurnShape(role, tools, criteria if role == Role.EVALUATOR else None)))
        owes_nothing = not any(block in content for block in _BLOCKS)
        if grammar.accepts(content) == owes_nothing:
            rejected.append(f"{where} ({role}): {content[:80]!r}")
        checked += 1
    # 9 + 6 + 9 + 5 turns. The two the grammar must refuse are the shared contract's Specialist
    # reports written as bare prose ("Done. Wrote ..."): a report is owed, and prose alone is no block.
    assert checked == 29
    assert rejected == [], "\n".join(rejected)


def test_prose_without_a_block_is_rejected_where_a_block_is_owed() -> None:
    for role in Role:
        grammar = Grammar(turn_grammar(TurnShape(role, role_tools(role))))
        assert not grammar.accepts("Done. Wrote quicksort.py and test_quicksort.py.")
        assert not grammar.accepts("")


# ---- malformed messages ---------------------------------------------------------------------------


def _verdict(*criteria: str, status: str = "PASS", code: str = "ALL_MET") -> str:
    items = "".join(f'\n  <criterion id="{cid}" met="true">ok</criterion>' for cid in criteria)
    return f'<verdict status="{status}">\n  <reason_code>{code}</reason_code>{items}\n  <summary>s</summary>\n</verdict>'


@pytest.fixture
def evaluator() -> Grammar:
    return Grammar(turn_grammar(TurnShape(Role.EVALUATOR, role_tools(Role.EVALUATOR), ("AC1", "AC2", "AC3"))))


def test_a_verdict_must_judge_exactly_the_plans_criteria_each_once(evaluator: Grammar) -> None:
    assert evaluator.accepts(_verdict("AC1", "AC2", "AC3"))
    assert not evaluator.accepts(_verdict("AC1", "AC2", "AC3", "AC4"))  # one the plan lacks
    assert not evaluator.accepts(_verdict("AC1", "AC2", "AC9"))  # another id instead of AC3
    assert not evaluator.accepts(_verdict("AC1", "AC2"))  # one missing
    assert not evaluator.accepts(_verdict("AC1", "AC2", "AC2", "AC3"))  # one twice
    assert not evaluator.accepts(_verdict("AC1", "AC2", "AC3", status="DONE"))
    assert not evaluator.accepts(_verdict("AC1", "AC2", "AC3", code="all met"))  # not UPPER_SNAKE
    assert not evaluator.accepts(_verdict("AC1", "AC2", "AC3").replace("<summary>s</summary>", ""))


def test_without_a_known_plan_any_criteria_ids_are_allowed_but_at_least_one() -> None:
    grammar = Grammar(turn_grammar(TurnShape(Role.EVALUATOR, ())))
    assert grammar.accepts(_verdict("AC1", "X2"))
    assert not grammar.accepts(_verdict())


def test_a_tool_call_names_only_granted_tools_with_exactly_their_parameters(evaluator: Grammar) -> None:
    def call(name: str, **params: str) -> str:
        return render_tool_calls([(name, params)])

    assert evaluator.accepts(call(Tool.RUN_PYTEST, target="."))
    assert evaluator.accepts(call(Tool.RUN_PYTEST))  # target is optional
    assert evaluator.accepts(call(Tool.READ_FILE, path="a.py"))
    assert not evaluator.accepts(call(Tool.WRITE_FILE, path="a.py", content="x"))  # not granted
    assert not evaluator.accepts(call("delete_everything", path="."))  # no such tool
    assert not evaluator.accepts(call(Tool.READ_FILE, path="a.py", mode="rb"))  # unknown parameter
    assert not evaluator.accepts(call(Tool.READ_FILE))  # required parameter missing
    assert not evaluator.accepts(call(Tool.RUN_CHECK, target="x"))  # name missing, target unknown
    twice = call(Tool.READ_FILE, path="a.py").replace(
        "</parameter>", '</parameter>\n<parameter name="path">b.py</parameter>'
    )
    assert not evaluator.accepts(twice)  # a parameter twice
    assert not evaluator.accepts("<tool_calls>\n</tool_calls>")  # no invoke


def test_parameters_may_come_in_any_order() -> None:
    specialist = Grammar(turn_grammar(TurnShape(Role.SPECIALIST, role_tools(Role.SPECIALIST))))
    swapped = (
        '<tool_calls>\n<invoke name="write_file">\n<parameter name="content">x</parameter>\n'
        '<parameter name="path">a.py</parameter>\n</invoke>\n</tool_calls>'
    )
    assert specialist.accepts(swapped)


def test_raw_bodies_hold_code_and_cdata_holds_what_raw_text_cannot() -> None:
    specialist = Grammar(turn_grammar(TurnShape(Role.SPECIALIST, role_tools(Role.SPECIALIST))))
    tools = {t.name: t for t in role_tools(Role.SPECIALIST)}
    values = [
        "if a < b and c > d: s = \"&lt;\" + '<p>'\n",  # raw: <, &, quotes, tags
        "<parameter name='x'> </param </parameterless <!-- <![CDATA <",  # near misses stay raw
        "closing tag inside: </parameter> and a CDATA opener <![CDATA[ and its end ]]>",  # CDATA, split
        "   <![CDATA[ leading whitespace ]]]]> ",
        "",
    ]
    for value in values:
        message = "Writing it.\n" + render_tool_calls(
            [(Tool.WRITE_FILE, {"path": "f.txt", "content": value})]
        )
        assert specialist.accepts(message), value
        (call,) = parse_tool_calls(message, tools).items
        assert call.arguments == {"path": "f.txt", "content": value}  # type: ignore[union-attr]
    raw_close = '<tool_calls>\n<invoke name="write_file">\n<parameter name="path">a</parameter>\n<parameter name="content">x</parameter>y</parameter>\n</invoke>\n</tool_calls>'
    assert not specialist.accepts(raw_close)  # raw text never holds </parameter>
    cdata_and_text = raw_close.replace(">x</parameter>y<", "><![CDATA[x]]>y<")
    assert not specialist.accepts(cdata_and_text)  # the parser refuses text after a CDATA section


def test_prose_before_a_block_is_bounded_and_nothing_follows_it() -> None:
    planner = Grammar(turn_grammar(TurnShape(Role.PLANNER, ())))
    plan = '<plan>\n<goal>g</goal>\n<criterion id="AC1">c</criterion>\n</plan>'
    assert planner.accepts("a" * PROSE_CHARS + plan)
    assert not planner.accepts("a" * (PROSE_CHARS + 1) + plan)
    assert not planner.accepts("see <b>this</b>\n" + plan)  # no tag in prose
    assert planner.accepts(plan + "\n\n")
    assert not planner.accepts(plan + "\nThat is my plan.")
    assert not planner.accepts(plan + "\n" + plan)  # one block only


def test_plans_number_their_steps_and_criteria_and_keep_outputs_inside() -> None:
    planner = Grammar(turn_grammar(TurnShape(Role.PLANNER, role_tools(Role.PLANNER))))

    def plan(steps: str = "S1 S2", criteria: str = "AC1", output: str = "out/report.md") -> str:
        items = [f'<step id="{s}">do</step>' for s in steps.split()]
        items += [f'<criterion id="{c}">holds</criterion>' for c in criteria.split()]
        return "\n".join(["<plan>", "<goal>g</goal>", *items, f'<output path="{output}"/>', "</plan>"])

    assert planner.accepts(plan())
    assert planner.accepts(plan(steps="", criteria="AC1 AC2 AC3", output=".github/x.yml"))
    assert not planner.accepts(plan(steps="S1 S1"))  # parse_plan refuses duplicate ids
    assert not planner.accepts(plan(steps="S2"))
    assert not planner.accepts(plan(criteria=""))  # a plan needs a criterion
    assert not planner.accepts(plan(output="/etc/passwd"))
    assert not planner.accepts(plan(output="../outside.md"))
    assert not planner.accepts(plan(output="a/../../b"))
    blocked = '<blocked reason_code="MISSING_DATA">the logs are not in the workspace</blocked>'
    assert planner.accepts(blocked)
    assert not planner.accepts(blocked.replace("MISSING_DATA", "TIRED"))


def test_the_report_has_its_four_lines() -> None:
    specialist = Grammar(turn_grammar(TurnShape(Role.SPECIALIST, ())))
    report = "<report>\nArtifacts: a.py\nEvidence: read back\nAssumptions: none\nUnresolved: none\n</report>"
    assert specialist.accepts(report)
    assert not specialist.accepts(report.replace("Evidence: read back\n", ""))
    assert not specialist.accepts("<report>done</report>")


def test_a_role_without_tools_cannot_call_one() -> None:
    grammar = Grammar(turn_grammar(TurnShape(Role.EVALUATOR, (), ("AC1",))))
    assert not grammar.accepts(render_tool_calls([(Tool.READ_FILE, {"path": "a"})]))


# ---- the criteria the Evaluator is held to --------------------------------------------------------


def test_plan_criteria_reads_the_last_plan_of_the_messages_and_ignores_tool_results() -> None:
    old = parse_plan('<plan><goal>g</goal><criterion id="AC1">a</criterion></plan>')
    new = old.model_copy(
        update={"criteria": [*old.criteria, old.criteria[0].model_copy(update={"id": "AC2"})]}
    )
    quoted = '<tool_results for="Evaluator"><result index="1" name="read_file" status="ok"><plan><goal>x</goal><criterion id="Z9">z</criterion></plan></result></tool_results>'
    brief = f"the task\n\n## The plan (fixed)\n{render_plan(new)}"
    assert plan_criteria([render_plan(old), brief, "the report", quoted]) == ("AC1", "AC2")
    assert plan_criteria(["no plan here", "<plan>broken"]) is None


# ---- every text the grammar allows is what the parsers read -------------------------------------

_POOL = "aZ09 _.-/\n\t\"'&;:<>![]=CDATAparmetrsuinvokcl"


@pytest.mark.parametrize("role", list(Role))
def test_every_sampled_message_parses_as_the_block_it_shows(role: str) -> None:
    tools = role_tools(role)
    criteria = ("AC1", "AC2", "AC3") if role == Role.EVALUATOR else None
    grammar = Grammar(turn_grammar(TurnShape(role, tools, criteria, max_invokes=4)))
    signatures = {t.name: t for t in tools}
    rng = random.Random(20261201)
    kinds: set[str] = set()
    for _ in range(150):
        text = grammar.sample(rng, _POOL)
        assert grammar.accepts(text), text
        if has_tool_calls(text):
            parsed = parse_tool_calls(text, signatures, max_invokes=4)
            assert parsed.found_block and parsed.items
            assert all(isinstance(item, ToolCall) for item in parsed.items), (text, parsed.items)
            kinds.add("calls")
        elif "<verdict" in text:
            assert [c.id for c in parse_verdict(text).criteria] == list(criteria or ())
            kinds.add("verdict")
        elif "<plan>" in text:
            plan = parse_plan(text)
            assert [c.id for c in plan.criteria] == [f"AC{i}" for i in range(1, len(plan.criteria) + 1)]
            kinds.add("plan")
        elif "<blocked" in text:
            blocked = find_blocked(text, role)
            assert blocked is not None
            # A SPEC_CONFLICT (the Specialist's and the Evaluator's honest way out) always names its test.
            assert (blocked.reason_code == SPEC_CONFLICT) == (blocked.test is not None), text
            kinds.add("conflict" if blocked.test is not None else "blocked")
        else:
            assert (role == Role.SPECIALIST and "<report>\n" in text) or "<report>Artifacts:" in text
            kinds.add("report")
    expected = {
        Role.PLANNER: {"calls", "plan", "blocked"},
        Role.SPECIALIST: {"calls", "report", "blocked", "conflict"},
        Role.EVALUATOR: {"calls", "verdict", "conflict"},
    }
    assert kinds == expected[role]  # every kind of block was sampled


def test_an_unsupported_grammar_construct_fails_the_recognizer_loudly() -> None:
    with pytest.raises(GrammarSyntaxError):
        Grammar('root ::= "a" undefined-rule')
    with pytest.raises(GrammarSyntaxError):
        Grammar("root ::= [a-z]{,3} ~")


def test_the_grammar_names_every_granted_tool_and_no_other() -> None:
    granted = {t.name for t in role_tools(Role.EVALUATOR)}
    text = turn_grammar(TurnShape(Role.EVALUATOR, role_tools(Role.EVALUATOR)))
    named = {tool for tool in (t.name for t in builtin_tools()) if f'name=\\"{tool}\\"' in text}
    assert named == granted and Tool.WRITE_FILE not in named


# ---- findings (a repository run's Evaluator) ------------------------------------------------------


def _with_findings(*findings: str) -> str:
    """A verdict on AC1..AC3 with these `<finding>` elements before its summary."""
    return _verdict("AC1", "AC2", "AC3").replace(
        "\n  <summary>", "".join(f"\n  {f}" for f in findings) + "\n  <summary>"
    )


def test_an_evaluator_told_of_findings_may_name_them_before_its_summary(evaluator: Grammar) -> None:
    told = Grammar(
        turn_grammar(
            TurnShape(Role.EVALUATOR, role_tools(Role.EVALUATOR), ("AC1", "AC2", "AC3"), findings=True)
        )
    )
    full = '<finding id="F1" severity="high" criterion="AC2" path="src/x.py" line="41">overflows</finding>'
    bare = '<finding id="F2" severity="low">a name says too little</finding>'
    message = _with_findings(full, bare)
    assert told.accepts(message) and told.accepts(_verdict("AC1", "AC2", "AC3"))  # findings are optional
    assert not evaluator.accepts(message)  # an Evaluator not told of findings sends none
    parsed = parse_verdict(message).findings
    assert [(f.id, f.severity, f.criterion, f.path, f.line) for f in parsed] == [
        ("F1", "high", "AC2", "src/x.py", 41),
        ("F2", "low", None, None, None),
    ]
    refused = {
        "out of order": _with_findings(bare.replace("F2", "F1"), full.replace("F1", "F2")).replace(
            'id="F1" severity="low"', 'id="F2" severity="low"'
        ),
        "no F1": _with_findings(bare),
        "a severity parse_verdict refuses": _with_findings(full.replace("high", "critical")),
        "a criterion the plan lacks": _with_findings(full.replace("AC2", "AC9")),
        "an absolute path": _with_findings(full.replace("src/x.py", "/etc/passwd")),
        "a path up": _with_findings(full.replace("src/x.py", "src/../x.py")),
        "line 0": _with_findings(full.replace('line="41"', 'line="0"')),
        "attributes out of order": _with_findings(
            full.replace(' criterion="AC2" path="src/x.py"', ' path="src/x.py" criterion="AC2"')
        ),
        "after the summary": _verdict("AC1", "AC2", "AC3").replace("</verdict>", full + "</verdict>"),
        "a tag in its text": _with_findings(full.replace("overflows", "<b>overflows</b>")),
    }
    assert [why for why, text in refused.items() if told.accepts(text)] == []


def test_every_sampled_finding_parses_as_the_grammar_numbers_it() -> None:
    grammar = Grammar(
        turn_grammar(TurnShape(Role.EVALUATOR, (), ("AC1", "AC2"), max_invokes=4, findings=True))
    )
    rng = random.Random(20261203)
    counts = set()
    for _ in range(150):
        text = grammar.sample(rng, _POOL)
        if "<verdict" not in text:
            continue
        findings = parse_verdict(text).findings
        assert [f.id for f in findings] == [f"F{i}" for i in range(1, len(findings) + 1)], text
        assert all(f.criterion in (None, "AC1", "AC2") and f.line != 0 for f in findings), text
        counts.add(len(findings))
    assert {0, 1} <= counts  # verdicts with findings and without were sampled


def test_the_findings_prompt_is_what_tells_the_grammar_of_findings() -> None:
    from pse.protocol import FINDINGS_ASKED, asks_findings
    from pse.tasks import findings_prompt

    assert FINDINGS_ASKED in findings_prompt()
    assert asks_findings(["You are the Evaluator.", findings_prompt()])
    assert not asks_findings(["You are the Evaluator.", "Judge each criterion."])
