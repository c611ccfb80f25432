"""Step mode: the plan as a graph, a review per step, independent steps at once (issue 15)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pse.config import Settings, load_settings
from pse.engine import ApprovalDecision, graph_problem, write_decision
from pse.events import ApprovalEvent, Event
from pse.protocol import parse_plan, render_tool_calls
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry

TASK = TaskRegistry.discover(None).get("package-steps")
DEMO: list[dict[str, str]] = json.loads(TASK.cassette_path.read_text())["turns"]  # type: ignore[union-attr]
PLAN = DEMO[0]["content"]


def _stream(turns: list[dict[str, str]], role: str, step: str | None) -> list[int]:
    return [i for i, t in enumerate(turns) if t["role"] == role and t.get("step") == step]


def _run(tmp_path: Path, turns: list[dict[str, str]], **options: Any) -> dict[str, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    cassette = tmp_path / "cassette.json"
    cassette.write_text(json.dumps({"version": 1, "turns": turns}))
    settings = load_settings(runs_dir=tmp_path / "runs", cassette=cassette, sandbox="fallback", **options)
    summary = asyncio.run(run_to_end(prepare_run("package-steps", settings)))
    trace: dict[str, Any] = json.loads(Path(summary.trace).read_text())
    return trace


def _attempts(trace: dict[str, Any], cycle: int = 0) -> list[tuple[str, int, str]]:
    return sorted((a["step"], a["attempt"], a["result"]) for a in trace["cycles"][cycle]["steps"])


def _span(trace: dict[str, Any], step: str) -> tuple[str, str]:
    ours = [a for c in trace["cycles"] for a in c["steps"] if a["step"] == step]
    return ours[0]["started_at"], ours[-1]["ended_at"]


def test_the_reference_run_reviews_each_step_runs_the_independent_ones_at_once_and_retries_one_alone(
    tmp_path: Path,
) -> None:
    trace = _run(tmp_path, DEMO)
    assert (trace["outcome"], trace["schema_version"], len(trace["cycles"])) == ("PASSED", 2, 1)
    assert _attempts(trace) == [("S1", 1, "PASS"), ("S2", 1, "PASS"), ("S3", 1, "PARTIAL"), ("S3", 2, "PASS")]
    s1, s2, s3 = _span(trace, "S1"), _span(trace, "S2"), _span(trace, "S3")
    assert s1[1] <= s2[0] and s1[1] <= s3[0]  # their dependency passed first
    assert max(s2[0], s3[0]) < min(s2[1], s3[1])  # S2 and S3 ran at the same time
    # Each stream consumed exactly its turns: the PARTIAL step alone was asked again.
    assert trace["cassette_positions"] == {
        "Planner": 1, "Specialist": 0, "Evaluator": 2,
        "Specialist@S1": 2, "Evaluator@S1": 2, "Specialist@S2": 2, "Evaluator@S2": 2,
        "Specialist@S3": 4, "Evaluator@S3": 4,
    }  # fmt: skip
    cycle = trace["cycles"][0]
    assert {m["step"] for m in cycle["messages"] if m["source"] == "Specialist"} == {"S1", "S2", "S3"}
    final = [c for c in cycle["tool_calls"] if c["step"] is None]
    assert [c["tool"] for c in final] == ["run_pytest", "run_ruff"]  # the final review, over the workspace
    retry = next(a for a in cycle["steps"] if a["step"] == "S3" and a["attempt"] == 2)
    assert "prints the bare count '8'" in retry["step_buffer"] and retry["step_buffer_tokens"] > 0
    # The second attempt's Specialist saw only its step, not the others' work.
    opening = [m for m in cycle["messages"] if m["step"] == "S3" and m["source"] == "Specialist"]
    assert all("test_textstats" not in m["content"] for m in opening)
    cli_checks = [c["output"] for c in cycle["tool_calls"] if c["step"] == "S3" and c["tool"] == "bash"]
    assert cli_checks[0].startswith("8\n") and cli_checks[1].startswith("words: 8\n")  # real evidence
    assert [(t["from"], t["to"]) for t in trace["transitions"]] == [
        ("START", "PLANNED"), ("PLANNED", "RUNNING"), ("RUNNING", "REVIEWING"), ("REVIEWING", "PASSED"),
    ]  # fmt: skip


def test_a_write_outside_the_steps_outputs_is_denied(tmp_path: Path) -> None:
    turns = list(DEMO)
    (first, *_) = _stream(turns, "Specialist", "S1")
    sneak = render_tool_calls([("write_file", {"path": "cli.py", "content": "print('early')\n"})])
    turns[first] = {**turns[first], "content": turns[first]["content"] + "\n" + sneak}
    trace = _run(tmp_path, turns)
    (denied,) = [c for c in trace["cycles"][0]["tool_calls"] if c["step"] == "S1" and c["status"] == "denied"]
    assert denied["rule"] == "steps.outputs"
    assert "step S1 may write only its outputs (textstats.py)" in denied["output"]
    assert trace["outcome"] == "PASSED"  # S3 wrote cli.py, in its own step


def _retrying(times: int) -> list[dict[str, str]]:
    """The demo with S3 PARTIAL `times` times before its PASS."""
    turns = list(DEMO)
    spec = _stream(turns, "Specialist", "S3")
    ev = _stream(turns, "Evaluator", "S3")
    bad = [turns[spec[0]], turns[spec[1]]], [turns[ev[0]], turns[ev[1]]]
    good = [turns[spec[2]], turns[spec[3]]], [turns[ev[2]], turns[ev[3]]]
    rest = [t for i, t in enumerate(turns) if i not in {*spec, *ev}]
    s3 = bad[0] * times + good[0]
    e3 = bad[1] * times + good[1]
    return [*rest, *s3, *e3]


def test_the_prompt_of_a_retried_step_stays_flat(tmp_path: Path) -> None:
    trace = _run(tmp_path, _retrying(3), max_step_retries=3)
    assert trace["outcome"] == "PASSED"
    assert [a for a in _attempts(trace) if a[0] == "S3"] == [
        ("S3", 1, "PARTIAL"), ("S3", 2, "PARTIAL"), ("S3", 3, "PARTIAL"), ("S3", 4, "PASS"),
    ]  # fmt: skip
    firsts: list[int] = []
    seen: set[int] = set()
    attempts = [a for a in trace["cycles"][0]["steps"] if a["step"] == "S3"]
    messages = [
        m for m in trace["cycles"][0]["messages"] if m["step"] == "S3" and m["source"] == "Specialist"
    ]
    for attempt in attempts[1:]:  # each retry's first Specialist call
        first = next(i for i, m in enumerate(messages) if m["at"] >= attempt["started_at"] and i not in seen)
        seen.add(first)
        firsts.append(messages[first]["prompt_tokens"])
    assert len(firsts) == 3 and firsts[0] == firsts[2], firsts  # retry 1 and retry 3 cost the same
    assert len({a["step_buffer_tokens"] for a in attempts[1:]}) == 1


def test_a_step_over_its_retries_fails_the_cycle_and_escalates_when_no_re_plan_is_left(
    tmp_path: Path,
) -> None:
    trace = _run(tmp_path, DEMO, max_step_retries=0, max_fail_retries=0)
    assert trace["outcome"] == "ESCALATED"
    assert (
        "STEP_FAILED: step S3 over its 0 retries (PSE_MAX_STEP_RETRIES) (OUTPUT_FORMAT)"
        in trace["outcome_reason"]
    )
    assert trace["cycles"][0]["result"] == "FAIL"


def test_a_failed_step_re_plans_keeping_the_passed_steps_which_do_not_run_again(tmp_path: Path) -> None:
    turns = list(DEMO)
    changed_s1 = PLAN.replace("Write textstats.py with", "Write a new textstats.py with")
    replan = PLAN.replace(
        "Write cli.py whose main(argv) prints", "Write cli.py with argparse; main(argv) prints"
    )
    s3 = _stream(turns, "Specialist", "S3")
    e3 = _stream(turns, "Evaluator", "S3")
    fail = turns[e3[1]]["content"].replace('status="PARTIAL"', 'status="FAIL"')
    cycle1 = [
        t for i, t in enumerate(turns) if i not in {*s3[2:], *e3[1:], *_stream(turns, "Evaluator", None)}
    ]
    cycle1.append({**turns[e3[1]], "content": fail})
    cycle2 = [
        {"role": "Planner", "content": changed_s1},  # changes a passed step: repaired
        {"role": "Planner", "content": replan},
        *(turns[i] for i in s3[2:]),
        *(turns[i] for i in e3[2:]),
        *(turns[i] for i in _stream(turns, "Evaluator", None)),
    ]
    trace = _run(tmp_path, [*cycle1, *cycle2])
    assert trace["outcome"] == "PASSED", trace["outcome_reason"]
    assert [c["kind"] for c in trace["cycles"]] == ["initial", "replan"]
    assert trace["cycles"][0]["result_reason"].startswith("STEP_FAILED: step S3 FAIL")
    assert _attempts(trace, 1) == [("S3", 1, "PASS")]  # S1 and S2 passed before: not run again
    assert (
        trace["cassette_positions"]["Specialist@S1"] == 2
        and trace["cassette_positions"]["Specialist@S2"] == 2
    )
    (repair,) = trace["cycles"][1]["repairs"]
    assert "step S1 passed already: keep it exactly as it was" in repair["error"]
    buffer = trace["cycles"][1]["step_buffer"]
    assert "## Steps that passed" in buffer and "- S1: Write textstats.py" in buffer and "- S3" not in buffer


def _plan_with(*edits: tuple[str, str]) -> str:
    text = PLAN
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    return text


CYCLIC = _plan_with(('<step id="S1">', '<step id="S1" depends_on="S3">'))
UNKNOWN = _plan_with(('<step id="S2" depends_on="S1">', '<step id="S2" depends_on="S9">'))


def test_a_bad_graph_is_repaired_by_the_planner_or_ends_with_the_precise_error(tmp_path: Path) -> None:
    repaired = _run(tmp_path / "a", [{"role": "Planner", "content": CYCLIC}, *DEMO])
    assert repaired["outcome"] == "PASSED"
    (fix,) = repaired["cycles"][0]["repairs"]
    assert fix["error"] == "plan: the steps S1 → S3 → S1 depend on each other in a cycle: one must come first"
    broken = _run(tmp_path / "b", [{"role": "Planner", "content": UNKNOWN}] * 2 + DEMO[1:])
    assert broken["outcome"] == "ERROR"
    assert broken["outcome_reason"] == (
        'PLAN_ERROR: plan: step S2 depends_on S9, which no <step id="…"> declares'
    )


def test_the_step_cap_holds(tmp_path: Path) -> None:
    trace = _run(tmp_path, [DEMO[0], *DEMO], max_steps=2)
    assert trace["outcome"] == "ERROR"
    assert "the plan has 3 steps; at most 2 (PSE_MAX_STEPS)" in trace["outcome_reason"]


@pytest.mark.parametrize(
    ("edits", "problem"),
    [
        (
            (('<criterion id="AC2" step="S2">', '<criterion id="AC2">'),),
            'step S2 has no criterion: add <criterion id="…" step="S2">; every step is reviewed',
        ),
        (
            (('<criterion id="AC1" step="S1">', '<criterion id="AC1" step="S7">'),),
            'criterion AC1 is bound to step="S7", which no <step id="…"> declares',
        ),
        (
            (('<output path="cli.py" step="S3"/>', '<output path="cli.py" step="S4"/>'),),
            'output cli.py is bound to step="S4", which no <step id="…"> declares',
        ),
        ((('<step id="S1">', '<step id="S1" depends_on="S1">'),), "step S1 depends on itself"),
    ],
)
def test_graph_problems_are_named_precisely(edits: tuple[tuple[str, str], ...], problem: str) -> None:
    assert graph_problem(parse_plan(PLAN), 12) is None
    assert graph_problem(parse_plan(_plan_with(*edits)), 12) == problem


def test_an_output_claimed_by_two_steps_is_refused_by_the_parser() -> None:
    from pse.exceptions import ProtocolError

    text = PLAN.replace("</plan>", '  <output path="cli.py" step="S2"/>\n</plan>')
    with pytest.raises(ProtocolError, match=r'plan: <output path="cli\.py"> is claimed by steps S3 and S2'):
        parse_plan(text)


def test_execution_is_validated_in_task_toml(tmp_path: Path) -> None:
    from pse.tasks import validate

    tasks = tmp_path / "tasks"
    (tasks / "x").mkdir(parents=True)
    toml = (TASK.dir / "task.toml").read_text().replace('execution = "steps"', 'execution = "stepwise"')
    (tasks / "x" / "task.toml").write_text(toml)
    for name in ("planner.md", "specialist.md", "evaluator.md"):
        (tasks / "x" / name).write_text((TASK.dir / name).read_text())
    (tasks / "registry.toml").write_text('[tasks.x]\npath = "x"\n')
    problems = [str(p) for p in validate([tasks], "x")]
    assert any(
        "execution" in p and "is not one of task, steps" in p and "did you mean 'steps'?" in p
        for p in problems
    ), problems


def test_a_blocked_step_pauses_its_branch_and_the_run_escalates_once_nothing_else_can_go_on(
    tmp_path: Path,
) -> None:
    turns = list(DEMO)
    s2 = _stream(turns, "Specialist", "S2")
    e2 = _stream(turns, "Evaluator", "S2")
    blocked = '<blocked reason_code="MISSING_SPEC">which cases count as punctuation is not said</blocked>'
    keep = [t for i, t in enumerate(turns) if i not in {*s2, *e2, *_stream(turns, "Evaluator", None)}]
    trace = _run(tmp_path, [*keep, {"role": "Specialist", "step": "S2", "content": blocked}])
    assert trace["outcome"] == "ESCALATED"
    attempts = _attempts(trace)
    assert ("S2", 1, "BLOCKED") in attempts and ("S3", 2, "PASS") in attempts  # the other branch went on
    assert trace["cycles"][0]["blocked"] == {
        "role": "Specialist",
        "reason_code": "MISSING_SPEC",
        "detail": blocked.split(">")[1].split("<")[0],
        "test": None,  # a SPEC_CONFLICT names its test; this block names none
    }
    assert trace["cycles"][0]["result"] == "BLOCKED"


def _held_steps(tmp_path: Path, rule: str) -> Settings:
    """Settings for `held-steps`: package-steps whose Specialist's writes matching `rule` wait for a person."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TASK.dir, tasks / "held-steps")
    with (tasks / "held-steps" / "task.toml").open("a") as toml:
        toml.write(f"\n[policy.Specialist.write_file]\napproval = {rule}\n")
    (tasks / "registry.toml").write_text('[tasks.held-steps]\npath = "held-steps"\n')
    return load_settings(runs_dir=tmp_path / "runs", tasks_dir=tasks, sandbox="fallback")


