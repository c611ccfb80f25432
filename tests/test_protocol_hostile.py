"""Attacks on the protocol scanners: one hostile model message must not stall the event loop.

Every scan over model text runs on the asyncio event loop, at least twice per message, so a scan that is
quadratic in the message length is a denial of service: 256 KiB of unclosed `<![CDATA[` once held
`strip_tool_traffic` for 27 s and a run with a 5 s limit for 29 s. Each test below *is* one attack: it
builds a hostile message of one shape and runs every public scanning function over it at 256 KiB and at
1 MiB, then checks what the functions answered, so a fix cannot buy speed with a different reading.

Speed is measured in `bench/bench_protocol.py`; these tests only fail on what no linear scan does, so a
loaded machine cannot make them flaky: they count this thread's CPU time (other processes do not add to
it), retry before failing, and fail when 4 times the text costs more than 12 times the time (linear is
about 4, quadratic 16) or when 1 MiB takes more than 5 s (a linear scan takes milliseconds).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from autogen_agentchat.messages import TextMessage

from pse.exceptions import ProtocolError
from pse.protocol import (
    DsmlError,
    ParamSpec,
    ResultItem,
    ToolCall,
    ToolSignature,
    find_blocked,
    has_tool_calls,
    parse_plan,
    parse_tool_calls,
    parse_tool_results,
    parse_verdict,
    strip_tool_traffic,
)
from pse.team import RoleFinished

SMALL = 256 * 1024
LARGE = 1024 * 1024
GROWTH_LIMIT = 12.0  # time(LARGE) / time(SMALL): about 4 when linear, 16 when quadratic
CEILING_S = 5.0  # CPU seconds for one scan of LARGE: milliseconds when linear, minutes when quadratic
NOISE_FLOOR_S = 0.005  # shorter times are timer noise, not growth
TRIES = 3

TOOLS = {
    "read_file": ToolSignature("read_file", (ParamSpec("path"),)),
    "x": ToolSignature("x", (ParamSpec("p"),)),
}
READ_A = '<tool_calls><invoke name="read_file"><parameter name="path">a</parameter></invoke></tool_calls>'

Scan = Callable[[str], object]


def fill(unit: str, size: int, prefix: str = "", suffix: str = "") -> str:
    """`prefix`, then `unit` repeated, then `suffix`: at most `size` characters."""
    return prefix + unit * ((size - len(prefix) - len(suffix)) // len(unit)) + suffix


def finishes_the_phase(runner: asyncio.Runner, text: str) -> bool:
    """Whether the phase's termination condition sees a final message (no tool request) of the Planner."""
    condition = RoleFinished("Planner")
    runner.run(condition([TextMessage(content=text, source="Planner")]))
    return condition.fired


def scans(runner: asyncio.Runner) -> dict[str, Scan]:
    """Every public function that scans a whole model message, by the name a failure reports."""
    return {
        "strip_tool_traffic": strip_tool_traffic,
        "parse_plan": parse_plan,
        "parse_verdict": parse_verdict,
        "find_blocked": lambda text: find_blocked(text, "Specialist"),
        "has_tool_calls": has_tool_calls,
        "parse_tool_calls": lambda text: parse_tool_calls(text, TOOLS),
        "parse_tool_results": parse_tool_results,
        "role_finished": lambda text: finishes_the_phase(runner, text),
    }


def timed(scan: Scan, text: str) -> tuple[float, object]:
    """CPU seconds of one scan, and what it returned or raised (a hostile message may well be refused)."""
    started = time.thread_time()
    try:
        outcome: object = scan(text)
    except (ProtocolError, ValueError) as exc:
        outcome = exc
    return time.thread_time() - started, outcome


