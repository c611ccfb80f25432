"""A Specialist that reports or blocks before it has written the plan's outputs is asked once (issue 29).

Qwen2.5-Coder-1.5B, on code-delivery under the grammar, wrote `quicksort.py` and reported at once; in other
runs it read `quicksort.py` before writing it, found none, and blocked on "missing data". The engine sends
such a final message back once, as a format repair naming the outputs that are not in the workspace; after
that the gates judge a report, and a block stands (the honest exit stays open). Scripted turns, the real
ToolAgent and workspace.
"""

from __future__ import annotations

import json
from pathlib import Path

from pse.tasks import TaskRegistry
from pse.testing import run_task

CODE_DELIVERY = TaskRegistry.discover(None).get("code-delivery")
_TURNS = json.loads(CODE_DELIVERY.cassette_path.read_text())["turns"]  # type: ignore[union-attr]
PLAN, WRITE_BOTH, REPORT, E_CHECKS, E_PARTIAL, S_FIX, REPORT2, E_CHECKS2, E_PASS = (
    (t["role"], t["content"]) for t in _TURNS
)
WRITE_ONE = (
    "Specialist",
    '<tool_calls><invoke name="write_file"><parameter name="path">quicksort.py</parameter><parameter name="content">'
    "def quicksort(items: list) -> list:\n    return sorted(items)\n</parameter></invoke></tool_calls>",
)
READ_FIRST = (
    "Specialist",
    '<tool_calls><invoke name="read_file"><parameter name="path">quicksort.py</parameter></invoke></tool_calls>',
)
BLOCKED = (
    "Specialist",
    '<blocked reason_code="MISSING_DATA">The file quicksort.py is missing from the workspace.</blocked>',
)
REPORT_EARLY = (
    "Specialist",
    "<report>\nArtifacts: quicksort.py\nEvidence: written\nAssumptions: none\nUnresolved: none\n</report>",
)
ASKED = "{} not written yet: write {} with write_file before you report."


async def _run(tmp_path: Path, turns: list[tuple[str, str]]) -> object:
    run = await run_task(CODE_DELIVERY, turns=turns, runs_dir=tmp_path / "runs", sandbox="fallback")
    return run.trace


async def test_a_report_before_every_output_exists_goes_back_once(tmp_path: Path) -> None:
    trace = await _run(tmp_path, [PLAN, WRITE_ONE, REPORT_EARLY, WRITE_BOTH, REPORT, E_CHECKS, E_PARTIAL])
    cycle = trace.cycles[0]  # type: ignore[attr-defined]
    assert [(r.role, r.attempt) for r in cycle.repairs] == [("Specialist", 1)]
    # what is missing, then what the task says of it, the task's own prompt first (a small model that
    # wrote quicksort.py copied it into test_quicksort.py when told only the name)
    asked = cycle.repairs[0].error
    assert asked.startswith(
        ASKED.format("test_quicksort.py is", "it")
        + " What the task says of it: `test_quicksort.py` holds pytest test functions, one for each case the "
        "task lists, each comparing `quicksort` of an input with `sorted` of the same input."
    )
    assert "`quicksort.py` holds the function" not in asked  # a sentence of the other file only
    # The task's own prompt names the file, so neither the goal nor the outputs list is quoted again: the
    # 1.5B model, sent both under "PSE could not read your last message", wrote quicksort.py again.
    assert "Deliver" not in asked and "could not read" not in asked
    assert len(asked) < len(ASKED) + 700
    sent = [m.content for m in cycle.messages if m.source == "Specialist"]
    assert sent == [
        WRITE_ONE[1],
        REPORT_EARLY[1],
        WRITE_BOTH[1],
        REPORT[1],
    ]  # it wrote the rest, then reported
    assert cycle.verdict is not None and cycle.verdict.status == "PARTIAL"  # and the Evaluator judged


async def test_a_second_early_report_is_left_to_the_gates(tmp_path: Path) -> None:
    # The verdict blames failing tests where the Evaluator's run passed: asked once too, then it stands.
    turns = [PLAN, WRITE_ONE, REPORT_EARLY, REPORT_EARLY, E_CHECKS, E_PARTIAL, E_PARTIAL]
    trace = await _run(tmp_path, turns)
    cycle = trace.cycles[0]  # type: ignore[attr-defined]
    asked = [r for r in cycle.repairs if r.role == "Specialist"]
    assert len(asked) == 1 and cycle.verdict is not None  # asked once, then reviewed
    assert "outputs_exist: missing: test_quicksort.py" in cycle.gate.failures