def test_a_steps_run_stopped_while_a_call_waits_resumes_mid_cycle_without_a_turn_or_a_call_repeated(
    tmp_path: Path,
) -> None:
    from pse.runner import prepare_resume

    reference = _run(tmp_path / "reference", DEMO)  # the same plan, never stopped
    settings = _held_steps(tmp_path, '{ path = "test_text*" }')

    def interrupt_when_held(event: Event) -> None:
        if isinstance(event, ApprovalEvent) and event.approval.decision is None:
            asyncio.get_running_loop().call_soon(prepared.engine.interrupt)

    prepared = prepare_run("held-steps", settings, on_event=interrupt_when_held)
    summary = asyncio.run(run_to_end(prepared))
    assert (summary.outcome, summary.state) == (None, "AWAITING_APPROVAL")
    held = json.loads(Path(summary.trace).read_text())
    assert [a["requester"] + "/" + a["arguments"]["path"] for a in held["approvals"]] == [
        "Specialist/test_textstats.py"
    ]
    done_before = [c["arguments"].get("path") for c in held["cycles"][0]["tool_calls"]]
    assert "textstats.py" in done_before and "test_textstats.py" not in done_before
    write_decision(
        prepared.run_dir, ApprovalDecision(id=held["approvals"][0]["id"], decision="approved", by="t")
    )
    resumed = prepare_resume(summary.run_id, settings)
    summary = asyncio.run(run_to_end(resumed))
    trace = json.loads(Path(summary.trace).read_text())
    assert (trace["outcome"], trace["resumed"], len(trace["cycles"])) == ("PASSED", 1, 1)
    # Every step's turns came back from the trace in its own stream, and only what came after the stop
    # reached the cassette: each turn was served once, as in the run that never stopped.
    assert trace["cassette_positions"] == reference["cassette_positions"]
    calls = {r: (t["calls"], t["completion"]) for r, t in trace["tokens"]["by_role"].items()}
    assert calls == {r: (t["calls"], t["completion"]) for r, t in reference["tokens"]["by_role"].items()}
    assert _attempts(trace) == _attempts(reference)
    # Nothing ran twice: each file was written once, the held one once it was approved.
    writes = [c["arguments"]["path"] for c in trace["cycles"][0]["tool_calls"] if c["tool"] == "write_file"]
    assert sorted(writes) == sorted(
        c["arguments"]["path"] for c in reference["cycles"][0]["tool_calls"] if c["tool"] == "write_file"
    )
    # The calls made before the stop came back from the trace (their records, times included), per step.
    again = {
        (c["step"], c["tool"], json.dumps(c["arguments"]), c["at"]) for c in trace["cycles"][0]["tool_calls"]
    }
    before = {
        (c["step"], c["tool"], json.dumps(c["arguments"]), c["at"]) for c in held["cycles"][0]["tool_calls"]
    }
    assert before and before <= again
    [approval] = trace["approvals"]
    assert approval["decision"] == "approved"
    assert (resumed.workspace / "test_textstats.py").is_file()


