"""Whole runs under the native protocol end exactly as under DSML: same outcome, cycles and tool decisions.

The native cassettes are generated from the DSML ones (`native_cassettes`): every turn becomes the
function calls a native model would have made. The scripted provider answers them as FunctionCalls, the
native client turns them into DSML for the ToolAgent and the engine, and each request carries the
earlier calls and their results natively.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from autogen_core.models import AssistantMessage, FunctionExecutionResultMessage, SystemMessage

from native_cassettes import write_cassette
from pse.config import load_settings
from pse.engine import load_trace
from pse.runner import PreparedRun, prepare_resume, prepare_run, run_to_end
from pse.tasks import TaskRegistry

REFERENCE = json.loads((Path(__file__).parent / "data" / "reference_traces.json").read_text())
_REGISTRY = TaskRegistry.discover(None)


def _turns(task: str) -> list[tuple[str, str]]:
    data = json.loads(_REGISTRY.get(task).cassette_path.read_text())  # type: ignore[union-attr]
    return [(t["role"], t["content"]) for t in data["turns"]]


PLAN, S_BAD, S_REPORT, E_CHECKS, E_PARTIAL, S_FIX, S_REPORT2, E_CHECKS2, E_PASS = _turns("code-delivery")
E_FAIL = (
    "Evaluator",
    '<verdict status="FAIL">\n  <reason_code>WRONG_APPROACH</reason_code>\n'
    '  <criterion id="AC1" met="false">duplicates lost</criterion>\n'
    '  <criterion id="AC2" met="true">ok</criterion>\n'
    '  <criterion id="AC3" met="false">test_duplicates fails</criterion>\n'
    '  <criterion id="AC4" met="true">ok</criterion>\n'
    "  <summary>The partitioning approach loses data.</summary>\n</verdict>",
)
S_TRESPASS = (  # a tool the Specialist is not granted, a tool nobody has, a call missing its argument
    "Specialist",
    "I will look around first.\n<tool_calls>\n"
    '<invoke name="bash">\n<parameter name="command">ls -la</parameter>\n</invoke>\n'
    '<invoke name="delete_everything">\n<parameter name="path">.</parameter>\n</invoke>\n'
    '<invoke name="write_file">\n<parameter name="path">notes.md</parameter>\n</invoke>\n'
    "</tool_calls>",
)
S_BLOCKED = (
    "Specialist",
    '<blocked reason_code="MISSING_PERMISSION">I may not run bash to profile</blocked>',
)


def _plan_v1(plan: dict[str, Any] | None) -> dict[str, Any] | None:
    """A plan without the step-mode fields added since the reference (empty in task mode)."""
    if plan is None:
        return None
    items = {"depends_on": [], "step": None}
    drop = lambda item: {k: v for k, v in item.items() if not (k in items and v == items[k])}  # noqa: E731
    kept = {k: v for k, v in plan.items() if not (k == "output_steps" and v == {})}
    return kept | {"steps": [drop(s) for s in plan["steps"]], "criteria": [drop(c) for c in plan["criteria"]]}


def _shape(trace: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the protocol: outcome, cycles, verdicts, transitions, every tool decision."""
    return {
        "outcome": (trace["outcome"], trace["outcome_reason"], trace["counters"]),
        "transitions": [t["to"] for t in trace["transitions"]],
        "cycles": [
            {
                "kind": c["kind"],
                "result": (c["result"], c["result_reason"]),
                # a verdict's findings (issue 32) are newer than the reference: none in these runs
                "verdict": {k: v for k, v in c["verdict"].items() if (k, v) != ("findings", [])}
                if c["verdict"]
                else None,
                "plan": _plan_v1(c["plan"]),
                "blocked": c["blocked"],
                "gate": {k: v for k, v in c["gate"].items() if k != "enforced"},  # newer than the reference
                "tools": [
                    {
                        k: call[k]
                        for k in ("requester", "tool", "arguments", "decision", "rule", "status", "output")
                    }
                    for call in c["tool_calls"]
                ],
            }
            for c in trace["cycles"]
        ],
    }


async def _run(
    tmp_path: Path, task: str, turns: list[tuple[str, str]], protocol: str, **options: Any
) -> PreparedRun:
    cassette = write_cassette(tmp_path / protocol / "cassette.json", turns, native=protocol == "native")
    settings = load_settings(
        cassette=cassette, runs_dir=tmp_path / protocol, sandbox="fallback", protocol=protocol, **options
    )
    prepared = prepare_run(task, settings)
    await run_to_end(prepared)
    return prepared