async def test_a_block_on_missing_data_before_any_output_is_asked_once_and_then_stands(
    tmp_path: Path,
) -> None:
    trace = await _run(tmp_path, [PLAN, READ_FIRST, BLOCKED, BLOCKED])
    cycle = trace.cycles[0]  # type: ignore[attr-defined]
    [asked] = [r.error for r in cycle.repairs]
    assert asked.startswith(
        "You blocked on missing data, but " + ASKED.format("quicksort.py, test_quicksort.py are", "each")
    )
    assert "`quicksort.py` holds the function `quicksort` and no tests: on every input" in asked
    assert asked.endswith(" Block again only if data the task needs is missing.")
    assert cycle.blocked is not None and cycle.blocked.reason_code == "MISSING_DATA"
    assert trace.outcome == "ESCALATED"  # type: ignore[attr-defined]


async def test_after_the_block_is_answered_the_specialist_can_do_the_work(tmp_path: Path) -> None:
    trace = await _run(tmp_path, [PLAN, READ_FIRST, BLOCKED, WRITE_BOTH, REPORT, E_CHECKS, E_PARTIAL])
    cycle = trace.cycles[0]  # type: ignore[attr-defined]
    assert cycle.blocked is None and cycle.verdict is not None and len(cycle.repairs) == 1


def test_what_the_task_says_of_an_output_is_found_by_its_whole_name() -> None:
    from pse.engine._said import said_about
    from pse.events import PlanItem, PlanRecord

    prompt = (
        "## This task: x\n\nWrite `x.py` first. Then `test_x.py`: it\nimports x.\n\n"
        "- Keep test_x.py short!\n- sub/x.py is another file. Nothing else.\n"
    )
    plan = PlanRecord(goal="Ship x.py and test_x.py.", steps=[PlanItem(id="S1", text="Write test_x.py")])
    assert said_about("test_x.py", [prompt], plan) == [
        "Then `test_x.py`: it imports x.",
        "Keep test_x.py short!",
        "Write test_x.py",
        "Ship x.py and test_x.py.",
    ]
    # not test_x.py, not sub/x.py; and what goes on about x.py ends where the paragraph names another output
    assert said_about("x.py", [prompt], others=["test_x.py"]) == ["Write `x.py` first."]
    assert said_about("y.py", [prompt], plan) == []
    goal = (
        "Write csvmean.py with a function column_mean(path, column) that reads a CSV file. It raises "
        "KeyError when there is no such column. Also write pytest tests for it in test_csvmean.py. They "
        "cover the errors.\n\nKeep it short."
    )
    assert said_about("csvmean.py", [goal], others=["test_csvmean.py"]) == [
        "Write csvmean.py with a function column_mean(path, column) that reads a CSV file.",
        "It raises KeyError when there is no such column.",
    ]
    assert said_about("test_csvmean.py", [goal], others=["csvmean.py"]) == [
        "Also write pytest tests for it in test_csvmean.py.",
        "They cover the errors.",
    ]


def test_the_first_note_quotes_what_the_task_says_of_the_first_output_only() -> None:
    """Told the whole task at once, the 1.5B model put the test file's `import random` into quicksort.py;
    with the sentences of quicksort.py quoted last, in the note before its first turn, it did not."""
    from pse.engine._said import to_write
    from pse.events import PlanRecord

    task = TaskRegistry.discover(None).get("code-delivery")
    assert task is not None
    told = [task.role_prompt("Specialist")]
    plan = PlanRecord(goal="Deliver both.", outputs=["quicksort.py", "test_quicksort.py"])
    note = to_write(plan, "# Task\n", "initial", told)
    assert note is not None and note.startswith(
        "Not in the workspace yet, for you to write with write_file: quicksort.py, test_quicksort.py. They "
        "are yours to create, not missing data. Write quicksort.py first. What the task says of it: "
        "`quicksort.py` holds the function `quicksort` and no tests: on every input, an empty or one-item "
        "list included, it returns a new list sorted ascending, and it never changes the list it is given."
    )
    assert "sorted` of the same input" not in note  # nothing of the other file
    # A task that says nothing of its outputs gets the plain note; a re-plan's lists every output.
    assert to_write(plan, "# Task\n", "initial") == note.split(" Write quicksort.py first.")[0]
    assert to_write(plan, "# Task\n", "replan", told).startswith("The plan's outputs")  # type: ignore[union-attr]


