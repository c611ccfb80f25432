"""A real-model run whose tool output changes between runs, recorded and replayed offline.

The loopback stand-in of the OpenAI API answers with the code-delivery demo's turns, except that the
Specialist's test of 100 random items draws a fresh seed on every run and names it when it fails. So
the Evaluator's first pytest run prints something new every time, as real tools do (random data,
timestamps, temporary paths, pids): strict replay records that as drift and goes on, strict "tools"
replay fails on it, and `--replay-tools` answers the tool calls from the recording without running
a command.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pse.config import load_settings
from pse.engine import Trace, load_trace
from pse.events import EVENT_ADAPTER, DriftEvent, Event
from pse.exceptions import CassetteError
from pse.roles import TOOL_AGENT, Role
from pse.runner import RunSummary, prepare_resume, prepare_run, run_to_end
from pse.sandbox import Sandbox
from pse.tasks import TaskRegistry
from pse.tools import Tool
from replay_support import turn_usage_of, usage_of
from standins import ChatStandIn, Reply

DEMO = TaskRegistry.discover(None).get("code-delivery").cassette_path
SEEDED = (
    "    rng = random.Random(20240607)\n"
    "    items = [rng.randint(-1000, 1000) for _ in range(100)]\n"
    "    assert quicksort(items) == sorted(items)\n"
)
FRESH = (
    "    seed = random.randrange(10**12)\n"
    "    rng = random.Random(seed)\n"
    "    items = [rng.randint(-45, 45) for _ in range(100)]  # 100 of 91 values: duplicates, always\n"
    '    assert quicksort(items) == sorted(items), f"seed {seed}"\n'
)
KEY = "live-secret-value-0123456789"  # no key shape: only the value rule can scrub it


def _turns() -> list[dict[str, Any]]:
    assert DEMO is not None
    turns: list[dict[str, Any]] = json.loads(DEMO.read_text())["turns"]
    assert SEEDED in turns[1]["content"]
    turns[1]["content"] = turns[1]["content"].replace(SEEDED, FRESH)
    return turns


@dataclass
class Recording:
    cassette: Path
    summary: RunSummary
    trace: Trace


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """One live run through the stand-in, recorded: real tools, real pytest, a fresh seed."""
    folder = tmp_path_factory.mktemp("recorded")
    cassette = folder / "recorded.json"
    with pytest.MonkeyPatch.context() as patch, ChatStandIn("openai") as stand_in:
        for name in [n for n in os.environ if n.startswith("PSE_")]:
            patch.delenv(name)
        patch.chdir(folder)
        stand_in.script(
            *(Reply(content=t["content"], usage=(1000 + i, 100 + i)) for i, t in enumerate(_turns()))
        )
        settings = load_settings(
            provider="openai",
            model="m-test",
            base_url=stand_in.url,
            api_key=KEY,
            runs_dir=folder / "runs",
            record=cassette,
        )
        summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    assert (summary.outcome, summary.cycles) == ("PASSED", 2), summary.outcome_reason
    return Recording(cassette, summary, load_trace(Path(summary.trace)))


def _first_pytest(trace: Trace) -> str:
    return next(c.output for c in trace.cycles[0].tool_calls if c.tool == Tool.RUN_PYTEST)


def _seed(output: str) -> str:
    found = re.search(r"AssertionError: seed (\d+)", output)
    assert found is not None, output
    return found.group(1)


def _calls(trace: Trace) -> list[tuple[Any, ...]]:
    return [
        (c.requester, c.tool, c.arguments, c.decision, c.rule, c.status, c.output, c.facts, c.truncated)
        for cycle in trace.cycles
        for c in cycle.tool_calls
    ]


def test_the_recording_holds_its_tool_runs_and_no_secret(recording: Recording) -> None:
    text = recording.cassette.read_text()
    assert KEY not in text and "authorization" not in text.lower()
    data = json.loads(text)
    assert [(r["requester"], r["tool"]) for r in data["tool_runs"]] == [
        (c.requester, c.tool) for cycle in recording.trace.cycles for c in cycle.tool_calls
    ]
    assert f"AssertionError: seed {_seed(_first_pytest(recording.trace))}" in data["tool_runs"][3]["output"]
    kept = [m for t in data["turns"] for m in t["request"]["messages"] if "text" in m]
    assert {m["speaker"] for m in kept} == {f"user:{TOOL_AGENT}"}  # whole texts: tool output only, once each
    assert len(kept) == len({m["digest"] for m in kept}) == 4


async def test_strict_replay_with_real_tools_records_the_drift_and_reaches_the_same_outcome(
    recording: Recording, tmp_path: Path
) -> None:
    events: list[Event] = []
    settings = load_settings(runs_dir=tmp_path, cassette=recording.cassette)
    summary = await run_to_end(prepare_run("code-delivery", settings, on_event=events.append))

    assert (summary.outcome, summary.cycles) == ("PASSED", 2), summary.outcome_reason
    assert usage_of(summary.tokens) == turn_usage_of(recording.trace)
    trace = load_trace(Path(summary.trace))
    then, now = _seed(_first_pytest(recording.trace)), _seed(_first_pytest(trace))
    assert then != now  # the tools really ran again, and printed something else
    [drift] = trace.cycles[0].drifts
    assert trace.cycles[1].drifts == []  # cycle 2's pytest passes: nothing random is printed
    assert (drift.role, drift.turn, drift.message, drift.speaker) == (
        Role.EVALUATOR, 2, 7, f"user:{TOOL_AGENT}",
    )  # fmt: skip
    lines = drift.diff.splitlines()
    assert lines[:2] == ["--- recorded", "+++ now"]
    pytest_says = [line for line in lines if re.fullmatch(r"[-+]E +AssertionError: seed \d+", line)]
    assert sorted(pytest_says) == sorted(
        [f"-E       AssertionError: seed {then}", f"+E       AssertionError: seed {now}"]
    )
    # Announced through the run's sink as it happened, and the same event rebuilt from the trace.
    [announced] = [e for e in events if isinstance(e, DriftEvent)]
    assert announced.drift == drift and announced.cycle == 1
    assert EVENT_ADAPTER.validate_json(announced.model_dump_json()) == announced
    assert [e for e in trace.events() if isinstance(e, DriftEvent)] == [announced]


async def test_strict_tools_replay_fails_on_the_drift_and_names_the_fix(
    recording: Recording, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PSE_REPLAY_STRICT", "tools")
    summary = await run_to_end(
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path, cassette=recording.cassette))
    )
    assert summary.outcome == "ERROR"
    reason = summary.outcome_reason
    assert reason.startswith(
        f"ReplayMismatchError: strict replay of {recording.cassette}: Evaluator's turn 2 was recorded for "
        "a different request.\nmessage 7 (user:ToolAgent) (tool output) changed: "
    )
    assert "AssertionError: seed" in reason  # the whole diff, not only head and tail
    assert reason.endswith(
        "Only tool output differs (random data, timestamps, temporary paths, pids?), and "
        "PSE_REPLAY_STRICT=tools demands that it match. Replay with PSE_REPLAY_STRICT=true to record it "
        "as drift and go on, or with --replay-tools (PSE_REPLAY_TOOLS=true) to answer tool calls from the "
        "recording."
    )
    assert load_trace(Path(summary.trace)).cycles[0].drifts == []


@pytest.fixture
def no_command(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every command a tool would start: none may, each one is kept (and fails the call)."""
    started: list[object] = []

    def refuse(self: Sandbox, argv: object, *args: object, **kwargs: object) -> object:
        started.append(argv)
        raise AssertionError(f"a command ran with --replay-tools: {argv!r}")

    monkeypatch.setattr(Sandbox, "run", refuse)
    return started


