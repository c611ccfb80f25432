"""A role's model is not shown its own write of a Python file that was not code to run: it did not parse,
or read a name nothing in it binds (`team/_withheld.py`).

The broken write is the 1.5B model's own, from issue 29's run 11: a test file whose last line ends in a
stray `]`, sent as CDATA. Shown it again, the model wrote the same bytes on every turn of the cycle.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from pse.protocol import ResultItem, read_invokes, render_tool_results
from pse.sandbox import Sandbox, SandboxLimits
from pse.team import WITHHELD, withhold_broken_writes
from pse.testing import ScriptedModel, run_task
from pse.tools import ToolContext, builtin_tools

BROKEN = """import random

from quicksort import quicksort

def test_random():
    random.seed(0)
    for _ in range(100):
        items = list(range(10))
        assert quicksort(items) == sorted(items)]
"""
WRITE = f"""<tool_calls>
<invoke name="write_file">
<parameter name="path">test_quicksort.py</parameter>
<parameter name="content"><![CDATA[
{BROKEN}]]></parameter>
</invoke>
</tool_calls>"""
PLAN = (
    '<plan><goal>Deliver t.py</goal><step id="S1">Write t.py</step>'
    '<criterion id="AC1">t.py parses</criterion><output path="t.py"/></plan>'
)
NOTE = (
    "wrote test_quicksort.py (504 bytes)\nnote: test_quicksort.py does not parse as Python: unmatched ']' "
    "(line 9: assert quicksort(items) == sorted(items)]); write it again"
)


def _results(*items: tuple[str, str]) -> UserMessage:
    rendered = [ResultItem(i, name, "ok", out) for i, (name, out) in enumerate(items, start=1)]
    return UserMessage(content=render_tool_results("Specialist", rendered), source="ToolAgent")


def _said(text: str) -> AssistantMessage:
    return AssistantMessage(content=text, source="Specialist")


def test_the_broken_write_is_withheld_and_the_note_kept() -> None:
    messages: list[LLMMessage] = [SystemMessage(content="x"), _said(WRITE), _results(("write_file", NOTE))]
    view = withhold_broken_writes(messages)
    assert view[0] is messages[0] and view[2] is messages[2]  # the note stays, word for word
    assert isinstance(view[1].content, str) and "sorted(items)]" not in view[1].content
    assert read_invokes(view[1].content) == [
        ("write_file", [("path", "test_quicksort.py"), ("content", WITHHELD)])
    ]
    assert messages[1].content == WRITE  # the context's own messages are untouched


def test_only_the_invoke_whose_result_says_so_is_withheld_and_prose_stays() -> None:
    good = '<invoke name="write_file"><parameter name="path">quicksort.py</parameter><parameter name="content">def quicksort(items):\n    return sorted(items)\n</parameter></invoke>'
    both = "Both files.\n" + WRITE.replace("<tool_calls>\n", "<tool_calls>\n" + good + "\n")
    view = withhold_broken_writes(
        [_said(both), _results(("write_file", "wrote quicksort.py (41 bytes)"), ("write_file", NOTE))]
    )
    assert isinstance(view[0].content, str) and view[0].content.startswith("Both files.\n\n<tool_calls>")
    assert read_invokes(view[0].content) == [
        (
            "write_file",
            [("path", "quicksort.py"), ("content", "def quicksort(items):\n    return sorted(items)\n")],
        ),
        ("write_file", [("path", "test_quicksort.py"), ("content", WITHHELD)]),
    ]


def test_the_placeholder_is_refused_as_content(tmp_path: Path) -> None:
    """The 1.5B model, shown the placeholder, wrote it into solution.py (issue 29, HumanEval-0)."""
    ctx = ToolContext(tmp_path, Sandbox(tmp_path, SandboxLimits(timeout_s=30), "fallback"), True)
    write = builtin_tools().get("write_file")
    assert write is not None
    for copied in (WITHHELD, f"\n  {WITHHELD}\n"):
        with pytest.raises(ValueError) as refused:
            write.function(ctx, path="solution.py", content=copied)
        assert str(refused.value) == (
            f"solution.py not written: {WITHHELD!r} is what PSE shows in place of content you wrote before "
            "that did not stand (refused, or not code to run), not content; write "
            "the file's real content"
        )
    assert not (tmp_path / "solution.py").exists()
    assert write.function(ctx, path="notes.py", content=f"# {WITHHELD}\n").status == "ok"  # quoted: fine


def test_a_write_that_reads_a_name_nothing_binds_is_withheld() -> None:
    """heldout-9 roman: the 1.5B model wrote roman.py as `obj['python_code']`; told the name was never
    bound, it wrote the same 19 bytes twice more. Such a write is withheld too; another file's note, or a
    note of its path that is no unbound name, leaves it whole."""
    write = WRITE.replace("test_quicksort.py", "roman.py").replace(BROKEN, "obj['python_code']\n")
    note = "wrote roman.py (19 bytes)\nnote: roman.py uses obj, which it never imports or defines"
    view = withhold_broken_writes([_said(write), _results(("write_file", note))])
    assert read_invokes(str(view[0].content)) == [
        ("write_file", [("path", "roman.py"), ("content", WITHHELD)])
    ]
    for other in (note.replace("note: roman.py", "note: words.py"), "wrote roman.py (19 bytes)"):
        messages: list[LLMMessage] = [_said(write), _results(("write_file", other))]
        assert withhold_broken_writes(messages) == messages


def test_a_refused_write_is_withheld_whatever_the_refusal() -> None:
    """heldout-11 slugify, at temperature 0: the Evaluator's test file, refused as a copy of the
    Specialist's tests, written again word for word on each of seven turns. A write the ToolAgent did not
    carry out (error or denied) is withheld; a write that stood, or another tool's refusal, is not."""
    copy = "test_slug.py not written: test_slugify is test_slugify of test_slug.py. Write tests of your own"

    def answer(status: str, name: str = "write_file", out: str = copy) -> UserMessage:
        return UserMessage(
            content=render_tool_results("Evaluator", [ResultItem(1, name, status, out)]),  # type: ignore[arg-type]
            source="ToolAgent",
        )

    for status in ("error", "denied"):
        view = withhold_broken_writes([_said(WRITE), answer(status)])
        assert read_invokes(str(view[0].content)) == [
            ("write_file", [("path", "test_quicksort.py"), ("content", WITHHELD)])
        ]
    for whole in (answer("ok", out="wrote test_quicksort.py (504 bytes)"), answer("error", name="read_file")):
        messages: list[LLMMessage] = [_said(WRITE), whole]
        assert withhold_broken_writes(messages) == messages