BROKEN_TESTS = (
    "Specialist",
    '<tool_calls><invoke name="write_file"><parameter name="path">test_quicksort.py</parameter>'
    '<parameter name="content">from quicksort import quicksort\n\n\ndef test_empty():\n'
    "    assert quicksort([]) == []]\n</parameter></invoke></tool_calls>",
)


async def test_a_report_over_an_output_that_does_not_parse_goes_back_once(tmp_path: Path) -> None:
    """The 1.5B model wrote a test file ending in a stray `]`, read the write's note that it does not parse,
    and reported: a whole review and a revise cycle lost. Asked once, it writes the file again."""
    trace = await _run(
        tmp_path, [PLAN, WRITE_ONE, BROKEN_TESTS, REPORT_EARLY, WRITE_BOTH, REPORT, E_CHECKS, E_PARTIAL]
    )
    cycle = trace.cycles[0]  # type: ignore[attr-defined]
    [asked] = [r.error for r in cycle.repairs]
    assert asked == (
        "test_quicksort.py does not parse as Python: unmatched ']' (line 5: assert quicksort([]) == []]). "
        "Write it again with write_file before you report."
    )
    assert [m.content for m in cycle.messages if m.source == "Specialist"][-2:] == [WRITE_BOTH[1], REPORT[1]]
    assert cycle.verdict is not None  # then reviewed as usual


def test_what_does_not_parse_is_read_without_following_a_link(tmp_path: Path) -> None:
    from pse.engine._workspace import unparsed_outputs

    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "bad.py").write_text("def f(:\n")
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    outside = tmp_path.parent / "outside.py"
    outside.write_text("def g(:\n")
    (tmp_path / "link.py").symlink_to(outside)
    (tmp_path / "notes.md").write_text("def f(:\n")
    (tmp_path / "stub.py").write_text('def f():\n    """Do it."""\n')
    paths = ["ok.py", "bad.py", "nul.py", "link.py", "notes.md", "absent.py", "stub.py"]
    assert unparsed_outputs(tmp_path, paths) == [
        "bad.py does not parse as Python: invalid syntax (line 1: def f(:)",
        "nul.py does not parse as Python: it holds a null byte",
        "stub.py: f has only a docstring, no code",
    ]
    (tmp_path / "test_ok.py").write_text("def test_f():\n    assert f() is None\n")
    assert unparsed_outputs(tmp_path, ["test_ok.py"]) == [
        "test_ok.py uses f, which it never imports or defines: from stub import f"
    ]


async def test_a_stub_and_a_missing_output_are_asked_about_in_one_nudge(tmp_path: Path) -> None:
    """The 1.5B model wrote HumanEval's PROBLEM back as solution.py (no body) and reported; with one nudge
    per problem it spent both on the missing test file and the stub was never asked about."""
    plan = (
        '<plan><goal>Deliver both</goal><step id="S1">Write them</step><criterion id="AC1">done</criterion>'
        '<output path="solution.py"/><output path="test_solution.py"/></plan>'
    )
    stub = (
        '<tool_calls><invoke name="write_file"><parameter name="path">solution.py</parameter>'
        '<parameter name="content">def f():\n    """Return one."""\n</parameter></invoke></tool_calls>'
    )
    report = "<report>\nArtifacts: solution.py\nEvidence: x\nAssumptions: none\nUnresolved: none\n</report>"
    _, trace, _ = await run_task(
        {
            "goal": "Write solution.py and test_solution.py.",
            "expected_outputs": ["solution.py", "test_solution.py"],
        },
        turns=[("Planner", plan), ("Specialist", stub), ("Specialist", report), ("Specialist", report)],
        runs_dir=tmp_path,
        format_retries=1,
        max_partial_retries=0,
        max_fail_retries=0,
        turns_per_cycle=5,
    )
    [asked] = [r.error for r in trace.cycles[0].repairs]
    assert asked.startswith(
        "solution.py: f has only a docstring, no code. Write it again with write_file before you report. "
        "test_solution.py is not written yet: write it with write_file before you report."
    )
