"""The share of role turns that parse on the first try, counted from real traces of scripted runs."""

from __future__ import annotations

import json
from pathlib import Path

from pse.config import load_settings
from pse.doctor import ParseShare, parse_share, parse_turns, score_run
from pse.engine import load_trace
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from pse.trace import Trace

_TURNS = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]
PLAN = _TURNS[0]["content"]
WRITE = next(t["content"] for t in _TURNS if t["role"] == "Specialist" and "<tool_calls>" in t["content"])
BROKEN_WRITE = '<tool_calls>\n<invoke name="write_file">\n<parameter name="path">quicksort.py</parameter>\n</invoke>\n</tool_calls>'


async def _trace(tmp_path: Path, turns: list[tuple[str, str]], task: str = "code-delivery") -> Trace:
    tmp_path.mkdir(parents=True, exist_ok=True)
    cassette = tmp_path / "cassette.json"
    cassette.write_text(json.dumps({"version": 1, "turns": [{"role": r, "content": c} for r, c in turns]}))
    settings = load_settings(
        cassette=cassette, runs_dir=tmp_path / "runs", max_partial_retries=0, max_fail_retries=0
    )
    summary = await run_to_end(prepare_run(task, settings))
    return load_trace(Path(summary.trace))


async def test_the_reference_cassette_parses_every_turn_at_the_first_try(tmp_path: Path) -> None:
    settings = load_settings(runs_dir=tmp_path)
    trace = load_trace(Path((await run_to_end(prepare_run("code-delivery", settings))).trace))
    share = parse_share(trace)
    assert (share.turns, share.first_try, share.after_repair) == (9, 9, 9)
    assert dict(share.by_role) == {"Planner": (1, 1, 1), "Specialist": (4, 4, 4), "Evaluator": (4, 4, 4)}
    assert share.first_try_share == share.after_repair_share == 1.0 and share.problems == ()
    kinds = [t.kind for t in parse_turns(trace)]
    assert kinds == [
        "plan",
        "tool_calls",
        "report",
        "tool_calls",
        "verdict",
        "tool_calls",
        "report",
        "tool_calls",
        "verdict",
    ]
    score = score_run(trace)
    assert (score.outcome, score.format_error, score.cycles) == ("PASSED", False, 2)
    assert (
        score.tool_calls == sum(len(c.tool_calls) for c in trace.cycles)
        and score.tokens == trace.tokens.total
    )


async def test_a_broken_request_tried_again_is_one_turn_parsed_after_a_repair(tmp_path: Path) -> None:
    report = "<report>\nArtifacts: quicksort.py\n</report>"
    trace = await _trace(
        tmp_path,
        [("Planner", PLAN), ("Specialist", BROKEN_WRITE), ("Specialist", WRITE), ("Specialist", report)],
    )
    turns = parse_turns(trace)
    assert [(t.role, t.kind, t.attempts, t.parsed, t.first_try) for t in turns[:3]] == [
        ("Planner", "plan", 1, True, True),
        ("Specialist", "tool_calls", 2, True, False),  # the ToolAgent's error result in between
        ("Specialist", "report", 1, True, True),
    ]
    assert turns[1].problem.startswith("missing_parameter: write_file: missing required parameter 'content'")
    share = parse_share(trace)
    assert share.by_role["Specialist"] == (2, 1, 2)
    assert share.problems[0].startswith("cycle 1 Specialist: missing_parameter")


async def test_a_missing_plan_is_a_format_error_of_the_run(tmp_path: Path) -> None:
    prose = ("Planner", "I will plan: first write the code, then test it.")
    trace = await _trace(tmp_path, [prose, prose])  # the second after the engine's format repair
    score = score_run(trace)
    assert score.outcome == "ERROR" and score.format_error and score.outcome_reason.startswith("PLAN_ERROR")
    assert (score.parse.turns, score.parse.first_try, score.parse.after_repair) == (1, 0, 0)
    assert score.parse.first_try_share == 0.0 and score.tool_calls == 0