def test_calls_held_by_steps_running_at_once_are_each_decided_and_the_run_waits_for_all(
    tmp_path: Path,
) -> None:
    settings = _held_steps(tmp_path, "{ larger_than = 0 }")
    waiting: list[int] = []

    def approve_when_held(event: Event) -> None:
        if isinstance(event, ApprovalEvent) and event.approval.decision is None:
            waiting.append(len([a for a in prepared.engine.trace.approvals if a.decision is None]))
            decision = ApprovalDecision(id=event.approval.id, decision="approved", by="lead")
            asyncio.get_running_loop().call_later(0.3, write_decision, prepared.run_dir, decision)

    prepared = prepare_run("held-steps", settings, on_event=approve_when_held)
    summary = asyncio.run(run_to_end(prepared))
    assert summary.outcome == "PASSED"
    trace = json.loads(Path(summary.trace).read_text())
    held = sorted(a["arguments"]["path"] for a in trace["approvals"])
    assert held == ["cli.py", "cli.py", "test_cli.py", "test_textstats.py", "textstats.py"]
    assert all(a["decision"] == "approved" and a["by"] == "lead" for a in trace["approvals"])
    assert max(waiting) == 2  # S2's and S3's writes waited at the same time
    moves = [(t["from"], t["to"]) for t in trace["transitions"]]
    assert moves.count(("RUNNING", "AWAITING_APPROVAL")) == moves.count(("AWAITING_APPROVAL", "RUNNING"))