def _trace(prepared: PreparedRun) -> dict[str, Any]:
    return json.loads((prepared.run_dir / "trace.json").read_text())


@pytest.mark.parametrize("task", ["code-delivery", "incident-review"])
async def test_the_reference_runs_end_as_their_dsml_reference_traces(tmp_path: Path, task: str) -> None:
    prepared = await _run(tmp_path, task, _turns(task), "native")
    trace = _trace(prepared)
    assert _shape(trace) == _shape(REFERENCE[task])
    # The translation is exact for these turns: the trace holds the very messages of the DSML run.
    messages = [[(m["source"], m["content"]) for m in c["messages"]] for c in trace["cycles"]]
    assert messages == [
        [(m["source"], m["content"]) for m in c["messages"]] for c in REFERENCE[task]["cycles"]
    ]
    # And the model was spoken to natively: every later request of a phase carries calls and results.
    assert prepared.player is not None
    for role, requests in prepared.player.requests.items():
        for request in requests:
            sent = "\n".join(str(m.content) for m in request)
            assert "<tool_calls>" not in sent and "<tool_results" not in sent and "<invoke" not in sent, role
            assert "function calls" in str(request[0].content) and isinstance(request[0], SystemMessage)
    evaluator = prepared.player.requests["Evaluator"]
    calls = [
        m for r in evaluator for m in r if isinstance(m, AssistantMessage) and isinstance(m.content, list)
    ]
    results = [m for r in evaluator for m in r if isinstance(m, FunctionExecutionResultMessage)]
    assert calls and len(calls) == len(results)
    assert [[r.call_id for r in m.content] for m in results] == [[c.id for c in m.content] for m in calls]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("turns", "options"),
    [
        ([PLAN, S_BAD, S_REPORT, E_CHECKS, E_FAIL] * 2, {"max_fail_retries": 1}),
        ([PLAN, S_BLOCKED], {}),
        ([PLAN, S_TRESPASS, S_BAD, S_FIX, S_REPORT2, E_CHECKS2, E_PASS], {}),
        ([PLAN, S_BAD, S_FIX, S_REPORT2, ("Evaluator", E_PASS[1] + "\n" + E_PASS[1])], {}),
        ([PLAN, S_BAD, S_FIX, S_REPORT2, ("Evaluator", "All criteria PASS. Everything is great: PASS.")], {}),
    ],
    ids=["fail-escalates", "blocked", "denied-and-malformed-calls", "two-verdicts", "verdict-in-prose"],
)
async def test_a_scenario_ends_alike_under_both_protocols(
    tmp_path: Path, turns: list[tuple[str, str]], options: dict[str, Any]
) -> None:
    dsml = _trace(await _run(tmp_path, "code-delivery", turns, "dsml", **options))
    native = _trace(await _run(tmp_path, "code-delivery", turns, "native", **options))
    assert _shape(native) == _shape(dsml)
    assert native["settings"]["protocol"] == "native" and dsml["settings"]["protocol"] == "dsml"


async def test_a_cancelled_native_run_resumes_native_whatever_the_settings_say_now(tmp_path: Path) -> None:
    turns = _turns("code-delivery")
    cassette = write_cassette(tmp_path / "cassette.json", turns, native=True)
    runs = tmp_path / "runs"
    settings = load_settings(cassette=cassette, runs_dir=runs, sandbox="fallback", protocol="native")
    holder: list[PreparedRun] = []

    def cancel_at_cycle_two(event: Any) -> None:
        if event.kind == "cycle_start" and event.cycle == 2:
            holder[0].engine.cancel("stop for the test")

    holder.append(prepare_run("code-delivery", settings, on_event=cancel_at_cycle_two))
    summary = await run_to_end(holder[0])
    assert summary.outcome == "ERROR" and summary.outcome_reason == "CANCELLED: stop for the test"
    # Resumed with settings that no longer name the protocol: the run's own (native) is kept, so the
    # native cassette turns still fit and the run finishes as the uninterrupted one does.
    resumed = prepare_resume(holder[0].run_id, load_settings(runs_dir=runs, sandbox="fallback"))
    trace = load_trace(Path((await run_to_end(resumed)).trace))
    assert trace.outcome == "PASSED" and trace.resumed == 1
    assert trace.settings["protocol"] == "native"
