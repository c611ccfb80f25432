"""A run recorded with `--record` replays strictly in a new run: nothing run-specific reaches a prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pse.config import load_settings
from pse.engine import load_trace
from pse.exceptions import ReplayMismatchError
from pse.runner import prepare_run, run_to_end
from reference_turns import SAMPLE
from replay_support import usage_of


async def test_recorded_run_replays_strictly_in_a_new_run(tmp_path: Path) -> None:
    recording = tmp_path / "recorded.json"
    first = await run_to_end(
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path / "a", record=recording))
    )
    assert first.outcome == "PASSED"
    turns = json.loads(recording.read_text())["turns"]
    assert len(turns) == 9 and all(t["request"]["digest"] for t in turns)
    assert len(json.loads(recording.read_text())["tool_runs"]) == 8  # every executed tool call
    sent = json.dumps(turns)
    assert str(tmp_path) not in sent and first.run_id not in sent  # no paths or run ids in any request

    # A new run in another folder (other absolute paths, other run id, other timings) replays it strictly.
    second = await run_to_end(
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path / "b", cassette=recording))
    )
    assert second.outcome == "PASSED"
    assert usage_of(second.tokens) == usage_of(first.tokens)  # recorded usage is replayed exactly


async def test_a_changed_prompt_fails_strict_replay_with_a_diff(tmp_path: Path) -> None:
    recording = tmp_path / "recorded.json"
    await run_to_end(prepare_run("code-delivery", load_settings(runs_dir=tmp_path / "a", record=recording)))
    data = json.loads(recording.read_text())
    evaluator = next(t for t in data["turns"] if t["role"] == "Evaluator")
    evaluator["request"]["digest"] = "0" * 64  # as if the Evaluator had been sent something else
    evaluator["request"]["messages"][-1]["digest"] = "0" * 64
    recording.write_text(json.dumps(data))
    summary = await run_to_end(
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path / "b", cassette=recording))
    )
    assert summary.outcome == "ERROR"
    assert summary.outcome_reason.startswith(ReplayMismatchError.__name__)


OLD_RECORDING = Path(__file__).parent / "data" / "recorded-before-drift.json"
"""A cassette in the format from before cassettes kept tool output and tool runs (scripted provider,
--record). Re-recorded once, in that format, when a revise cycle's prompt layout changed on purpose (the
fixed plan ahead of the step_buffer, issue 17), and again when the prompts lost their worked examples and
the Specialist got the note of the outputs to write (issue 29), when the Evaluator's prompt worded
PARTIAL and FAIL apart (issue 29 again), and when code-delivery's Specialist prompt said which imports
the files hold and its Evaluator prompt that a returned input is no new list (issue 29, on the 1.5B
model's runs), and when it said the test file's imports end with two empty lines (ruff's I001 on the
1.5B model's run 12), and when code-delivery seeded its own acceptance tests (their pytest output is in
every Evaluator's prompt after its checks), and when run_pytest ran each author's tests in a session of
their own, measured from outside the delivered code (issue 45: a section per session in its output), and
when code-delivery's prompts went back to requirements and each Evaluator got the note of the outputs it
judges (issue 44), when a revise brief quoted the line each failing test surfaced at (issue 44), and when
it named the code the task's own tests failed on as to write again (issue 44)."""


@pytest.mark.parametrize(
    ("cassette", "total_tokens"), [(OLD_RECORDING, 30841), (SAMPLE, 27533)], ids=["old-recording", "sample"]
)
async def test_an_old_cassette_still_replays_strictly(
    cassette: Path, total_tokens: int, tmp_path: Path
) -> None:
    summary = await run_to_end(
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path, cassette=cassette))
    )
    assert (summary.outcome, summary.cycles, summary.tokens.total) == ("PASSED", 2, total_tokens)
    assert [cycle.drifts for cycle in load_trace(Path(summary.trace)).cycles] == [[], []]