def test_what_is_not_a_broken_write_of_that_path_is_left_whole() -> None:
    other_path = NOTE.replace("note: test_quicksort.py", "note: other.py")
    cases: list[list[LLMMessage]] = [
        [_said(WRITE), _results(("write_file", "wrote test_quicksort.py (504 bytes)"))],  # it parsed
        [_said(WRITE), _results(("write_file", other_path))],  # a note on another file
        [_said(WRITE), _results(("read_file", NOTE))],  # not a write's result
        [_said(WRITE), _results(("write_file", NOTE), ("write_file", NOTE))],  # results ≠ invokes
        [_said(WRITE.replace("</tool_calls>", "")), _results(("write_file", NOTE))],  # unreadable block
        [_said(WRITE), UserMessage(content=NOTE, source="ToolAgent")],  # no <tool_results>
    ]
    for messages in cases:
        assert withhold_broken_writes(messages) == messages


async def test_in_a_run_the_next_turn_sees_the_placeholder_and_the_trace_keeps_the_write(
    tmp_path: Path,
) -> None:
    fixed = WRITE.replace("test_quicksort.py", "t.py").replace("sorted(items)]", "sorted(items)")
    report = "<report>\nArtifacts: t.py\nEvidence: written\nAssumptions: none\nUnresolved: none\n</report>"
    specialist = ScriptedModel([WRITE.replace("test_quicksort.py", "t.py"), fixed, report])
    verdict = (
        '<verdict status="PASS"><reason_code>ALL_MET</reason_code><criterion id="AC1" met="true">it does'
        "</criterion><summary>Done.</summary></verdict>"
    )
    summary, trace, prepared = await run_task(
        {"goal": "Write t.py.", "expected_outputs": ["t.py"]},
        models={"Specialist": specialist},
        turns=[("Planner", PLAN), ("Evaluator", verdict)],
        runs_dir=tmp_path,
    )
    second = specialist.requests[1]
    seen = "\n".join(m.content for m in second if isinstance(m.content, str))
    assert WITHHELD in seen and "for _ in range(100):" not in seen  # the body is gone, the note quotes
    assert "t.py does not parse as Python: unmatched ']'" in seen
    assert summary.outcome == "PASSED"
    assert (prepared.workspace / "t.py").read_text().endswith("sorted(items)\n")
    said = [m.content for c in trace.cycles for m in c.messages if m.source == "Specialist"]
    assert any("sorted(items)]" in text for text in said)  # the trace keeps what the model wrote