def test_a_steps_unreadable_verdict_is_repaired_by_the_one_role_loop_and_recorded(tmp_path: Path) -> None:
    # S1's Evaluator ends its phase with prose instead of a verdict: the role loop tasks cycles use asks it
    # again with the parser's words, records the repair in the cycle, and the step goes on to PASS.
    turns = list(DEMO)
    turns.insert(4, {"role": "Evaluator", "step": "S1", "content": "The module looks right to me."})
    trace = _run(tmp_path, turns)
    assert trace["outcome"] == "PASSED"
    assert _attempts(trace) == [("S1", 1, "PASS"), ("S2", 1, "PASS"), ("S3", 1, "PARTIAL"), ("S3", 2, "PASS")]
    cycle = trace["cycles"][0]
    assert [(r["role"], r["attempt"]) for r in cycle["repairs"]] == [("Evaluator", 1)]
    assert "verdict" in cycle["repairs"][0]["error"]
    assert trace["cassette_positions"]["Evaluator@S1"] == 3
    # The repair request crossed into the Evaluator's context after its own phase, tool results included.
    s1 = [m["content"] for m in cycle["messages"] if m["step"] == "S1" and m["source"] == "Evaluator"]
    assert s1[-2] == "The module looks right to me." and s1[-1].startswith("<verdict")


def test_a_deadline_inside_a_step_is_named_as_the_deadline(tmp_path: Path) -> None:
    # Each scripted reply takes 1 s and the run has 2.5 s: the Planner's turn ends near 1 s, S1's
    # Specialist's first near 2 s, and the deadline falls inside its second (it read as the turn cap).
    trace = _run(tmp_path, DEMO, scripted_latency_s=1.0, run_timeout_s=2.5)
    assert trace["outcome"] == "TIMEOUT"
    (s1,) = trace["cycles"][0]["steps"]
    assert (s1["step"], s1["result"], s1["result_reason"]) == (
        "S1",
        "ERROR",
        "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)",
    )