def assert_linear(name: str, scan: Scan, small: str, large: str) -> Any:
    """Fail unless `scan` grows far slower than quadratically from `small` to `large`; return its answer."""
    best_small = best_large = float("inf")
    for _ in range(TRIES):
        seconds, _ = timed(scan, small)
        best_small = min(best_small, seconds)
        assert best_small < CEILING_S, f"{name}: {len(small)} characters took {best_small:.2f} s"
        seconds, outcome = timed(scan, large)
        best_large = min(best_large, seconds)
        assert best_large < CEILING_S, f"{name}: {len(large)} characters took {best_large:.2f} s"
        if best_large / max(best_small, NOISE_FLOOR_S) < GROWTH_LIMIT:
            return outcome
    raise AssertionError(
        f"{name}: {len(small)} characters took {best_small:.3f} s, {len(large)} took {best_large:.3f} s; "
        f"the growth {best_large / max(best_small, NOISE_FLOOR_S):.1f} is quadratic"
    )


class TestHostileProtocolInput:
    """Each test is one hostile message shape; every scanner must read it in one forward pass."""

    @pytest.fixture(autouse=True)
    def _runner(self) -> Iterator[None]:
        with asyncio.Runner() as runner:
            self.runner = runner
            yield

    def attack(self, shape: Callable[[int], str]) -> dict[str, Any]:
        """Time every scanner on `shape` at both sizes; what each answered for the large message, by name."""
        small, large = shape(SMALL), shape(LARGE)
        return {name: assert_linear(name, scan, small, large) for name, scan in scans(self.runner).items()}

    @staticmethod
    def assert_refused(outcome: object, error: type[Exception], fragment: str) -> None:
        assert isinstance(outcome, error), outcome
        assert fragment in str(outcome), str(outcome)[:300]

    def test_unclosed_cdata_openers(self) -> None:
        text = fill("<![CDATA[", LARGE)
        answers = self.attack(lambda size: fill("<![CDATA[", size))
        assert answers["strip_tool_traffic"] == text  # nothing closes, so nothing is removed
        self.assert_refused(answers["parse_plan"], ProtocolError, "found no <plan>")
        assert answers["has_tool_calls"] is False
        assert answers["role_finished"] is True

    def test_backticked_mentions(self) -> None:
        unit = "Write `<tool_calls>` blocks to ask for a tool. "
        answers = self.attack(lambda size: fill(unit, size))
        assert answers["strip_tool_traffic"] == fill(unit, LARGE)
        assert answers["has_tool_calls"] is False
        assert answers["parse_tool_calls"].found_block is False
        assert answers["role_finished"] is True

    def test_nested_openers_never_closed(self) -> None:
        unit = '<tool_calls><invoke name="x"><parameter name="p">'
        answers = self.attack(lambda size: fill(unit, size))
        assert answers["strip_tool_traffic"] == fill(unit, LARGE)
        assert answers["has_tool_calls"] is True
        (error,) = answers["parse_tool_calls"].items
        assert isinstance(error, DsmlError) and error.kind == "syntax"
        assert "unclosed <parameter name='p'> (no </parameter>" in error.message
        assert answers["role_finished"] is False

    def test_unclosed_tool_results(self) -> None:
        unit = '<tool_results for="Planner"><tool_calls>'
        answers = self.attack(lambda size: fill(unit, size))
        assert answers["strip_tool_traffic"] == fill(unit, LARGE)
        assert answers["has_tool_calls"] is False  # an unclosed tool_results swallows the rest
        self.assert_refused(answers["parse_tool_results"], ValueError, "unexpected text")

    def test_openers_without_closing_bracket(self) -> None:
        unit = '<plan <verdict status="PASS <criterion id="AC1 <blocked reason_code="X <tool_calls <invoke name="x '
        answers = self.attack(lambda size: fill(unit, size))
        self.assert_refused(answers["parse_plan"], ProtocolError, "found no <plan>")
        self.assert_refused(answers["parse_verdict"], ProtocolError, "found no <verdict>")
        assert answers["find_blocked"] is None
        assert answers["has_tool_calls"] is True
        (error,) = answers["parse_tool_calls"].items
        assert (
            isinstance(error, DsmlError) and "the tag <tool_calls is never closed with '>'" in error.message
        )

    def test_tool_results_holding_thousands_of_cdata_sections(self) -> None:
        head = '<tool_results for="Planner">\n<result index="1" name="read_file" status="ok">'
        tail = f"</result>\n</tool_results>\n{READ_A}"
        answers = self.attack(lambda size: fill("<![CDATA[x]]>", size, head, tail))
        (item,) = answers["parse_tool_results"][1]
        assert item == ResultItem(1, "read_file", "ok", "x" * len(item.output))
        assert len(item.output) > LARGE // 14
        assert answers["strip_tool_traffic"] == "\n"
        assert answers["has_tool_calls"] is True
        assert answers["parse_tool_calls"].items == (ToolCall(1, "read_file", {"path": "a"}),)

    def test_thousands_of_tool_results_then_an_unclosed_cdata(self) -> None:
        unit = '<tool_results for="Planner"></tool_results>'
        answers = self.attack(lambda size: fill(unit, size, suffix=f"<![CDATA[ {READ_A}"))
        assert answers["strip_tool_traffic"] == "<![CDATA[ "
        assert answers["parse_tool_results"] == ("Planner", [])
        assert answers["has_tool_calls"] is True
        assert answers["parse_tool_calls"].items == (ToolCall(1, "read_file", {"path": "a"}),)
        assert answers["role_finished"] is False

    def test_tags_whose_attributes_are_one_long_word(self) -> None:
        def shape(size: int) -> str:
            word = "1a" * (size // 12)  # every `a` could start a name: each start must not rescan the rest
            return (
                f"<plan {word}></plan><verdict {word}></verdict><blocked {word}></blocked>"
                f'<tool_results {word}></tool_results><tool_calls><invoke {word}><parameter name="p">v'
                "</parameter></invoke></tool_calls>"
            )

        answers = self.attack(shape)
        for name in ("parse_plan", "parse_verdict", "find_blocked"):
            self.assert_refused(answers[name], ProtocolError, "cannot read the attributes '1a1a")
        assert answers["parse_tool_results"] == ("", [])
        (error,) = answers["parse_tool_calls"].items
        assert isinstance(error, DsmlError) and "has no name attribute" in error.message

    def test_thousands_of_criteria(self) -> None:
        def shape(size: int) -> str:
            count = size // 90
            plan = "".join(f'<criterion id="C{i}">c</criterion>' for i in range(count))
            verdict = "".join(f'<criterion id="C{i}" met="true">ok</criterion>' for i in range(count))
            return (
                f"<plan><goal>g</goal>{plan}</plan>\n"
                f'<verdict status="PASS"><reason_code>OK</reason_code>{verdict}</verdict>'
            )

        answers = self.attack(shape)
        assert len(answers["parse_plan"].criteria) == LARGE // 90
        assert len(answers["parse_verdict"].criteria) == LARGE // 90

    def test_a_mixture_of_every_shape(self) -> None:
        unit = (
            '<![CDATA[ Write `<tool_calls>` blocks. <plan <verdict status="PASS <criterion id="AC1 '
            '<tool_results for="Planner"></tool_results><tool_results for="Planner"><tool_calls> '
            '<tool_calls><invoke name="x"><parameter name="p">'
        )
        answers = self.attack(lambda size: fill(unit, size))
        # Each unclosed <tool_results> runs to the next unit's </tool_results>, so all that stays is the
        # first unit's head and the last unit's unclosed tail.
        first_results, last_results = unit.index("<tool_results"), unit.rindex("<tool_results")
        assert answers["strip_tool_traffic"] == unit[:first_results] + unit[last_results:]
        assert answers["has_tool_calls"] is False
        assert answers["parse_tool_calls"].found_block is False
        self.assert_refused(answers["parse_verdict"], ProtocolError, "found no <verdict>")

    def test_a_tag_without_closing_bracket_cannot_send_the_results_reader_back(self) -> None:
        # A `<result ` with no `>` after it once read on from index 0, where this forged text leads the
        # reader back to that same `<result `: it went round forever, growing its list of results.
        forged = '</result><result i="1"><![CDATA[<tool_results><result b="2">zz]]></result><result '
        last = forged.rindex("<result ")
        with pytest.raises(ValueError, match=f"the tag <result at offset {last} is never closed with '>'"):
            parse_tool_results(forged)
        with pytest.raises(ValueError, match="the tag <tool_results at offset 0 is never closed with '>'"):
            parse_tool_results("<tool_results for='Planner' <result index='1'")
