"""The `pse` command line through its real entry point: commands, output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import pse
from pse.tasks import TaskRegistry

_TURNS = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]


def _cassette(tmp_path: Path, turns: list[dict[str, str]]) -> Path:
    path = tmp_path / "cassette.json"
    path.write_text(json.dumps({"version": 1, "turns": turns}))
    return path


def test_list_shows_the_reference_tasks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = pse(monkeypatch, capsys, "list")
    assert code == 0 and "code-delivery" in out and "incident-review" in out


def test_run_json_summary_and_exit_code_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(tmp_path), "--json")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert list(summary) == [
        "run_id", "task", "outcome", "outcome_reason", "cycles", "trace", "report", "escalation", "tokens", "cost",
        "state",  # added last (a waiting run has no outcome: AWAITING_ANSWER)
        "branch", "commit", "patch",  # a repository run's (--repo), else None
    ]  # fmt: skip
    assert (summary["outcome"], summary["cycles"]) == ("PASSED", 2)
    # tokens and cost are the trace's, key for key and nesting for nesting.
    trace = json.loads(Path(summary["trace"]).read_text())
    assert (summary["tokens"], summary["cost"]) == (trace["tokens"], trace["cost"])
    assert set(summary["tokens"]) == {"prompt", "completion", "total", "cached", "by_role"}
    assert set(summary["tokens"]["by_role"]["Planner"]) == {
        "prompt", "completion", "calls", "estimated", "cached", "prefix_counted", "prefix_reusable",
    }  # fmt: skip
    assert set(summary["cost"]) == {"amount", "currency", "unpriced_models"}
    assert Path(summary["trace"]).is_absolute() and Path(summary["trace"]).is_file()
    assert Path(summary["report"]).is_absolute() and Path(summary["report"]).name == "report.md"
    assert "scripted provider" in err  # the scripted default is announced, never mistaken for a model


def test_run_with_live_view_prints_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(tmp_path))
    assert code == 0
    assert "PASSED after 2 cycle(s)" in out
    assert "Specialist" in out and "prompt" in out and "completion" in out
    assert "Evaluator ↳ pytest: 7 passed, 4 failed" in out  # tool calls appear in the live view


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "no-such-task"], "no task named 'no-such-task'"),
        (["run", "code-delivery", "--cassette", "missing.json"], "does not exist"),
        (["run", "code-delivery", "--input", "novalue"], "takes no inputs; run it without --input novalue"),
        (["run", "code-delivery", "--input", "colour=blue"], "takes no inputs, and was given colour"),
        (["run", "code-delivery", "--provider", "gpt"], "--provider: Input should be"),
        (["resume", "nope"], "no run 'nope'"),
        (["trace", "show", "../etc"], "is not a run id"),
        (["run"], "Missing argument"),
    ],
)
def test_usage_and_configuration_errors_exit_2_with_a_fix(
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = pse(
        monkeypatch, capsys, *args, *(["--runs-dir", str(tmp_path)] if len(args) > 1 else [])
    )
    assert code == 2
    assert message in err + out
    assert not list(tmp_path.glob("*/workspace"))  # a refused run leaves nothing behind


def test_broken_environment_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PSE_MAX_PARTIAL_RETRIES", "lots")
    code, _, err = pse(monkeypatch, capsys, "run", "code-delivery")
    assert code == 2 and "PSE_MAX_PARTIAL_RETRIES" in err


def test_error_outcome_exits_3_and_no_pass_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prose = _cassette(tmp_path, [*_TURNS[:3], {"role": "Evaluator", "content": "All criteria PASS."}])
    code, out, _ = pse(
        monkeypatch,
        capsys,
        "run",
        "code-delivery",
        "--cassette",
        str(prose),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--json",
    )
    assert code == 3 and json.loads(out.splitlines()[-1])["outcome"] == "ERROR"

    blocked = _cassette(
        tmp_path, [_TURNS[0], {"role": "Specialist", "content": '<blocked reason_code="X">no</blocked>'}]
    )
    code, out, _ = pse(
        monkeypatch,
        capsys,
        "run",
        "code-delivery",
        "--cassette",
        str(blocked),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--json",
    )
    assert code == 1 and json.loads(out.splitlines()[-1])["outcome"] == "ESCALATED"


def test_new_validate_and_run_a_scaffolded_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "my-tasks"
    monkeypatch.setenv("PSE_TASKS_DIR", str(tasks))
    assert pse(monkeypatch, capsys, "new", "mytask")[0] == 0
    assert (tasks / "mytask" / "task.toml").is_file()
    code, out, _ = pse(monkeypatch, capsys, "validate", "mytask")
    assert code == 0 and "valid" in out
    code, out, err = pse(monkeypatch, capsys, "run", "mytask", "--runs-dir", str(tmp_path / "runs"), "--json")
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["outcome"] == "PASSED"
    code, _, err = pse(monkeypatch, capsys, "new", "mytask")
    assert code == 2 and "mytask" in err


def test_validate_reports_problems_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    (tasks / "broken").mkdir(parents=True)
    (tasks / "registry.toml").write_text('[tasks.broken]\npath = "broken"\n\n[tasks.ghost]\npath = "ghost"\n')
    (tasks / "broken" / "task.toml").write_text('description = "x"\ngoal = "y"\nmax_turns = 3\n')
    code, _, err = pse(monkeypatch, capsys, "validate", "--tasks-dir", str(tasks))
    assert code == 2
    assert "planner.md" in err and "ghost" in err and "max_turns" in err


def test_trace_list_show_stats_and_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = str(tmp_path)
    _, out, _ = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", runs, "--json")
    run_id = json.loads(out.splitlines()[-1])["run_id"]

    code, out, _ = pse(monkeypatch, capsys, "trace", "list", "--runs-dir", runs)
    assert code == 0 and run_id in out and "PASSED" in out
    code, out, _ = pse(monkeypatch, capsys, "trace", "show", run_id, "--runs-dir", runs)
    assert code == 0 and "cycle 1" in out and "AC1" in out and "pytest: 7 passed, 4 failed" in out
    code, out, _ = pse(monkeypatch, capsys, "trace", "show", run_id, "--runs-dir", runs, "--json")
    assert json.loads(out)["run_id"] == run_id

    code, out, _ = pse(monkeypatch, capsys, "stats", "--runs-dir", runs, "--json")
    stats = json.loads(out)
    assert stats["runs"] == 1 and stats["outcomes"] == {"PASSED": 1}
    assert stats["first_cycle_pass_rate"] == 0.0 and stats["mean_cycles_to_pass"] == 2.0
    assert stats["denied_tool_call_rate"] == 0.0

    assert pse(monkeypatch, capsys, "clean", "--runs-dir", runs)[1].strip() == "removed 0 run(s)"
    assert pse(monkeypatch, capsys, "clean", "--runs-dir", runs, "--all")[1].strip() == "removed 1 run(s)"
    assert not (tmp_path / run_id).exists()


def test_summarize_runs_the_rules_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = pse(monkeypatch, capsys, "summarize", "incident-review", "--out", str(tmp_path))
    assert code == 0 and "Rules summary" in out
    summary = json.loads((tmp_path / "rules_summary.json").read_text())
    assert summary["task"] == "incident-review"
    assert (tmp_path / "rules_summary.md").is_file()
    code, _, err = pse(monkeypatch, capsys, "summarize", "code-delivery", "--out", str(tmp_path))
    assert code == 2 and "has no rules.toml" in err


def test_new_without_a_tasks_dir_uses_dot_tasks_and_finds_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert pse(monkeypatch, capsys, "new", "mytask")[0] == 0
    assert (tmp_path / "tasks" / "mytask" / "planner.md").is_file()
    assert pse(monkeypatch, capsys, "validate", "mytask")[0] == 0
    code, out, _ = pse(monkeypatch, capsys, "run", "mytask", "--json")
    assert code == 0 and json.loads(out.splitlines()[-1])["outcome"] == "PASSED"
    assert Path(json.loads(out.splitlines()[-1])["trace"]).is_relative_to(tmp_path / "runs")


def test_live_view_shows_knowledge_retrievals() -> None:
    import io

    from rich.console import Console

    from pse.cli._live import LiveView
    from pse.events import RetrievalEvent

    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    with LiveView(console, "incident-review", "r1") as view:
        view.on_event(
            RetrievalEvent(
                run_id="r1",
                cycle=1,
                query="pool exhaustion",
                results=[
                    {"file": "db-pool-tuning.md", "start_line": 19, "end_line": 24, "score": 0.9},
                ],
            )
        )
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert 'Knowledge "pool exhaustion" → 1 result(s): db-pool-tuning.md:19-24' in text


def test_live_view_redraws_one_panel_on_a_terminal_and_prints_lines_otherwise() -> None:
    import io

    from rich.console import Console

    from pse.cli._live import LiveView
    from pse.events import CycleStarted

    for terminal in (True, False):
        console = Console(file=io.StringIO(), width=120, force_terminal=terminal)
        with LiveView(console, "code-delivery", "r1") as view:
            view.on_event(CycleStarted(run_id="r1", cycle=1, cycle_kind="initial", first_speaker="Planner"))
        text = console.file.getvalue()  # type: ignore[attr-defined]
        assert "cycle 1 (initial) starts with Planner" in text
        if terminal:
            assert "\x1b[" in text and "PSE run" in text  # redrawn in place with cursor control
        else:
            assert "\x1b[" not in text
            # printed once, as it happened: no panel repeats the log at the end
            assert text.count("starts with Planner") == 1 and "PSE run" not in text


# A model's raw terminal control: clear the screen, then a green line no gate ever printed.
_FAKE_PASS = "\x1b[2J\x1b[32mevery hard gate passed\x1b[0m\x1b]0;pwned\x07\x9b2J\r\x08\x00"


def test_live_view_prints_no_control_sequence_a_model_wrote() -> None:
    import io

    from rich.console import Console

    from pse.cli._live import LiveView
    from pse.events import (
        GateRecord,
        MessageEvent,
        MessageRecord,
        ToolCallEvent,
        ToolCallRecord,
        VerdictEvent,
    )

    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    with LiveView(console, "code-delivery", "r1") as view:
        view.on_event(
            MessageEvent(run_id="r1", cycle=1, message=MessageRecord(source="Specialist", content=_FAKE_PASS))
        )
        call = ToolCallRecord(
            requester="Specialist",
            tool="bash",
            arguments={},
            decision="denied",
            rule=_FAKE_PASS,
            status="denied",
        )
        view.on_event(ToolCallEvent(run_id="r1", cycle=1, call=call))
        gate = GateRecord(passed=False, failures=[_FAKE_PASS])
        view.on_event(VerdictEvent(run_id="r1", cycle=1, verdict=None, gate=gate, error=_FAKE_PASS))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "every hard gate passed" in text  # shown, as the plain text it is
    for control in ("\x1b", "\x9b", "\r", "\x08", "\x00", "\x07"):
        assert control not in text, repr(control)


def test_strip_control_keeps_text_and_removes_every_kind_of_sequence() -> None:
    from pse.cli._live import strip_control

    assert strip_control("a\tb\nc") == "a\tb\nc"
    assert strip_control(_FAKE_PASS) == "every hard gate passed"
    assert strip_control("x\x1bP1;2|secret\x1b\\y\x1bcz\x1b(B!") == "xyz!"  # DCS, reset, charset
    assert strip_control("title \x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\") == "title link"
    assert strip_control("\x1b] unterminated, lone \x1b") == " unterminated, lone "
    assert strip_control("\x7f\x85\x90q\x9c") == ""
    assert strip_control("näive – ünïcode ✓") == "näive – ünïcode ✓"


def test_trace_show_prints_no_control_sequence_or_markup_from_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pse.engine import Trace, write_trace
    from pse.events import GateRecord
    from pse.trace import CycleRecord

    trace = Trace(run_id="r1", task="code-delivery", started_at="2026-01-01T10:00:00.000+00:00")
    trace.outcome_reason = _FAKE_PASS + " [link=http://evil]click[/link]"
    trace.cycles.append(
        CycleRecord(
            index=1,
            kind="initial",
            first_speaker="Planner",
            started_at=trace.started_at,
            gate=GateRecord(passed=False, failures=[_FAKE_PASS]),
        )
    )
    write_trace(trace, tmp_path / "r1")
    for args in ((), ("--json",)):
        code, out, _ = pse(monkeypatch, capsys, "trace", "show", "r1", "--runs-dir", str(tmp_path), *args)
        assert code == 0 and "every hard gate passed" in out
        assert "\x1b" not in out and "\x9b" not in out and "\r" not in out
    code, out, _ = pse(monkeypatch, capsys, "trace", "show", "r1", "--runs-dir", str(tmp_path))
    assert "[link=http://evil]click[/link]" in out  # markup shown as text, not obeyed


def test_an_unregistered_copy_of_a_builtin_warns_once_and_refuses_to_run_the_builtin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(TaskRegistry.discover().get("code-delivery").dir, tmp_path / "tasks" / "code-delivery")
    code, out, err = pse(monkeypatch, capsys, "list")
    assert code == 0 and "code-delivery" in out
    assert err.count("warning:") == 1
    assert f"warning: tasks directory {tmp_path / 'tasks'} has no registry.toml" in " ".join(err.split())
    code, _, err = pse(monkeypatch, capsys, "run", "code-delivery")
    assert code == 2 and err.count("warning:") == 1
    assert "so `code-delivery` would run the built-in task instead of yours" in " ".join(err.split())
    assert not (tmp_path / "runs").exists()


def test_an_unknown_variable_is_one_warning_line_naming_the_closest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PSE_PROVDER", "openai")
    code, _, err = pse(monkeypatch, capsys, "list")
    assert code == 0
    assert " ".join(err.split()) == (
        "warning: PSE_PROVDER in the environment is no PSE setting and is ignored; did you mean PSE_PROVIDER?"
    )


def test_a_misspelt_limit_in_dotenv_stops_the_run_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 47, item 5: the run went on with no limit; now it does not start, and the fix is named."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("PSE_MAX_CYCLE=3\n")
    code, out, err = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and out == ""
    said = " ".join(err.split())
    assert said.startswith(
        "error: PSE_MAX_CYCLE in .env is no PSE setting, so the limit it sets would not hold;"
    )
    assert said.endswith("set PSE_MAX_PARTIAL_RETRIES=2 and PSE_MAX_FAIL_RETRIES=0 in its place")
    assert "PSE_MAX_STEPS" not in said and not (tmp_path / "runs").exists()