async def test_replay_tools_reproduces_the_recorded_run_without_running_a_command(
    recording: Recording, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_command: list[object]
) -> None:
    monkeypatch.setenv("PSE_REPLAY_TOOLS", "true")
    summary = await run_to_end(
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path, cassette=recording.cassette))
    )
    assert no_command == []
    assert (summary.outcome, summary.cycles, summary.outcome_reason) == (
        recording.summary.outcome, recording.summary.cycles, recording.summary.outcome_reason,
    )  # fmt: skip
    assert usage_of(summary.tokens) == turn_usage_of(recording.trace)
    trace = load_trace(Path(summary.trace))
    assert _calls(trace) == _calls(recording.trace)  # same requests, outputs and facts, in order
    assert [c.gate for c in trace.cycles] == [c.gate for c in recording.trace.cycles]  # the same facts
    assert [cycle.drifts for cycle in trace.cycles] == [[], []]
    assert {c.tool: c.sandbox for cycle in trace.cycles for c in cycle.tool_calls} == {
        Tool.WRITE_FILE: None, Tool.READ_FILE: None, Tool.RUN_PYTEST: "replay", Tool.RUN_RUFF: "replay",
    }  # fmt: skip
    assert trace.cassette_positions == {"Planner": 1, "Specialist": 4, "Evaluator": 4, TOOL_AGENT: 8}


