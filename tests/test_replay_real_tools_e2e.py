"""A real-model run whose tool output changes between runs, recorded and replayed offline.

The loopback stand-in of the OpenAI API answers with the code-delivery demo's turns, except that the
Specialist's test of 100 random items draws a fresh seed on every run and names it when it fails. So
the Evaluator's first pytest run prints something new every time, as real tools do (random data,
timestamps, temporary paths, pids): strict replay records that as drift and goes on, and strict
"tools" replay fails on it.
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
from pse.roles import TOOL_AGENT, Role
from pse.runner import RunSummary, prepare_run, run_to_end
from pse.tasks import TaskRegistry
from pse.tools import Tool
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


async def test_strict_replay_with_real_tools_records_the_drift_and_reaches_the_same_outcome(
    recording: Recording, tmp_path: Path
) -> None:
    events: list[Event] = []
    settings = load_settings(runs_dir=tmp_path, cassette=recording.cassette)
    summary = await run_to_end(prepare_run("code-delivery", settings, on_event=events.append))

    assert (summary.outcome, summary.cycles) == ("PASSED", 2), summary.outcome_reason
    assert summary.tokens == recording.summary.tokens
    trace = load_trace(Path(summary.trace))
    then, now = _seed(_first_pytest(recording.trace)), _seed(_first_pytest(trace))
    assert then != now  # the tools really ran again, and printed something else
    [drift] = trace.cycles[0].drifts
    assert trace.cycles[1].drifts == []  # cycle 2's pytest passes: nothing random is printed
    assert (drift.role, drift.turn, drift.message, drift.speaker) == (
        Role.EVALUATOR, 2, 6, f"user:{TOOL_AGENT}",
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
        "a different request.\nmessage 6 (user:ToolAgent) (tool output) changed: "
    )
    assert "AssertionError: seed" in reason  # the whole diff, not only head and tail
    assert reason.endswith(
        "Only tool output differs (random data, timestamps, temporary paths, pids?), and "
        "PSE_REPLAY_STRICT=tools demands that it match. Replay with PSE_REPLAY_STRICT=true to record it "
        "as drift and go on, or with --replay-tools (PSE_REPLAY_TOOLS=true) to answer tool calls from the "
        "recording."
    )
    assert load_trace(Path(summary.trace)).cycles[0].drifts == []


def test_the_cli_shows_each_drift(
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
        r"\s*Replay drift: Evaluator turn 2, message 6 \(user:ToolAgent\): tool output differs from the "
        r"recording \(\d+ → \d+ chars\)",
        line,
    ), line
    run_id = next(line.split("/")[-2] for line in out.splitlines() if line.startswith("trace:"))
    code, shown = pse("trace", "show", run_id, "--runs-dir", runs)
    assert code == 0
    assert (
        "drift Evaluator turn 2, message 6 (user:ToolAgent): tool output differs from the recording" in shown
    )