async def test_in_a_run_a_role_reads_an_input_by_name_raw(tmp_path: Path) -> None:
    problem = 'def add(a, b):\n    """Sum."""\n'
    read = '<tool_calls><invoke name="read_file"><parameter name="path">PROBLEM</parameter></invoke></tool_calls>'
    specialist = ScriptedModel([read, WRITE.replace("test_quicksort.py", "t.py")])
    _, trace, _ = await run_task(
        {
            "goal": "Write t.py from PROBLEM.",
            "expected_outputs": ["t.py"],
            "inputs": {"PROBLEM": {"description": "source", "required": True}},
        },
        inputs={"PROBLEM": problem},
        models={"Specialist": specialist},
        turns=[("Planner", PLAN)],
        runs_dir=tmp_path,
        turns_per_cycle=3,
    )
    first = trace.cycles[0].tool_calls[0]
    assert (first.tool, first.status, first.output, first.facts["input"]) == (
        "read_file",
        "ok",
        problem,
        "PROBLEM",
    )


async def test_a_file_a_role_writes_under_an_inputs_name_does_not_replace_the_input(tmp_path: Path) -> None:
    """The attack: write `PROBLEM` with an easier specification, so that whoever reads PROBLEM judges by it."""
    problem = 'def add(a, b):\n    """Sum."""\n'
    forge = (
        '<tool_calls><invoke name="write_file"><parameter name="path">PROBLEM</parameter>'
        '<parameter name="content">def add(a, b):\n    """Return 0."""\n</parameter></invoke>'
        '<invoke name="read_file"><parameter name="path">PROBLEM</parameter></invoke></tool_calls>'
    )
    _, trace, prepared = await run_task(
        {
            "goal": "Write t.py from PROBLEM.",
            "expected_outputs": ["t.py"],
            "inputs": {"PROBLEM": {"description": "source", "required": True}},
        },
        inputs={"PROBLEM": problem},
        models={"Specialist": ScriptedModel([forge, "x"])},
        turns=[("Planner", PLAN)],
        runs_dir=tmp_path,
        turns_per_cycle=3,
    )
    write, read = trace.cycles[0].tool_calls[:2]
    # written, and (no check admitted it) moved out of what the run delivers when it ended
    assert write.status == "ok" and "Return 0." in (prepared.run_dir / "left-out" / "PROBLEM").read_text()
    assert (read.status, read.output, read.facts["input"]) == ("ok", problem, "PROBLEM")


def test_a_write_is_withheld_by_the_name_the_tool_agent_gives_its_file(tmp_path: Path) -> None:
    """heldout-15 roman: the Evaluator wrote `@evaluation/test_roman.py` that did not parse and was shown
    it again, since the note names the file within its area (`test_roman.py`): it wrote the same 1,474
    bytes five times. The note is the write tool's own, for a path spelled either way."""
    area = tmp_path / "evaluation"
    area.mkdir()
    sandbox = Sandbox(tmp_path, SandboxLimits(timeout_s=30), "fallback")
    ctx = ToolContext(tmp_path, sandbox, True, evaluation=area, evaluation_writable=True)
    write = builtin_tools().get("write_file")
    assert write is not None
    for path in ("@evaluation/test_quicksort.py", "@evaluation//test_quicksort.py", "./test_quicksort.py"):
        outcome = write.function(ctx, path=path, content=BROKEN)
        said = _said(
            WRITE.replace('<parameter name="path">test_quicksort.py', f'<parameter name="path">{path}')
        )
        view = withhold_broken_writes([said, _results(("write_file", outcome.output))])
        assert read_invokes(str(view[0].content)) == [("write_file", [("path", path), ("content", WITHHELD)])]


def test_a_write_that_changed_nothing_is_withheld(tmp_path: Path) -> None:
    """code-delivery at temperature 0: told to write quicksort.py again, the 1.5B model wrote it byte for
    byte as the review failed it. Shown that no-op write, a model copies it once more: it is withheld,
    the note saying it changed nothing kept; a write that changed the file is shown."""
    sandbox = Sandbox(tmp_path, SandboxLimits(timeout_s=30), "fallback")
    ctx = ToolContext(tmp_path, sandbox, True)
    write = builtin_tools().get("write_file")
    assert write is not None
    code = "def f():\n    return 1\n"
    said = _said(WRITE.replace("test_quicksort.py", "f.py").replace(BROKEN, code))
    first = write.function(ctx, path="f.py", content=code)
    assert withhold_broken_writes([said, _results(("write_file", first.output))])[0] is said
    again = write.function(ctx, path="f.py", content=code)
    assert "this write changed nothing" in again.output
    view = withhold_broken_writes([said, _results(("write_file", again.output))])
    assert read_invokes(str(view[0].content)) == [("write_file", [("path", "f.py"), ("content", WITHHELD)])]
