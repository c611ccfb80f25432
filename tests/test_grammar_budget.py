"""A grammar sized to the call's token limit: the longest message it accepts fits, measured on the GBNF.

`fit_sizes` computes the bounds from the lengths of the fixed parts; these tests do not trust that
arithmetic: they measure the longest text the generated grammar accepts (`Grammar.longest`) for every
role, with the tools a real run grants, across budgets, and check it against `max_chars`. They also
check what the bounds are for: a model looping inside a text is made to close it, and a message that
would be cut at the limit is not in the grammar at all.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
from autogen_core.models import CreateResult, RequestUsage, UserMessage

from gbnf_recognizer import Grammar, GrammarSyntaxError
from pse.config import ModelSpec
from pse.exceptions import ConfigError
from pse.models._constrained import ConstrainedChatCompletionClient
from pse.models._probe import ConstraintSupport
from pse.protocol import TurnShape, turn_grammar, turn_schema
from pse.protocol._budget import TEXT_CHARS, USEFUL_TEXT, fit_sizes
from pse.protocol._gbnf import REPEAT_LIMIT
from pse.roles import Role
from reference_turns import role_tools

BUDGETS = (512, 768, 1536, 3072, 6144, 12288)  # characters: 256..4096 tokens at 3 a token
_CRITERIA = {
    "none": None,
    "one": ("AC1",),
    "six": tuple(f"AC{i}" for i in range(1, 7)),
}


def _grammar(role: str, max_chars: int | None, criteria: tuple[str, ...] | None = None) -> Grammar:
    tools = role_tools(role, "code-delivery")
    return Grammar(turn_grammar(TurnShape(role, tools, criteria, 16, max_chars)))


@pytest.mark.parametrize("max_chars", BUDGETS)
@pytest.mark.parametrize("role", [Role.PLANNER, Role.SPECIALIST])
def test_the_longest_message_of_a_budgeted_grammar_fits_the_budget(role: str, max_chars: int) -> None:
    longest = _grammar(role, max_chars).longest()
    assert longest <= max_chars
    assert longest >= max_chars * 0.5, "the budget is used, not thrown away"


@pytest.mark.parametrize("criteria", list(_CRITERIA), ids=list(_CRITERIA))
@pytest.mark.parametrize("max_chars", BUDGETS)
def test_a_budgeted_verdict_fits_with_any_number_of_criteria(max_chars: int, criteria: str) -> None:
    if (max_chars, criteria) == (512, "six"):  # six judged criteria and a summary need more
        with pytest.raises(ValueError, match="needs about 672"):
            _grammar(Role.EVALUATOR, max_chars, _CRITERIA[criteria])
        return
    assert _grammar(Role.EVALUATOR, max_chars, _CRITERIA[criteria]).longest() <= max_chars


def test_a_larger_budget_buys_more_plan_items_before_longer_texts() -> None:
    tools = role_tools(Role.PLANNER, "code-delivery")
    sizes = [fit_sizes(Role.PLANNER, tools, None, chars, 16) for chars in BUDGETS[2:]]
    assert [s.items for s in sizes] == sorted(s.items for s in sizes)
    assert all(s.text >= USEFUL_TEXT for s in sizes if s.items > 1)
    assert sizes[-1].items == 16


def test_without_a_budget_texts_are_bounded_but_tool_values_are_not() -> None:
    grammar = _grammar(Role.SPECIALIST, None)
    assert grammar.longest() == math.inf  # a file's content may be as long as the model's limit allows
    planner = _grammar(Role.PLANNER, None)
    looping = "no tests for this function; " * 40
    head = '<plan><goal>g</goal><criterion id="AC1">'
    assert planner.accepts(f"{head}{looping[:TEXT_CHARS]}</criterion></plan>")
    assert not planner.accepts(f"{head}{looping[: TEXT_CHARS + 1]}</criterion></plan>")


def test_a_looping_criterion_must_close_within_the_budget() -> None:
    """What SmolLM2-135M did under the unbudgeted grammar: the same clause until the limit cut it."""
    grammar = _grammar(Role.PLANNER, 768)
    sizes = fit_sizes(Role.PLANNER, role_tools(Role.PLANNER, "code-delivery"), None, 768, 16)
    clause = "no tests for this function; " * 40
    plan = '<plan><goal>quicksort</goal><criterion id="AC1">{}</criterion></plan>'
    assert grammar.accepts(plan.format(clause[: sizes.text].strip()))
    assert not grammar.accepts(plan.format(clause[: sizes.text + 1]))


def test_budgeted_values_keep_code_and_heredocs_but_no_closing_tag() -> None:
    grammar = _grammar(Role.SPECIALIST, 3072)
    call = '<tool_calls><invoke name="write_file"><parameter name="path">q.py</parameter><parameter name="content">{}</parameter></invoke></tool_calls>'
    assert grammar.accepts(call.format("if a < b and a << 2 > 1:\n    pass\n"))
    assert grammar.accepts(call.format("<![CDATA[x = '</div>' ]] ]x]]>"))
    assert not grammar.accepts(call.format("a </parameter"))
    assert not grammar.accepts(call.format("<![CDATA[ ]]> ]]>"))


def test_a_budget_too_small_for_any_message_is_refused_with_the_numbers() -> None:
    with pytest.raises(ValueError, match=r"may hold 60 characters, too few for .* needs about \d+"):
        turn_grammar(TurnShape(Role.PLANNER, (), None, 16, 60))


class _Inner:
    """A provider that records the grammar of each call and answers as told."""

    def __init__(self, finish_reasons: list[str]) -> None:
        self.finish_reasons = finish_reasons
        self.grammars: list[str] = []

    async def create(self, messages: object, **kwargs: object) -> CreateResult:
        extra = kwargs["extra_create_args"]
        assert isinstance(extra, dict)
        self.grammars.append(extra["extra_body"]["grammar"])
        reason = self.finish_reasons.pop(0)
        usage = RequestUsage(prompt_tokens=5, completion_tokens=256)
        return CreateResult(finish_reason=reason, content="<plan>", usage=usage, cached=False)  # type: ignore[arg-type]


def _client(inner: _Inner, max_tokens: int | None) -> ConstrainedChatCompletionClient:
    spec = ModelSpec(role=Role.PLANNER, provider="openai", model="m", constrain="grammar")

    async def support() -> ConstraintSupport:
        return ConstraintSupport("http://127.0.0.1:1/v1", "llama.cpp", "test")

    return ConstrainedChatCompletionClient(inner, spec, (), support, max_tokens=max_tokens)  # type: ignore[arg-type]


async def test_after_a_call_cut_at_the_limit_the_repair_gets_a_grammar_at_one_character_a_token() -> None:
    inner = _Inner(["length", "stop", "stop"])
    client = _client(inner, max_tokens=512)
    for _ in range(3):
        await client.create([UserMessage(content="plan", source="user")])
    first, repair, after = (Grammar(g).longest() for g in inner.grammars)
    assert first <= 512 * 3 and repair <= 512 < first
    assert after == first  # a call that ended on its own restores the usual sizing


async def test_a_token_limit_too_small_for_a_constrained_turn_is_a_config_error_naming_the_setting() -> None:
    client = _client(_Inner(["stop"]), max_tokens=20)
    with pytest.raises(
        ConfigError, match=r"PSE_CONSTRAIN=grammar: .*PSE_MODEL_MAX_TOKENS=20\. Raise PSE_MODEL_MAX_TOKENS"
    ):
        await client.create([UserMessage(content="plan", source="user")])


def test_a_budgeted_path_is_never_empty() -> None:
    """SmolLM2-135M under the grammar asked `read_file` of an empty path four times (each denied)."""
    grammar = _grammar(Role.SPECIALIST, 2304)
    call = '<tool_calls><invoke name="read_file"><parameter name="path">{}</parameter></invoke></tool_calls>'
    assert grammar.accepts(call.format("data/metrics.csv"))
    assert not grammar.accepts(call.format(""))
    assert not grammar.accepts(call.format(" "))


def test_a_budgeted_json_schema_takes_the_grammar_s_bounds() -> None:
    tools = role_tools(Role.SPECIALIST, "code-delivery")
    shape = TurnShape(Role.SPECIALIST, tools, None, 16, 3072)
    sizes, schema = shape.sizes(), turn_schema(shape)
    report, _, conflict, calls = schema["anyOf"]
    assert conflict["properties"]["specification"]["maxLength"] == sizes.text
    assert {p["maxLength"] for k, p in report["properties"].items() if k not in ("kind", "note")} == {
        sizes.text
    }
    assert report["properties"]["note"]["maxLength"] == sizes.prose
    assert calls["properties"]["calls"]["maxItems"] == sizes.invokes
    write = next(
        c
        for c in calls["properties"]["calls"]["items"]["anyOf"]
        if c["properties"]["tool"]["const"] == "write_file"
    )
    arguments = write["properties"]["arguments"]["properties"]
    assert arguments["content"]["maxLength"] == sizes.value and arguments["path"]["maxLength"] == min(
        200, sizes.short or 0
    )
    plan = turn_schema(TurnShape(Role.PLANNER, (), None, 16, 3072))["anyOf"][0]["properties"]
    assert plan["criteria"]["maxItems"] == fit_sizes(Role.PLANNER, (), None, 3072, 16).items == 4


# Issue 29: a real model's budget. PSE_MODEL_MAX_TOKENS=4096 at 3 characters a token, and larger.
LARGE_BUDGETS = (12288, 24576, 49152)


@pytest.mark.parametrize("max_chars", LARGE_BUDGETS)
@pytest.mark.parametrize("role", [Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR])
def test_every_large_budget_grammar_stays_within_llama_cpp_s_repetition_limit(
    role: str, max_chars: int
) -> None:
    """`Grammar` refuses what llama.cpp refuses (an item's rules times its bound over 2000): before
    issue 29 the Specialist's value rule `( [^<] | "<" "<"? [^<!/] ){0,1249}` at 1,300 tokens killed
    llama-cpp-python's server."""
    grammar = _grammar(role, max_chars)  # raises GrammarSyntaxError on a repetition llama.cpp refuses
    assert max_chars * 0.5 <= grammar.longest() <= max_chars
    assert (
        max(
            int(n)
            for n in re.findall(
                r"\{(?:\d+,)?(\d+)\}",
                turn_grammar(TurnShape(role, role_tools(role, "code-delivery"), None, 16, max_chars)),
            )
        )
        <= REPEAT_LIMIT
    )


def test_the_recognizer_refuses_what_llama_cpp_refuses() -> None:
    value = '( [^<] | "<" "<"? [^<!/] ){{0,{}}}'
    Grammar(f"root ::= {value.format(913)}")  # accepted by llama.cpp (measured)
    with pytest.raises(GrammarSyntaxError, match=r"llama\.cpp refuses"):
        Grammar(f"root ::= {value.format(1013)}")  # refused by llama.cpp (measured): 2 rules × 1013
    with pytest.raises(GrammarSyntaxError, match=r"llama\.cpp refuses"):
        Grammar("root ::= [a]{0,2001}")  # llama.cpp would quietly make it unbounded


def _module(lines: int) -> str:
    """A Python module of `lines` lines, ~30 characters each, with the `<` and `<<` of real code."""
    body = [f"def f{i}(a, b):\n    return a << 1 if a < b else b  # {i:04}\n" for i in range(lines // 2)]
    return "".join(body)


def test_a_file_of_a_few_hundred_lines_fits_one_write_file_at_6144_tokens() -> None:
    """At PSE_MODEL_MAX_TOKENS=6144 (3 characters a token): two files of 250 lines in one message."""
    shape = TurnShape(Role.SPECIALIST, role_tools(Role.SPECIALIST, "code-delivery"), None, 16, 6144 * 3)
    sizes, grammar = shape.sizes(), Grammar(turn_grammar(shape))
    call = '<tool_calls><invoke name="write_file"><parameter name="path">m.py</parameter><parameter name="content">{}</parameter></invoke></tool_calls>'
    module = _module(250)
    assert len(module.splitlines()) == 250 and len(module) <= sizes.value and sizes.invokes == 2
    assert grammar.accepts(call.format(module))
    assert not grammar.accepts(call.format(_module(2 * 250 + 100)))  # and the budget still holds


def test_plan_texts_are_whole_sentences_at_a_real_budget() -> None:
    """Before issue 29 a plan's texts got 68-74 characters at these budgets: plans cut mid-sentence."""
    tools = role_tools(Role.PLANNER, "code-delivery")
    for max_chars in (6144, 12288):
        sizes = fit_sizes(Role.PLANNER, tools, None, max_chars, 16)
        assert sizes.text >= USEFUL_TEXT >= 160 and sizes.goal == 2 * sizes.text
    sentence = "test_quicksort.py has one pytest test each for an empty list, one element, duplicates, a sorted and a reversed list, and negative numbers"
    grammar = _grammar(Role.PLANNER, 6144)
    assert grammar.accepts(
        f'<plan><goal>{sentence} {sentence}</goal><criterion id="AC1">{sentence}</criterion></plan>'
    )


@pytest.mark.parametrize("criteria", list(_CRITERIA), ids=list(_CRITERIA))
@pytest.mark.parametrize("max_chars", BUDGETS)
def test_findings_take_only_the_room_a_budgeted_verdict_leaves(max_chars: int, criteria: str) -> None:
    """An Evaluator told of findings gets as many as fit after the criteria and the summary, whose
    bounds stay what they were; the longest message, findings and all, fits the budget."""
    if (max_chars, criteria) == (512, "six"):
        return  # no verdict fits (above)
    # without tools, so the longest message is a verdict (a tool call may be longer than any)
    shape = TurnShape(Role.EVALUATOR, (), _CRITERIA[criteria], 16, max_chars)
    told = dataclasses.replace(shape, findings=True)
    longest, without = Grammar(turn_grammar(told)).longest(), Grammar(turn_grammar(shape)).longest()
    assert longest <= max_chars
    assert (longest > without) == (shape.sizes().findings > 0)
    tooled = dataclasses.replace(told, tools=role_tools(Role.EVALUATOR, "code-delivery"))
    assert Grammar(turn_grammar(tooled)).longest() <= max_chars
    if max_chars >= 6144 and criteria != "none":  # with a known plan (what a run has), at 2k tokens
        assert shape.sizes().findings >= 1


def test_without_a_budget_a_verdict_may_hold_eight_findings() -> None:
    shape = TurnShape(Role.EVALUATOR, (), ("AC1",), findings=True)
    assert shape.sizes().findings == 8
    grammar = turn_grammar(shape)
    assert "finding-8 ::=" in grammar and "finding-9" not in grammar


def test_the_constrained_client_offers_findings_where_the_instructions_tell_of_them() -> None:
    from autogen_core.models import SystemMessage

    from pse.tasks import findings_prompt

    async def support() -> ConstraintSupport:
        return ConstraintSupport("http://127.0.0.1:1/v1", "llama.cpp", "test")

    spec = ModelSpec(role=Role.EVALUATOR, provider="openai", model="m", constrain="grammar")
    evaluator = ConstrainedChatCompletionClient(_Inner([]), spec, (), support)  # type: ignore[arg-type]
    asked = [SystemMessage(content="You are the Evaluator.\n\n" + findings_prompt())]
    plain = [SystemMessage(content="You are the Evaluator.")]
    assert evaluator.shape(asked).findings and not evaluator.shape(plain).findings
    planner = ConstrainedChatCompletionClient(
        _Inner([]), spec.model_copy(update={"role": Role.PLANNER}), (), support
    )  # type: ignore[arg-type]
    assert not planner.shape(asked).findings  # only a verdict holds findings
