"""The executor's runners: recording tool runs, and answering tool calls from them (`--replay-tools`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.config import Settings
from pse.events import ToolCallRecord
from pse.exceptions import ToolReplayMismatchError, UserError
from pse.protocol import render_tool_calls
from pse.roles import Role
from pse.runner import prepare_run
from pse.sandbox import Sandbox
from pse.toolagent import RecordingToolRunner, ReplayingToolRunner, ToolExecutor, ToolRunner, run_tools
from pse.tools import Tool

FIX = (
    "Re-record the cassette (pse run TASK --record FILE) if the run changed on purpose, or run without "
    "--replay-tools (PSE_REPLAY_TOOLS=false) to execute the tools."
)
RANDOM = (Tool.BASH, {"command": "od -An -N8 -tx8 /dev/urandom"})  # new output on every run


def _workspace(tmp_path: Path, name: str, text: str) -> Path:
    ws = tmp_path / name
    ws.mkdir()
    (ws / "a.txt").write_text(text)
    return ws


def _executor(ws: Path, runner: ToolRunner = run_tools) -> ToolExecutor:
    return ToolExecutor(ws, Settings(sandbox="fallback", tool_timeout_s=20), runner=runner)


def _record(ws: Path, *batches: tuple[str, list[tuple[str, dict[str, str]]]]) -> list[ToolCallRecord]:
    runs: list[ToolCallRecord] = []
    executor = _executor(ws, RecordingToolRunner(runs.append))
    for requester, calls in batches:
        executor.execute_sync(requester, render_tool_calls(calls))
    return runs


def _refuse_commands(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """From now on no command may start; each attempt is kept (and fails its call)."""
    started: list[object] = []

    def refuse(self: Sandbox, argv: object, *args: object, **kwargs: object) -> object:
        started.append(argv)
        raise AssertionError("a command ran")

    monkeypatch.setattr(Sandbox, "run", refuse)
    return started


def test_recording_keeps_executed_calls_only_and_replay_answers_commands_without_running_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _record(
        _workspace(tmp_path, "first", "alpha\n"),
        (Role.EVALUATOR, [(Tool.READ_FILE, {"path": "a.txt"}), RANDOM, (Tool.WRITE_FILE, {"path": "b"})]),
    )
    # The denied write_file (the Evaluator may not write) was decided, not executed: it is not recorded.
    assert [(r.tool, r.status) for r in runs] == [(Tool.READ_FILE, "ok"), (Tool.BASH, "ok")]
    started = _refuse_commands(monkeypatch)
    replay = ReplayingToolRunner(runs, source="c.json")
    executor = _executor(_workspace(tmp_path, "second", "alpha\n"), replay)
    batch = executor.execute_sync(
        Role.EVALUATOR, render_tool_calls([(Tool.READ_FILE, {"path": "a.txt"}), RANDOM])
    )
    assert started == [] and executor.infrastructure_error is None
    assert [(r.output, r.facts, r.sandbox) for r in batch.records] == [
        (runs[0].output, runs[0].facts, None),  # a file tool runs for real, and agrees
        (runs[1].output, runs[1].facts, "replay"),  # a command is answered from the recording
    ]
    assert replay.position == 2


def test_a_request_beyond_the_recording_is_not_run_and_stops_the_run(tmp_path: Path) -> None:
    executor = _executor(_workspace(tmp_path, "ws", "alpha\n"), ReplayingToolRunner([], source="c.json"))
    batch = executor.execute_sync(
        Role.EVALUATOR, render_tool_calls([(Tool.READ_FILE, {"path": "a.txt"}), (Tool.LIST_FILES, {})])
    )
    error = executor.infrastructure_error
    assert isinstance(error, ToolReplayMismatchError)
    assert str(error) == (
        "tool replay of c.json: tool run 1 (Evaluator → read_file) was never recorded: the recording holds "
        f"0 tool run(s). {FIX}"
    )
    assert [(r.status, r.output) for r in batch.records] == [
        ("error", f"not run: {error}"),
        ("error", "not run: the tool machinery failed on an earlier request"),
    ]


def test_another_requester_tool_or_argument_is_a_mismatch(tmp_path: Path) -> None:
    runs = _record(
        _workspace(tmp_path, "first", "alpha\n"), (Role.SPECIALIST, [(Tool.READ_FILE, {"path": "a.txt"})])
    )
    for requester, call, problem in [
        (
            Role.EVALUATOR,
            (Tool.READ_FILE, {"path": "a.txt"}),
            "recorded Specialist → read_file, now Evaluator → read_file",
        ),
        (
            Role.SPECIALIST,
            (Tool.LIST_FILES, {}),
            "recorded Specialist → read_file, now Specialist → list_files",
        ),
        (Role.SPECIALIST, (Tool.READ_FILE, {"path": "b.txt"}), "argument path was 'a.txt', now 'b.txt'"),
    ]:
        executor = _executor(
            _workspace(tmp_path, f"ws-{problem[-6:]}", "alpha\n"), ReplayingToolRunner(runs, source="c.json")
        )
        executor.execute_sync(requester, render_tool_calls([call]))
        assert str(executor.infrastructure_error) == (
            f"tool replay of c.json: tool run 1 ({requester} → {call[0]}) differs from the recorded one: "
            f"{problem}. {FIX}"
        )


def test_a_file_tool_that_reads_another_workspace_than_recorded_is_a_mismatch(tmp_path: Path) -> None:
    runs = _record(
        _workspace(tmp_path, "first", "alpha\n"), (Role.SPECIALIST, [(Tool.READ_FILE, {"path": "a.txt"})])
    )
    executor = _executor(
        _workspace(tmp_path, "second", "omega\n"), ReplayingToolRunner(runs, source="c.json")
    )
    batch = executor.execute_sync(Role.SPECIALIST, render_tool_calls([(Tool.READ_FILE, {"path": "a.txt"})]))
    assert str(executor.infrastructure_error) == (
        "tool replay of c.json: tool run 1 (Specialist → read_file) ran for real and gave another result than "
        "recorded (status ok recorded, ok now; output 'alpha\\n' recorded, 'omega\\n' now). The workspace "
        f"differs from the recorded run's: a replayed command's changes to it are not reproduced. {FIX}"
    )
    assert batch.records[0].output.startswith("not run: tool replay of c.json")


def test_long_arguments_are_compared_where_they_first_differ(tmp_path: Path) -> None:
    content = "x = 1\n" * 40
    runs = _record(
        _workspace(tmp_path, "first", ""),
        (Role.SPECIALIST, [(Tool.WRITE_FILE, {"path": "q.py", "content": content})]),
    )
    executor = _executor(_workspace(tmp_path, "second", ""), ReplayingToolRunner(runs, source="c.json"))
    changed = content[:100] + "y" + content[101:]
    executor.execute_sync(
        Role.SPECIALIST, render_tool_calls([(Tool.WRITE_FILE, {"path": "q.py", "content": changed})])
    )
    expected = f"argument content differs from character 100: recorded {content[100:160]!r}, now {changed[100:160]!r}."
    assert expected in str(executor.infrastructure_error)
    assert not (tmp_path / "second" / "q.py").exists()  # a mismatching write is not run


def test_replay_tools_for_a_task_without_a_cassette_names_the_fix(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    (tasks / "plain").mkdir(parents=True)
    (tasks / "registry.toml").write_text("[tasks.plain]\n")
    (tasks / "plain" / "task.toml").write_text('description = "d"\ngoal = "g"\n')
    for role in ("planner", "specialist", "evaluator"):
        (tasks / "plain" / f"{role}.md").write_text("Do it.\n")
    settings = Settings(
        provider="openai", base_url="http://127.0.0.1:9/v1", tasks_dir=tasks, runs_dir=tmp_path / "runs",
        replay_tools=True,
    )  # fmt: skip
    with pytest.raises(UserError) as info:
        prepare_run("plain", settings)
    assert str(info.value) == (
        "--replay-tools (PSE_REPLAY_TOOLS) answers tool calls from a recording, and task 'plain' has no "
        "cassette: pass --cassette FILE, a cassette recorded with --record FILE"
    )
