"""File blocks (the `fenced` write format): read as `write_file` requests, shown back, held by a grammar.

A small model writes code best as a chat shows it, a path line and a Markdown fence; PSE reads such a
block into the same `write_file` request the ToolAgent decides under the same policy (`protocol._files`).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gbnf_recognizer import Grammar
from pse.protocol import (
    ParamSpec,
    ToolSignature,
    TurnShape,
    calls_as_files,
    files_as_calls,
    find_file_blocks,
    parse_tool_calls,
    turn_grammar,
)
from pse.tools import WITHHELD

_WRITE = ToolSignature("write_file", (ParamSpec("path", max_chars=200), ParamSpec("content")))
_READ = ToolSignature("read_file", (ParamSpec("path", max_chars=200),))
_PYTEST = ToolSignature("run_pytest", (ParamSpec("target", required=False, default=".", max_chars=200),))
_TOOLS = {t.name: t for t in (_WRITE, _READ, _PYTEST)}


def _writes(text: str) -> list[tuple[str, str]]:
    parsed = parse_tool_calls(files_as_calls(text), _TOOLS)
    return [
        (item.arguments["path"], item.arguments["content"])
        for item in parsed.items
        if item.name == "write_file"
    ]  # type: ignore[union-attr]


def test_a_path_line_and_a_fence_are_one_write_of_the_whole_content() -> None:
    text = "I write both.\n\nsolution.py\n```python\ndef f():\n    return 1\n```\n\ntests/test_f.py\n```\nfrom solution import f\n\n\ndef test_f():\n    assert f() == 1\n```\n"
    assert _writes(text) == [
        ("solution.py", "def f():\n    return 1\n"),
        ("tests/test_f.py", "from solution import f\n\n\ndef test_f():\n    assert f() == 1\n"),
    ]


@pytest.mark.parametrize(
    "line",
    ["solution.py", "`solution.py`", "**solution.py**", "# solution.py", "File: solution.py", "solution.py:"],
)
def test_the_path_line_may_carry_the_marks_models_give_it(line: str) -> None:
    assert _writes(f"{line}\n```python\nx = 1\n```") == [("solution.py", "x = 1\n")]


def test_a_fence_without_a_path_is_code_in_prose_not_a_write() -> None:
    """A word is no path (`Output:`), and a block with none is shown code: nothing is written."""
    assert find_file_blocks("Output:\n```\n3\n```\n\n```python\nprint(3)\n```") == []
    assert files_as_calls("Example:\n```\nx\n```") == "Example:\n```\nx\n```"


def test_the_info_word_may_be_the_path() -> None:
    assert _writes("```notes.md\n# Notes\n```") == [("notes.md", "# Notes\n")]


def test_a_markdown_file_keeps_its_own_fenced_examples() -> None:
    """Inside a block, a fence line with an info word opens a nested block that a bare fence closes."""
    content = "# Usage\n\n```python\nprint(1)\n```\n\nDone.\n"
    assert _writes(f"README.md\n```markdown\n{content}```") == [("README.md", content)]


def test_a_block_the_message_ended_inside_fails_as_a_write_and_writes_nothing() -> None:
    parsed = parse_tool_calls(files_as_calls("solution.py\n```python\ndef f(:\n    retu"), _TOOLS)
    [item] = parsed.items
    assert item.kind == "bad_arguments" and "never closed" in item.message  # type: ignore[union-attr]


def test_dsml_blocks_are_never_read_for_file_blocks() -> None:
    """A DSML value may hold a fence and a path of its own: it stays the DSML value it is."""
    value = "a.py\n```\nx\n```\n"
    text = (
        '<tool_calls>\n<invoke name="write_file">\n<parameter name="path">n.md</parameter>\n'
        f'<parameter name="content"><![CDATA[{value}]]></parameter>\n</invoke>\n</tool_calls>'
    )
    assert files_as_calls(text) == text
    assert _writes(text) == [("n.md", value)]


def test_file_blocks_and_a_tool_calls_block_run_in_their_order() -> None:
    text = (
        "@evaluation/test_a.py\n```python\ndef test_a():\n    assert True\n```\n"
        '<tool_calls>\n<invoke name="run_pytest">\n<parameter name="target">.</parameter>\n</invoke>\n</tool_calls>'
    )
    parsed = parse_tool_calls(files_as_calls(text), _TOOLS)
    assert [item.name for item in parsed.items] == ["write_file", "run_pytest"]  # type: ignore[union-attr]
    assert [item.index for item in parsed.items] == [1, 2]


def test_shown_back_as_file_blocks_and_read_again_the_same() -> None:
    text = "Both.\n\nsolution.py\n```python\ndef f():\n    return '```'\n```\n\nnotes.md\n```\n# N\n```"
    calls = files_as_calls(text)
    shown = calls_as_files(calls)
    assert "<tool_calls>" not in shown and files_as_calls(shown) == calls


def test_a_withheld_write_is_not_shown_neither_as_a_block_nor_as_a_line_to_copy() -> None:
    calls = files_as_calls("solution.py\n```python\ndef f(:\n```")
    withheld = calls.replace("def f(:\n", WITHHELD)
    assert calls_as_files(withheld, withheld=WITHHELD) == ""  # nothing a model can start a message with
    text = "Fixed.\n\nsolution.py\n```python\ndef f(:\n```\n\nnotes.md\n```text\n# N\n```\n"
    withheld = files_as_calls(text).replace("def f(:\n", WITHHELD)
    shown = calls_as_files(withheld, withheld=WITHHELD)
    assert shown == "Fixed.\n\nnotes.md\n```markdown\n# N\n```"  # the prose and the other write stay


def _shape(**extra: object) -> TurnShape:
    extra = {"max_chars": 4096, **extra}
    return TurnShape("Specialist", (_READ, _WRITE), None, 16, files=True, **extra)  # type: ignore[arg-type]


def test_the_grammar_takes_file_blocks_first_in_a_message_and_refuses_a_fence_line_inside_one() -> None:
    grammar = Grammar(turn_grammar(_shape(paths=("solution.py", "pkg/"))))
    assert grammar.accepts("solution.py\n```python\ndef f():\n\n\n    return 1\n```")
    two = "pkg/a.py\n```python\nx = 1\n```\npkg/b.py\n```python\ny = 2\n```"
    assert not grammar.accepts(two)  # 4,096 characters: one whole file a message, never two cut ones
    assert Grammar(turn_grammar(_shape(paths=("solution.py", "pkg/"), max_chars=8192))).accepts(two)
    assert not grammar.accepts("other.py\n```python\nx\n```")  # not one of the plan's outputs
    assert not grammar.accepts("solution.py\n```python\n```\nx\n```")  # a fence line inside the content
    assert not grammar.accepts("Here it is.\nsolution.py\n```python\nx\n```")  # no prose before a block
    # A bare fence: the 1.5B model then wrote its language as the file's first line (held-out roman).
    assert not grammar.accepts("solution.py\n```\npython\nx = 1\n```")
    assert grammar.accepts("solution.py\n```py\nx = 1\n```")
    assert not grammar.accepts('<tool_calls>\n<invoke name="write_file">\n</invoke>\n</tool_calls>')


def test_every_message_the_grammar_allows_reads_back_as_its_writes() -> None:
    grammar = Grammar(turn_grammar(_shape(paths=("solution.py", "Makefile"))))
    rng = random.Random(7)
    seen = 0
    for _ in range(60):
        text = grammar.sample(rng, "ab`\n #=.:<>")
        if "```" not in text:
            continue
        seen += 1
        blocks = find_file_blocks(text)
        assert blocks and all(b.closed and b.path in ("solution.py", "./Makefile") for b in blocks), text
        parsed = parse_tool_calls(files_as_calls(text), _TOOLS)
        assert all(getattr(item, "name", "") in ("write_file", "read_file") for item in parsed.items), text
    assert seen > 5


async def test_a_run_whose_roles_write_file_blocks_writes_audits_and_checks_them(tmp_path: Path) -> None:
    """End to end, on a scripted model (`PSE_WRITE_FORMAT=fenced`): the Specialist's file block is the
    ToolAgent's `write_file` (written, audited, checked), the trace holds it as that request, and the
    role's next request shows it its write as a block again."""
    from pse.testing import run_task

    plan = (
        '<plan><goal>Deliver hello.py</goal><criterion id="AC1">tests pass</criterion>'
        '<output path="hello.py"/><output path="test_hello.py"/></plan>'
    )
    files = (
        "Both files.\n\nhello.py\n```python\ndef hello():\n    return 'hi'\n```\n\n"
        "test_hello.py\n```python\nfrom hello import hello\n\n\ndef test_hello():\n    assert hello() == 'hi'\n```"
    )
    report = "<report>\nArtifacts: hello.py, test_hello.py\nEvidence: ok\nAssumptions: none\nUnresolved: none\n</report>"
    run_tests = (
        '<tool_calls><invoke name="run_pytest"><parameter name="target">.</parameter></invoke></tool_calls>'
    )
    verdict = (
        '<verdict status="PASS"><reason_code>ALL_MET</reason_code><criterion id="AC1" met="true">1 passed'
        "</criterion><summary>ok</summary></verdict>"
    )
    turns = [("Planner", plan), ("Specialist", files), ("Specialist", report)]
    turns += [("Evaluator", run_tests), ("Evaluator", verdict)]
    task = {"goal": "Write hello.py and its tests.", "expected_outputs": ["hello.py", "test_hello.py"],
            "required_checks": ["pytest"],
            "verification": {"independent_tests": False}}  # the Specialist's tests are the evidence here  # fmt: skip
    summary, trace, prepared = await run_task(
        task, turns=turns, write_format="fenced", runs_dir=tmp_path, sandbox="fallback"
    )
    assert summary.outcome == "PASSED", summary.outcome_reason
    writes = [c for c in trace.cycles[0].tool_calls if c.tool == "write_file"]
    assert [(c.arguments["path"], c.status) for c in writes] == [("hello.py", "ok"), ("test_hello.py", "ok")]
    assert (
        tmp_path / summary.run_id / "workspace" / "hello.py"
    ).read_text() == "def hello():\n    return 'hi'\n"
    specialist = [m.content for m in trace.cycles[0].messages if m.source == "Specialist"]
    assert specialist[0].count("<tool_calls>") == 2 and "```" not in specialist[0]  # the trace: requests
    asked = prepared.player.requests["Specialist"][-1]  # type: ignore[union-attr]
    assert any("hello.py\n```python\ndef hello():" in str(m.content) for m in asked)  # its write, as a block
