"""A crew the engine had never seen, added as data only (`roles.REVIEW_CREW`): a Planner and an Evaluator
review a workspace as it is, nobody writes. It runs end to end on a cassette (tests/data/review-crew),
through the same decision, phases, ToolAgent, sandbox and hard gates as the built-in crews."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pse.config import load_settings
from pse.roles import CREWS, Role
from pse.runner import prepare_task, run_to_end
from pse.testing import in_memory_task

CASSETTE = Path(__file__).parent / "data" / "review-crew" / "cassette.json"
QUICKSORT = '''def quicksort(items: list) -> list:
    """A new list of `items`, sorted."""
    items = list(items)
    if len(items) < 2:
        return items
    pivot, rest = items[0], items[1:]
    return quicksort([x for x in rest if x < pivot]) + [pivot] + quicksort([x for x in rest if x >= pivot])
'''
TESTS = """from quicksort import quicksort


def test_sorts() -> None:
    assert quicksort([3, 1, 2, 1]) == [1, 1, 2, 3]


def test_input_untouched() -> None:
    items = [2, 1]
    assert quicksort(items) == [1, 2] and items == [2, 1]
"""
TASK = in_memory_task(
    {
        "goal": "Review quicksort.py and its tests as they are: does quicksort sort as its tests say?",
        "required_checks": ["pytest"],
    },
    name="review-quicksort",
)


def _review(tmp_path: Path, quicksort: str) -> tuple[dict[str, object], Path]:
    settings = load_settings(runs_dir=tmp_path / "runs", sandbox="fallback", team="review", cassette=CASSETTE)
    prepared = prepare_task(TASK, settings, files={"quicksort.py": quicksort, "test_quicksort.py": TESTS})
    summary = asyncio.run(run_to_end(prepared))
    return json.loads(Path(summary.trace).read_text()), prepared.workspace


def test_the_review_crew_is_only_data() -> None:
    review = CREWS["review"]
    assert review.speakers == (Role.PLANNER, Role.EVALUATOR) and review.worker is None and review.gated
    assert (review.revise_from, review.replan_from, review.plans) == (None, None, False)


def test_a_review_crew_passes_work_its_checks_prove(tmp_path: Path) -> None:
    trace, workspace = _review(tmp_path, QUICKSORT)
    assert (trace["outcome"], trace["outcome_reason"]) == ("PASSED", "PASS (ALL_MET); every hard gate passed")
    assert [(t["from"], t["to"]) for t in trace["transitions"]] == [
        ("START", "PLANNED"),
        ("PLANNED", "RUNNING"),
        ("RUNNING", "REVIEWING"),
        ("REVIEWING", "PASSED"),
    ]
    (cycle,) = trace["cycles"]
    assert [m["source"] for m in cycle["messages"]] == ["Planner", "Evaluator", "ToolAgent", "Evaluator"]
    assert [(c["requester"], c["tool"], c["decision"]) for c in cycle["tool_calls"]] == [
        ("Evaluator", "run_pytest", "allowed")
    ]
    assert cycle["tool_calls"][0]["facts"]["passed"] == 2
    assert cycle["gate"]["passed"] is True and cycle["gate"]["enforced"] is True
    assert [r["name"] for r in cycle["gate"]["results"]] == [
        "outputs_exist",
        "check:pytest",
        "check_config",
        "criteria_covered",
        "criteria_met",
    ]
    assert (workspace / "quicksort.py").read_text() == QUICKSORT  # nobody wrote: the work is as it was


def test_a_review_crews_pass_over_failing_work_is_held_by_the_gates_and_goes_to_a_person(
    tmp_path: Path,
) -> None:
    broken = QUICKSORT.replace("items = list(items)", "items.sort()\n    items = list(items)")
    trace, _ = _review(tmp_path, broken)
    (cycle,) = trace["cycles"]
    assert cycle["tool_calls"][0]["facts"]["failed"] == 1  # its input is no longer untouched
    assert cycle["result"] == "PARTIAL" and cycle["result_reason"].startswith("HARD_GATE: check:pytest: ")
    assert trace["outcome"] == "ESCALATED"
    assert trace["outcome_reason"].endswith("): the Evaluator's review did not pass")
    assert trace["counters"] == {"partial_retries": 0, "fail_retries": 0}  # nobody revises, nobody re-plans
    record = json.loads(Path(str(trace["escalation"])).read_text())  # what a person reads
    assert record["last_gate_failures"] == [cycle["result_reason"].removeprefix("HARD_GATE: ")]
    assert record["passed_criteria"] == ["AC1", "AC2"]  # the Evaluator's word; the gates overruled it