async def test_a_stray_invoke_in_a_report_and_a_prose_verdict_do_not_parse(tmp_path: Path) -> None:
    stray = 'Done. <invoke name="write_file"><parameter name="path">x.py</parameter></invoke>'
    trace = await _trace(
        tmp_path,
        [
            ("Planner", PLAN),
            ("Specialist", stray),
            ("Specialist", stray),  # a report before the plan's outputs exist goes back once
            ("Evaluator", "Looks good: PASS."),
            ("Evaluator", "PASS."),
        ],
    )
    turns = parse_turns(trace)
    assert [(t.role, t.parsed, t.problem.split(":")[0]) for t in turns] == [
        ("Planner", True, ""),
        ("Specialist", False, "<invoke> outside a <tool_calls> block"),  # one turn, repaired once
        ("Evaluator", False, "verdict"),
    ]
    assert score_run(trace).format_error  # REVIEW_ERROR: no verdict


def test_shares_add_up_across_runs() -> None:
    a = ParseShare(3, 2, 3, {"Planner": (1, 1, 1), "Specialist": (2, 1, 2)}, ("x",))
    b = ParseShare(2, 2, 2, {"Evaluator": (2, 2, 2)})
    total = a + b
    assert (total.turns, total.first_try, total.after_repair, total.problems) == (5, 4, 5, ("x",))
    assert list(total.by_role) == ["Planner", "Specialist", "Evaluator"]
    assert total.as_dict()["first_try_share"] == 0.8 and ParseShare().first_try_share is None


async def test_an_unclosed_blocked_is_repaired_then_a_format_error_instead_of_a_crash(
    tmp_path: Path,
) -> None:
    # Seen with Gemma-3-270M: it echoed the protocol's example and ran out of tokens inside <blocked>.
    unclosed = 'I cannot go on.\n<blocked reason_code="MISSING_DATA">gateway logs for 22:14-22:16 are not'
    # The Planner is asked once more (format repair), as for a missing plan; the Specialist owes a report.
    planner = await _trace(tmp_path / "planner", [("Planner", unclosed), ("Planner", unclosed)])
    specialist = await _trace(tmp_path / "specialist", [("Planner", PLAN), ("Specialist", unclosed)])
    for trace, reason in ((planner, "PLAN_ERROR: blocked:"), (specialist, "REPORT_ERROR: blocked:")):
        score = score_run(trace)
        assert score.outcome == "ERROR" and score.outcome_reason.startswith(reason) and score.format_error
        assert parse_turns(trace)[-1].problem.endswith("is never closed with </blocked>")
    assert [r.role for r in planner.cycles[0].repairs] == ["Planner"] and not specialist.cycles[0].repairs


async def test_an_evaluators_spec_conflict_is_a_turn_that_parsed(tmp_path: Path) -> None:
    # CI (stop 53): the 1.5B model's Evaluator ended two cycles with the SPEC_CONFLICT its grammar allows,
    # and the scorer counted both as "found no <verdict>", as if the protocol had broken.
    conflict = (
        '<blocked reason_code="SPEC_CONFLICT" test="test_quicksort.py::test_empty">'
        "The task says: return a new list.</blocked>"
    )
    report = ("Specialist", "<report>\nArtifacts: quicksort.py\n</report>")
    trace = await _trace(
        tmp_path, [("Planner", PLAN), ("Specialist", WRITE), report, ("Evaluator", conflict)]
    )
    evaluator = [t for t in parse_turns(trace) if t.role == "Evaluator"]
    assert [(t.kind, t.parsed, t.problem) for t in evaluator] == [("blocked", True, "")]
    assert not score_run(trace).format_error
    # As the engine reads it: a judge's message that holds a verdict is its verdict, a block beside it aside.
    both = '<verdict status="PASS" reason_code="OK">' + conflict
    trace = await _trace(
        tmp_path / "both", [("Planner", PLAN), ("Specialist", WRITE), report, ("Evaluator", both)]
    )
    assert next(t.kind for t in parse_turns(trace) if t.role == "Evaluator") == "verdict"