async def test_a_replayed_tool_call_that_differs_from_its_recording_ends_the_run_unrun(
    recording: Recording, tmp_path: Path, no_command: list[object]
) -> None:
    data = json.loads(recording.cassette.read_text())
    assert data["tool_runs"][3]["tool"] == Tool.RUN_PYTEST
    data["tool_runs"][3]["arguments"]["target"] = "tests"
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    settings = load_settings(runs_dir=tmp_path / "runs", cassette=changed, replay_tools=True)
    summary = await run_to_end(prepare_run("code-delivery", settings))
    assert no_command == []
    assert summary.outcome == "ERROR"
    assert summary.outcome_reason == (
        f"ToolReplayMismatchError: tool replay of {changed}: tool run 4 (Evaluator → run_pytest) differs "
        "from the recorded one: argument target was 'tests', now '.'. Re-record the cassette (pse run TASK "
        "--record FILE) if the run changed on purpose, or run without --replay-tools (PSE_REPLAY_TOOLS=false) "
        "to execute the tools."
    )
    last = load_trace(Path(summary.trace)).cycles[0].tool_calls[3]
    assert (last.tool, last.status, last.sandbox) == (Tool.RUN_PYTEST, "error", None)
    assert last.output.startswith("not run: tool replay of")


async def test_replay_tools_with_a_cassette_without_tool_runs_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    with pytest.raises(CassetteError) as info:
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path, replay_tools=True))
    assert str(info.value) == (
        f"cassette {DEMO} holds no recorded tool runs, so --replay-tools (PSE_REPLAY_TOOLS) has nothing to "
        "answer tool calls with: record one with `pse run code-delivery --record FILE` (a recording keeps "
        "its tool runs), or run without --replay-tools"
    )
    assert not any(tmp_path.iterdir())  # nothing left behind


def test_the_cli_shows_each_drift_and_replays_tools(
    recording: Recording,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pse.cli import main

    def pse(*args: str) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["pse", *args])
        monkeypatch.setenv("COLUMNS", "200")
        with pytest.raises(SystemExit) as exit_info:
            main()
        return int(exit_info.value.code or 0), capsys.readouterr().out

    runs = str(tmp_path / "runs")
    code, out = pse("run", "code-delivery", "--cassette", str(recording.cassette), "--runs-dir", runs)
    assert code == 0
    printed = [line for line in out.splitlines() if not line.startswith("│")]  # not the final panel
    [line] = [line for line in printed if "drift:" in line]  # one line per drift
    assert re.fullmatch(
        r"\s*Replay drift: Evaluator turn 2, message 7 \(user:ToolAgent\): tool output differs from the "
        r"recording \(\d+ → \d+ chars\)",
        line,
    ), line
    run_id = next(line.split("/")[-2] for line in out.splitlines() if line.startswith("trace:"))
    code, shown = pse("trace", "show", run_id, "--runs-dir", runs)
    assert code == 0
    assert (
        "drift Evaluator turn 2, message 7 (user:ToolAgent): tool output differs from the recording" in shown
    )

    code, out = pse(
        "run",
        "code-delivery",
        "--cassette",
        str(recording.cassette),
        "--replay-tools",
        "--runs-dir",
        runs,
        "--json",
    )
    summary = json.loads(out.strip().splitlines()[-1])
    assert (code, summary["outcome"]) == (0, "PASSED")
    calls = [
        c for cycle in json.loads(Path(summary["trace"]).read_text())["cycles"] for c in cycle["tool_calls"]
    ]
    assert [c["sandbox"] for c in calls if c["tool"] == Tool.RUN_PYTEST] == ["replay", "replay"]


async def test_a_cancelled_tool_replay_resumes_replaying_where_it_stood(
    recording: Recording, tmp_path: Path, no_command: list[object]
) -> None:
    def cancel_at_cycle_two(event: Event) -> None:
        if event.kind == "cycle_start" and event.cycle == 2:
            prepared.engine.cancel("test cancelled")

    settings = load_settings(runs_dir=tmp_path, cassette=recording.cassette, replay_tools=True)
    prepared = prepare_run("code-delivery", settings, on_event=cancel_at_cycle_two)
    cancelled = await run_to_end(prepared)
    assert cancelled.outcome_reason == "CANCELLED: test cancelled"
    assert load_trace(Path(cancelled.trace)).cycles[1].positions_at_start[TOOL_AGENT] == 5

    summary = await run_to_end(prepare_resume(cancelled.run_id, load_settings(runs_dir=tmp_path)))
    assert no_command == [] and (summary.outcome, summary.cycles) == ("PASSED", 2), summary.outcome_reason
    trace = load_trace(Path(summary.trace))
    assert _calls(trace) == _calls(recording.trace)
    assert trace.cassette_positions[TOOL_AGENT] == 8
