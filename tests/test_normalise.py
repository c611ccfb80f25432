"""Tool values as the model meant them: one enclosing fence unwrapped, the XML nesting's indentation
removed, and the record saying so (issue 29: every file Qwen2.5-Coder-1.5B wrote was unimportable).

The messages below are what the model wrote, byte for byte: `QWEN_BLOCK` is its first write under the
grammar (code-delivery, temperature 0), `ISSUE_FENCED` the shape the issue reports unconstrained
(```` ```python ```` and six spaces of nesting).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.config import Settings
from pse.protocol import ToolCall, parse_tool_calls, render_tool_calls
from pse.protocol._normalise import normalise_value
from pse.toolagent import ToolExecutor
from pse.tools import builtin_tools

QUICKSORT = (
    "def quicksort(items: list) -> list:\n"
    "    if len(items) <= 1:\n"
    "        return items\n"
    "    pivot = items[len(items) // 2]\n"
    "    left = [x for x in items if x < pivot]\n"
    "    middle = [x for x in items if x == pivot]\n"
    "    right = [x for x in items if x > pivot]\n"
    "    return quicksort(left) + middle + quicksort(right)\n"
)
QWEN_BLOCK = (
    "<tool_calls>\n"
    '<invoke name="write_file">\n'
    '<parameter name="path">quicksort.py</parameter>\n'
    '<parameter name="content">\n' + QUICKSORT + "</parameter>\n"
    "</invoke>\n"
    "</tool_calls>\n"
)
ISSUE_FENCED = (
    "<tool_calls>\n"
    '  <invoke name="write_file">\n'
    '    <parameter name="path">quicksort.py</parameter>\n'
    '    <parameter name="content">\n'
    "      ```python\n" + "".join(f"      {line}\n" for line in QUICKSORT.splitlines()) + "      ```\n"
    "    </parameter>\n"
    "  </invoke>\n"
    "</tool_calls>"
)


def _call(message: str) -> ToolCall:
    (call,) = parse_tool_calls(message, builtin_tools().signatures()).items
    assert isinstance(call, ToolCall), call
    return call


def test_the_models_block_value_loses_the_line_break_after_its_tag() -> None:
    call = _call(QWEN_BLOCK)
    assert call.arguments == {"path": "quicksort.py", "content": QUICKSORT}
    assert call.normalised == {"content": "removed the line break after the opening tag"}


def test_a_fenced_value_indented_by_the_nesting_is_the_code_inside() -> None:
    call = _call(ISSUE_FENCED)
    assert call.arguments["content"] == QUICKSORT
    assert call.arguments["path"] == "quicksort.py" and "path" not in call.normalised
    assert call.normalised == {
        "content": "unwrapped the enclosing ```python fence; removed the line break after the opening tag "
        "and 6 spaces of indentation common to every line"
    }


@pytest.mark.parametrize(
    ("value", "expected", "note"),
    [
        ("```python\nx = 1\n```", "x = 1\n", "unwrapped the enclosing ```python fence"),
        ("```\nx = 1\n```\n    ", "x = 1\n", "unwrapped the enclosing ``` fence"),
        ("~~~py\nx = 1\n~~~", "x = 1\n", "unwrapped the enclosing ~~~py fence"),
        (  # the fence opened on the tag's line, its body and closing line indented by the nesting
            "```python\n      def f():\n          return 1\n      ```\n    ",
            "def f():\n    return 1\n",
            "unwrapped the enclosing ```python fence and removed its 6 spaces of indentation",
        ),
        (
            "\n\tdef f():\n\t\treturn 1\n\t",
            "def f():\n\treturn 1\n",
            "removed the line break after the opening tag and 1 tab of indentation common to every line",
        ),
        (  # blank lines inside a block keep nothing of the nesting
            "\n    a = 1\n\n    b = 2\n  ",
            "a = 1\n\nb = 2\n",
            "removed the line break after the opening tag and 4 spaces of indentation common to every line",
        ),
        ("````md\n```python\nx\n```\n````", "```python\nx\n```\n", "unwrapped the enclosing ````md fence"),
        (  # the value the token limit cut inside the model's block (Qwen2.5-Coder-1.5B, a looping test file)
            "\n```python\nimport pytest\n\ndef test_quicksort():\n    assert quicksort([1, 2, 3",
            "import pytest\n\ndef test_quicksort():\n    assert quicksort([1, 2, 3\n",
            "removed the opening ```python line of a fence never closed; removed the line break after the "
            "opening tag",
        ),
        (  # Qwen2.5-Coder-1.5B's quicksort.py under the grammar: opened, never closed (no `</` allowed)
            "<code>\ndef quicksort(items: list) -> list:\n    return items\n",
            "def quicksort(items: list) -> list:\n    return items\n",
            "removed the enclosing <code> tag",
        ),
        ("<pre><code>\nx = 1\n</code></pre>\n", "x = 1\n", "removed the enclosing <pre><code> tag"),
    ],
)
def test_what_is_normalised(value: str, expected: str, note: str) -> None:
    assert normalise_value(value) == (expected, note)


@pytest.mark.parametrize(
    "value",
    [
        "x = 1\n",  # starts on the tag's line: taken as written
        "    x = 1\n    y = 2\n",  # indented, but not a block: the model's own indentation
        "```python\nx = 1\n```\nprint(x)\n",  # a fence and text after it: not one fenced block
        "Intro\n```\nx\n```",  # text before the fence
        "```\na\n```\n\n```\nb\n```",  # two blocks
        "quicksort.py",
        "",
        "<code>\n<p>a page</p>\n</code>\n<code>x</code>\n",  # markup inside: an HTML file, kept
    ],
)
def test_what_is_kept_as_written(value: str) -> None:
    assert normalise_value(value) == (value, None)


def test_cdata_is_never_normalised_and_rendered_values_round_trip() -> None:
    fenced = "```python\nx = 1\n```"
    message = f'<tool_calls><invoke name="write_file"><parameter name="path">a.md</parameter><parameter name="content"><![CDATA[{fenced}]]></parameter></invoke></tool_calls>'
    call = _call(message)
    assert call.arguments["content"] == fenced and call.normalised == {}
    for value in (fenced, "\n    indented\n", QUICKSORT, "\n"):
        rendered = render_tool_calls([("write_file", {"path": "a.md", "content": value})])
        assert _call(rendered).arguments["content"] == value, value  # written as CDATA when needed


async def test_the_written_file_and_the_record_say_what_was_meant(tmp_path: Path) -> None:
    settings = Settings(sandbox="fallback", tool_output_limit=400, tool_timeout_s=20)
    executor = ToolExecutor(tmp_path, settings)
    batch = await executor.execute("Specialist", ISSUE_FENCED)
    (record,) = batch.records
    assert (record.status, record.tool) == ("ok", "write_file")
    assert (tmp_path / "quicksort.py").read_text() == QUICKSORT
    assert record.normalised == {"content": _call(ISSUE_FENCED).normalised["content"]}
    assert record.model_dump()["normalised"] == record.normalised  # in the trace's JSON as it is
    plain = await executor.execute("Specialist", render_tool_calls([("read_file", {"path": "quicksort.py"})]))
    assert plain.records[0].normalised == {}
