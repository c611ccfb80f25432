"""A SPEC_CONFLICT that names no test of the workspace, or quotes a specification the task does not hold, is
asked about once (issue 29); one that names a real test and quotes the task stands at once, so the honest
exit of an impossible task stays open.

The 1.5B model's Evaluator, asked to run pytest before its PASS, answered
`<blocked reason_code="SPEC_CONFLICT" test="run_pytest">` and the run escalated to a person; given a task
test its Specialist's code failed, it quoted a sentence of its own as the specification.
"""

from __future__ import annotations

from pathlib import Path

from pse.testing import run_task

PLAN = (
    '<plan><goal>Deliver a.py</goal><step id="S1">Write a.py</step>'
    '<criterion id="AC1">a.py says hi</criterion><output path="a.py"/></plan>'
)
WRITE = (
    '<tool_calls><invoke name="write_file"><parameter name="path">a.py</parameter>'
    '<parameter name="content">HI = "hi"\n</parameter></invoke></tool_calls>'
)
REPORT = "<report>\nArtifacts: a.py\nEvidence: written\nAssumptions: none\nUnresolved: none\n</report>"
VERDICT = (
    '<verdict status="PASS"><reason_code>ALL_MET</reason_code><criterion id="AC1" met="true">it does'
    "</criterion><summary>Done.</summary></verdict>"
)
TASK = {"goal": "Write a.py saying hi.", "expected_outputs": ["a.py"]}
RUN_PYTEST = (
    '<tool_calls><invoke name="run_pytest"><parameter name="target">.</parameter></invoke></tool_calls>'
)
GIVEN = 'def test_hi():\n    assert "hi" == "hello"\n'


def _conflict(test: str, sentence: str = "Write a.py  saying hi.") -> str:
    return f'<blocked reason_code="SPEC_CONFLICT" test="{test}">{sentence}</blocked>'


def _turns(*evaluator: str) -> list[tuple[str, str]]:
    """The work done and reported, then the Evaluator's messages."""
    return [("Planner", PLAN), ("Specialist", WRITE), ("Specialist", REPORT)] + [
        ("Evaluator", e) for e in evaluator
    ]


async def test_a_conflict_naming_no_test_is_asked_once_and_the_verdict_then_counts(tmp_path: Path) -> None:
    summary, trace, _ = await run_task(
        TASK,
        turns=_turns(_conflict("run_pytest"), VERDICT),
        runs_dir=tmp_path,
    )
    [asked] = [r.error for r in trace.cycles[0].repairs]
    assert asked == (
        "Your SPEC_CONFLICT names 'run_pytest', which is no test function of the workspace's test files. It "
        "must name a test the task gave (FILE::NAME) that contradicts the specification; if none does, send "
        "your verdict instead."
    )
    assert summary.outcome == "PASSED"


async def test_asked_once_a_second_unfounded_conflict_stands(tmp_path: Path) -> None:
    summary, trace, _ = await run_task(
        TASK,
        turns=_turns(_conflict("run_pytest"), _conflict("run_pytest")),
        runs_dir=tmp_path,
    )
    assert len(trace.cycles[0].repairs) == 1 and summary.outcome == "ESCALATED"


async def test_a_conflict_naming_a_given_test_that_failed_stands_at_once(tmp_path: Path) -> None:
    for named in ("test_given.py::test_hi", "test_hi"):
        summary, trace, _ = await run_task(
            TASK,
            turns=_turns(RUN_PYTEST, _conflict(named)),
            workspace_files={"test_given.py": GIVEN},
            runs_dir=tmp_path / named.replace(":", "_"),
        )
        assert trace.cycles[0].repairs == [] and summary.outcome == "ESCALATED"
        assert trace.cycles[0].blocked is not None and trace.cycles[0].blocked.test == named


async def test_a_conflict_over_a_test_the_judge_has_not_seen_fail_is_asked_once(tmp_path: Path) -> None:
    """Confirmed by code, not by the model's word (issue 44): the test it names must have failed in its
    own last run_pytest of the cycle. The 1.5B model's Evaluator returned SPEC_CONFLICT over a right file."""
    summary, trace, _ = await run_task(
        TASK,
        turns=_turns(_conflict("test_given.py::test_hi"), RUN_PYTEST, _conflict("test_given.py::test_hi")),
        workspace_files={"test_given.py": GIVEN},
        runs_dir=tmp_path,
    )
    [asked] = [r.error for r in trace.cycles[0].repairs]
    assert asked.startswith(
        "Your SPEC_CONFLICT names 'test_given.py::test_hi', which did not fail in your last run_pytest"
    )
    assert summary.outcome == "ESCALATED" and trace.cycles[0].blocked is not None


async def test_a_conflict_quoting_what_the_task_does_not_say_is_asked_once(tmp_path: Path) -> None:
    _, trace, _ = await run_task(
        TASK,
        turns=_turns(_conflict("test_given.py::test_hi", "a.py must say hello."), VERDICT),
        workspace_files={"test_given.py": GIVEN},
        runs_dir=tmp_path,
    )
    [asked] = [r.error for r in trace.cycles[0].repairs]
    assert asked == (
        "Your SPEC_CONFLICT quotes a specification the task message does not hold. It must quote, word for "
        "word, the task's own sentence that the test contradicts; if no sentence of the task does, the test "
        "is right and the work must change: send your verdict instead."
    )
    assert trace.cycles[0].blocked is None and trace.cycles[0].verdict is not None


async def test_a_conflict_quoting_what_crossed_from_the_last_cycle_is_asked_once(tmp_path: Path) -> None:
    """CI, code-delivery on the 1.5B model: in a revise cycle its Evaluator quoted its own summary of the
    cycle before, which the revise brief carries, and the conflict stood as if the task said it. Only the
    task's own words count, never what crossed from the last cycle (roles' words, tools' output)."""
    own = "a.py must say hello."
    partial = VERDICT.replace('"PASS"', '"PARTIAL"').replace("ALL_MET", "TESTS_FAILING")
    partial = partial.replace('met="true">it does', 'met="false">it does not').replace("Done.", own)
    _, trace, _ = await run_task(
        TASK,
        turns=[
            *_turns(RUN_PYTEST, partial),
            ("Specialist", WRITE),
            ("Specialist", REPORT),
            ("Evaluator", RUN_PYTEST),
            ("Evaluator", _conflict("test_given.py::test_hi", own)),
            ("Evaluator", partial),
        ],
        workspace_files={"test_given.py": GIVEN},
        runs_dir=tmp_path,
        max_partial_retries=1,
    )
    assert own in (trace.cycles[1].step_buffer or "")  # it crossed: the quote is of the brief, not the task
    [asked] = [r.error for r in trace.cycles[1].repairs]
    assert asked.startswith("Your SPEC_CONFLICT quotes a specification the task message does not hold.")
    assert trace.cycles[1].blocked is None and trace.cycles[1].verdict is not None


async def test_a_block_the_records_refute_is_asked_once_even_after_the_repairs_are_used(
    tmp_path: Path,
) -> None:
    """Held-out csv-mean (heldout-15): asked for its outputs until the repairs were used, the 1.5B model's
    Specialist blocked with "Why does pd need to be imported?" under CONFLICTING_CRITERIA, and the run
    ended for a person. A block is asked about once a phase past the count; asked, the role acts."""
    vague = '<blocked reason_code="CONFLICTING_CRITERIA">Why does pd need to be imported?</blocked>'
    specialist = [REPORT, vague, WRITE, REPORT]  # a report owing a.py (the one repair), then the block
    turns = [("Planner", PLAN), *[("Specialist", s) for s in specialist], ("Evaluator", VERDICT)]
    summary, trace, _ = await run_task(TASK, turns=turns, runs_dir=tmp_path)
    asked = [r.error for r in trace.cycles[0].repairs]
    assert len(asked) == 2 and asked[-1].startswith("You blocked on conflicting criteria")
    assert summary.outcome == "PASSED" and trace.cycles[0].blocked is None


async def test_a_revise_that_writes_its_failed_module_byte_for_byte_is_asked_to_change_it(
    tmp_path: Path,
) -> None:
    """code-delivery in CI, at temperature 0: told `quicksort.py` was to write again (the task's tests
    failed on it), the 1.5B model wrote it byte for byte as it was, reported, and the next review failed
    the same test on the same bytes. The report is asked about once: the file is still what the review
    failed; written changed, the work is reviewed and passes."""
    wrong = WRITE.replace('HI = "hi"', 'def hi():\n    return "hello"')
    right = WRITE.replace('HI = "hi"', 'def hi():\n    return "hi"')
    given = "from a import hi\n\n\ndef test_hi():\n    assert hi() == 'hi'\n"
    partial = VERDICT.replace('"PASS"', '"PARTIAL"').replace("ALL_MET", "TESTS_FAILING")
    partial = partial.replace('met="true">it does', 'met="false">test_hi fails')
    turns = [("Planner", PLAN), ("Specialist", wrong), ("Specialist", REPORT), ("Evaluator", RUN_PYTEST),
             ("Evaluator", partial),  # cycle 2, a revise
             ("Specialist", wrong), ("Specialist", REPORT), ("Specialist", right), ("Specialist", REPORT),
             ("Evaluator", RUN_PYTEST), ("Evaluator", VERDICT)]  # fmt: skip
    summary, trace, _ = await run_task(
        TASK, turns=turns, workspace_files={"test_given.py": given}, runs_dir=tmp_path
    )
    assert [c.kind for c in trace.cycles] == ["initial", "revise"]
    [asked] = [r.error for r in trace.cycles[1].repairs]
    assert asked.startswith("a.py is to write again: it is still the very bytes the review failed")
    assert summary.outcome == "PASSED"


def test_unchanged_reads_the_bytes_the_review_ran_on_not_the_writes_of_the_cycle() -> None:
    """A resumed revise writes its fix again over the fix it wrote before the interruption: that write
    changed nothing, yet the file is not what the review failed. The nudge compares the output's bytes
    now with those the review's last run ran with (its sha256), whatever was written in between."""
    from pse.engine._nudges import unchanged

    reviewed = {"a.py": "aa", "test_a.py": "tt"}
    assert unchanged(["a.py"], reviewed, [("a.py", "aa")]) is not None  # the very bytes the review failed
    assert unchanged(["a.py"], reviewed, [("a.py", "bb")]) is None  # changed since, by any write
    assert unchanged(["a.py"], {}, [("a.py", "aa")]) is None  # the review ran on no a.py
    assert unchanged(["a.py"], reviewed, []) is None  # not there now: the unwritten nudge's case
    both = unchanged(["a.py", "test_a.py"], reviewed, [("a.py", "aa"), ("test_a.py", "tt")])
    assert both is not None and both.startswith("a.py, test_a.py are to write again: they are still")
