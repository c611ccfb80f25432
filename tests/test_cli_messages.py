"""Issue #18, the CLI: each message the issue quotes, reproduced, and what `pse` says instead.

Most run at 80 columns (COLUMNS=80), where the issue saw them.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest
from rich.console import Console

from pse.cli import main
from pse.cli._live import LiveView
from pse.events import GateRecord, ToolCallEvent, ToolCallRecord, VerdictEvent, VerdictRecord
from sandbox_support import needs_fallback

_DEMO_CAUSE = (
    "cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator PASS → PASSED"
)


def pse80(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, columns: int = 80
) -> tuple[int, str, str]:
    """`pse ARGS` in-process at `columns` columns; (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["pse", *args])
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit) as exit_info:
        main()
        raise SystemExit(0)
    captured = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), captured.out, captured.err


def _live_part(out: str) -> list[str]:
    """The live view's lines of a `pse run` (everything before the token table)."""
    lines = out.splitlines()
    end = next(i for i, line in enumerate(lines) if "tokens and cost" in line or "no model call" in line)
    return [line for line in lines[:end] if line.strip()]


@pytest.fixture
def demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    """`pse run code-delivery` with its live view, piped, at 80 columns: (stdout, runs dir)."""
    runs = str(tmp_path / "runs")
    code, out, _ = pse80(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", runs)
    assert code == 0 and "PASSED after 2 cycle(s)" in out
    return out, runs


# --- trace list / trace show ----------------------------------------------------------------------


def test_trace_list_at_80_columns_shows_whole_run_ids_and_show_takes_them_a_prefix_or_last(
    demo: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, runs = demo
    code, listing, _ = pse80(monkeypatch, capsys, "trace", "list", "--runs-dir", runs)
    run_id = next(p.name for p in Path(runs).iterdir() if p.is_dir())
    assert code == 0 and run_id in listing and "20261201-…" not in listing and "…" not in listing
    assert all(len(line) <= 80 for line in listing.splitlines())
    for typed in (run_id, run_id[:20], "last"):
        code, shown, err = pse80(monkeypatch, capsys, "trace", "show", typed, "--runs-dir", runs)
        assert code == 0, err
        assert shown.startswith(f"code-delivery {run_id}: PASSED")


def test_a_prefix_of_several_runs_is_refused_naming_them(
    demo: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, runs = demo
    assert pse80(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", runs, "--json")[0] == 0
    code, _, err = pse80(monkeypatch, capsys, "trace", "show", "2", "--runs-dir", runs, columns=200)
    assert code == 2 and "'2' is the start of 2 run ids" in err and "type more of the id" in err
    code, _, err = pse80(monkeypatch, capsys, "trace", "show", "last", "--runs-dir", str(Path(runs) / "none"))
    assert code == 2 and "no runs in" in err


def test_trace_show_prints_the_criteria_their_verdicts_and_the_causal_line(
    demo: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, runs = demo
    code, out, _ = pse80(monkeypatch, capsys, "trace", "show", "last", "--runs-dir", runs, columns=200)
    assert code == 0
    assert f"why: {_DEMO_CAUSE}" in out
    criterion = re.search(
        r"AC1\s+quicksort returns a new sorted list and leaves its input unchanged\s+✗\s+✓", out
    )
    assert criterion is not None, out  # its text, not judged met in cycle 1, met in cycle 2
    assert "gate ✗ check:pytest: last run_pytest run: status error, exit code 1" in out
    assert "Evaluator ↳ pytest: 7 passed, 4 failed" in out


# --- the live view --------------------------------------------------------------------------------


def test_the_live_view_shows_one_readable_line_per_event_never_raw_xml(demo: tuple[str, str]) -> None:
    out, _ = demo
    live = _live_part(out)
    assert all(len(line) <= 80 for line in live), [line for line in live if len(line) > 80]
    assert not [line for line in live if re.search(r"</?[a-z_]+[ >]", line)]  # no tag, whole or cut
    assert "Specialist ↳ wrote quicksort.py (433 B)" in live
    assert " Evaluator ↳ pytest: 7 passed, 4 failed (" in "\n".join(live)
    assert " Evaluator verdict PARTIAL (TESTS_FAILING): AC1 ✗ AC2 ✓ AC3 ✗ AC4 ✓" in live
    assert "    Engine cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL" in live


def test_piped_the_live_view_prints_each_line_once_and_no_panel(demo: tuple[str, str]) -> None:
    out, _ = demo
    assert out.count("starts with Planner") == 1 and out.count("wrote quicksort.py (433 B)") == 1
    assert "PSE run" not in out and "╭" not in out


def _check_call(status: str, facts: dict[str, object], output: str = "") -> ToolCallRecord:
    return ToolCallRecord.ran(
        requester="Evaluator", tool="run_pytest", arguments={"target": "."}, index=1,
        rule="roles.Evaluator.run_pytest", status=status, output=output, ms=1538, sandbox="fallback",
        facts=facts,
    )  # fmt: skip


def _lines(*events: object) -> list[tuple[str, set[str]]]:
    console = Console(file=io.StringIO(), width=80, force_terminal=False)
    with LiveView(console, "code-delivery", "r1") as view:
        for event in events:
            view.on_event(event)  # type: ignore[arg-type]
    return [(line.plain, {str(span.style) for span in line.spans}) for line in view.lines]


def test_a_failing_pytest_is_a_finding_with_its_facts_not_a_red_tool_failure() -> None:
    found = _check_call("error", {"exit_code": 1, "report": "checker", "passed": 5, "failed": 2, "errors": 0})
    broken = _check_call("error", {"exit_code": 4, "report": None}, output="pytest wrote no readable report")
    (finding, finding_style), (failure, failure_style) = _lines(
        ToolCallEvent(run_id="r1", cycle=1, call=found), ToolCallEvent(run_id="r1", cycle=1, call=broken)
    )
    assert finding == " Evaluator ↳ pytest: 5 passed, 2 failed (1.5 s)" and "allowed error" not in finding
    assert "yellow" in finding_style and "red" not in finding_style
    assert failure.startswith(" Evaluator ↳ run_pytest failed: pytest wrote no readable report")
    assert "red" in failure_style


def test_a_denied_call_says_which_rule_denied_it_once() -> None:
    call = ToolCallRecord.denied(
        requester="Specialist", tool="bash", arguments={"command": "rm -rf /"}, index=1,
        rule="roles.Specialist.bash", reason="the Specialist may not use bash in this task",
    )  # fmt: skip
    [(line, style)] = _lines(ToolCallEvent(run_id="r1", cycle=1, call=call))
    assert "denied denied" not in line
    assert line == (
        "Specialist ↳ bash denied by roles.Specialist.bash: the Specialist may not use bash in this task"
    )
    assert "red" in style


def test_a_review_without_a_verdict_never_prints_none() -> None:
    gate = GateRecord(passed=False, failures=["check:pytest: the Evaluator did not run run_pytest"])
    verdict = VerdictRecord(status="PASS", reason_code="ALL_MET")
    lines = _lines(
        VerdictEvent(
            run_id="r1", cycle=1, verdict=None, gate=gate, result="ERROR", result_reason="REVIEW_ERROR"
        ),
        VerdictEvent(
            run_id="r1", cycle=2, verdict=verdict, gate=gate, result="PARTIAL", result_reason="HARD_GATE"
        ),
    )
    assert [line for line, _ in lines] == [
        "    Engine cycle 1: no verdict → ERROR",  # the gates of a cycle nobody reviewed are not its cause
        "    Engine cycle 2: Evaluator PASS → gate `check:pytest` failed → PARTIAL",
    ]


def test_the_live_view_shows_the_result_the_engine_sent_and_decides_nothing() -> None:
    # A PASS over failed gates the engine recorded without enforcing: the event says PASS, so the view does.
    gate = GateRecord(passed=False, failures=["check:pytest: 2 failed"], enforced=False)
    verdict = VerdictRecord(status="PASS", reason_code="ALL_MET")
    lines = _lines(VerdictEvent(run_id="r1", cycle=1, verdict=verdict, gate=gate, result="PASS"))
    assert (
        lines[0][0] == "    Engine cycle 1: Evaluator PASS → gate `check:pytest` failed (not enforced) → PASS"
    )
    # The same review with the engine's decision PARTIAL: the view says PARTIAL.
    lines = _lines(VerdictEvent(run_id="r1", cycle=1, verdict=verdict, gate=gate, result="PARTIAL"))
    assert lines[0][0].endswith("failed (not enforced) → PARTIAL")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("down", ["every role", "the Evaluator"])
def test_a_down_model_names_its_root_cause_once_and_prints_no_empty_token_table(
    down: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    monkeypatch.setenv("PSE_MODEL_MAX_RETRIES", "0")
    if down == "every role":
        args = ["--provider", "openai", "--base-url", url, "--model", "m"]
        role = "Planner"
    else:  # the Planner and the Specialist replay the demo; the Evaluator's server is down
        monkeypatch.setenv("PSE_EVALUATOR_PROVIDER", "openai")
        monkeypatch.setenv("PSE_EVALUATOR_BASE_URL", url)
        monkeypatch.setenv("PSE_EVALUATOR_MODEL", "m")
        args, role = [], "Evaluator"
    code, out, _ = pse80(monkeypatch, capsys, "run", "code-delivery", *args, "--runs-dir", str(tmp_path))
    assert code == 3
    assert "review error: None" not in out and "None" not in out
    [engine] = [line for line in _live_part(out) if line.startswith("    Engine")]
    assert engine.startswith(f"    Engine cycle 1: stopped: ModelUnavailableError: {role}'s model 'm'")
    assert len(engine) <= 80
    if down == "every role":
        assert "no model call answered: no tokens spent, no cost" in out and "completion" not in out
    else:
        assert "Specialist" in out and "completion" in out  # tokens were spent: their table
    assert f"ERROR after 1 cycle(s): ModelUnavailableError: {role}'s model 'm'" in " ".join(out.split())
    code, shown, _ = pse80(
        monkeypatch, capsys, "trace", "show", "last", "--runs-dir", str(tmp_path), columns=200
    )
    assert code == 0
    why = "why: " + " ".join(shown.split("why: ", 1)[1].split("\n\n", 1)[0].split())
    assert why.startswith(f"why: cycle 1: ERROR: ModelUnavailableError: {role}'s model 'm'")
    assert why.endswith("connection failed: All connection attempts failed.")  # the cause, not the advice
    assert "gate ✗" not in shown  # the gates failed because the cycle stopped: not shown as causes


# --- errors and their sources ---------------------------------------------------------------------


def test_a_bad_flag_is_named_as_the_flag_and_a_bad_variable_as_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = pse80(monkeypatch, capsys, "run", "code-delivery", "--provider", "foo", columns=200)
    assert code == 2
    assert "--provider: Input should be 'openai', 'ollama' or 'scripted' (got 'foo')" in err
    assert "Fix the value of --provider." in err and "environment" not in err and "PSE_PROVIDER" not in err
    monkeypatch.setenv("PSE_PROVIDER", "foo")
    code, _, err = pse80(monkeypatch, capsys, "run", "code-delivery", columns=200)
    assert code == 2 and "PSE_PROVIDER: Input should be" in err
    assert "Fix the variable in your environment or .env." in err
    code, _, err = pse80(monkeypatch, capsys, "run", "code-delivery", "--provider", "scripted", "--json")
    assert code == 0  # the flag wins over the broken variable


def test_serve_on_a_busy_port_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = pse80(
            monkeypatch, capsys, "serve", "--port", str(port), "--runs-dir", str(tmp_path), columns=200
        )
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use (another `pse serve`?); stop that process, or pass "
        f"--port with a free one (e.g. --port {port + 1})"
    ]


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_serve_on_an_impossible_port_is_one_line_and_exit_2(
    port: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = pse80(monkeypatch, capsys, "serve", "--port", port, columns=200)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [
        f"error: --port {port} is not a port: pass one from 1 to 65535 (the default is 8080)"
    ]


# --- names, help, version -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["run", "code-delivry"], "no task named 'code-delivry'; did you mean 'code-delivery'?"),
        (["validate", "incident-reveiw"], "no task named 'incident-reveiw'; did you mean 'incident-review'?"),
        (["summarize", "incident-reveiw"], "did you mean 'incident-review'?"),
        (["rn", "code-delivery"], "No such command 'rn'. Did you mean 'run'?"),
        (["trace", "shwo", "last"], "No such command 'shwo'. Did you mean 'show'?"),
    ],
)
def test_a_misspelled_task_or_command_gets_a_did_you_mean(
    args: list[str], hint: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = pse80(monkeypatch, capsys, *args, columns=200)
    assert code == 2 and hint in " ".join((out + err).split())


def _commands() -> list[list[str]]:
    from typer.main import get_command

    from pse.cli import app

    root = get_command(app)
    found: list[list[str]] = [[]]
    for name in root.list_commands(None):  # type: ignore[attr-defined, arg-type]
        found.append([name])
        found += [[name, sub] for sub in getattr(root.load(name), "commands", {})]  # type: ignore[attr-defined]
    return found


def test_help_names_values_as_people_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = _commands()
    assert ["run"] in commands and ["trace", "show"] in commands and ["batch"] in commands
    for command in commands:
        code, out, _ = pse80(monkeypatch, capsys, *command, "--help")
        assert code == 0, command
        assert not re.search(r"<(bool|str|int|float|path|list\[[a-z]+\])>|\{[a-z_]+\}", out), (command, out)
    code, out, _ = pse80(monkeypatch, capsys, "run", "--help")
    assert "Usage: pse run [OPTIONS] TASK" in out
    assert re.search(r"--input\s+TEXT\s+KEY=VALUE, repeatable", out)
    assert re.search(r"--json\s+Print one JSON summary", out) and re.search(r"--runs-dir\s+DIR", out)


def test_version(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, _ = pse80(monkeypatch, capsys, "--version")
    assert (code, out) == (0, f"pse {version('pse')}\n")


# --- stats, new ------------------------------------------------------------------------------------


def _finished(runs: Path, name: str, cycles: int, tokens: int) -> None:
    from pse.engine import Trace, write_trace
    from pse.events import TokenCount
    from pse.trace import CycleRecord

    at = f"2026-01-0{len(list(runs.glob('*'))) + 1}T10:00:00.000+00:00"
    trace = Trace(run_id=name, task="code-delivery", started_at=at, ended_at=at, outcome="PASSED")
    trace.cycles = [
        CycleRecord(index=i + 1, kind="initial", first_speaker="Planner", started_at=at)
        for i in range(cycles)
    ]
    trace.tokens.by_role["Planner"] = TokenCount(prompt=tokens, completion=0, calls=1)
    write_trace(trace, runs / name)


def test_stats_are_formatted_for_people_and_json_stays_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, cycles, tokens in (("r1", 1, 10_000), ("r2", 2, 20_000), ("r3", 2, 21_855)):
        _finished(tmp_path, name, cycles, tokens)
    code, out, _ = pse80(monkeypatch, capsys, "stats", "--runs-dir", str(tmp_path))
    assert code == 0
    for raw in ("0.3333", '{"PASSED": 3}', "17285.0", "None"):
        assert raw not in out, raw
    flat = " ".join(out.split())
    assert "outcomes PASSED 3" in flat and "passed in the first cycle 33.3%" in flat
    assert "tokens per passed run 17,285" in flat and "cycles to pass (mean) 1.7" in flat
    assert "tool calls denied —" in flat  # no call to divide by: a dash, not 0 or None
    code, out, _ = pse80(monkeypatch, capsys, "stats", "--runs-dir", str(tmp_path), "--json")
    stats = json.loads(out)
    assert (stats["first_cycle_pass_rate"], stats["outcomes"], stats["tokens_per_passed_run"]) == (
        0.3333,
        {"PASSED": 3},
        17285.0,
    )


def test_new_never_edits_the_checkouts_own_registry(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pse.tasks._paths import builtin_tasks_dir

    builtin = builtin_tasks_dir()
    registry = builtin / "registry.toml"
    before = registry.read_bytes()
    monkeypatch.chdir(builtin.parent)  # `pse new` from the checkout's root: ./tasks is PSE's own
    try:
        code, _, err = pse80(monkeypatch, capsys, "new", "my-own-task", columns=200)
    finally:
        edited = registry.read_bytes() != before
        if edited:  # put the checkout back as it was
            registry.write_bytes(before)
        if (builtin / "my-own-task").exists():
            import shutil

            shutil.rmtree(builtin / "my-own-task")
    assert not edited and code == 2
    assert "is PSE's own tasks directory" in err and "pass --tasks-dir DIR or set PSE_TASKS_DIR" in err


@needs_fallback
def test_a_reader_that_leaves_early_does_not_end_the_run(tmp_path: Path) -> None:
    """`pse run … | head -1`: the pipe closes after the first line; the run goes on to its outcome
    (rich's default on a broken pipe exits the process, which ended the run as ERROR)."""
    import subprocess
    import sys

    pse_bin = Path(sys.executable).parent / "pse"
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PSE_")} | {"PSE_SANDBOX": "fallback"}
    subprocess.run(
        f"'{pse_bin}' run code-delivery --runs-dir '{runs}' | head -1",
        shell=True, env=env, cwd=tmp_path, capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    (trace,) = runs.glob("*/trace.json")
    data = json.loads(trace.read_text())
    assert (data["outcome"], data["outcome_reason"].split(";")[0]) == ("PASSED", "PASS (ALL_MET)")


def test_summarize_prints_its_table_unwrapped_and_writes_nothing_where_it_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33: `make summarize` hard-wrapped its Markdown table at 80 columns (broken Markdown) and
    wrote into the checkout's summaries/."""
    import tempfile

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.chdir(checkout)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code, out, err = pse80(monkeypatch, capsys, "summarize", "incident-review")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 13  # the header, its rule and a row per rule: none cut into two lines
    assert all(row.endswith("|") and row.replace("\\|", "").count("|") == 5 for row in rows), rows
    assert max(len(row) for row in rows) > 80  # long rows stay whole at 80 columns
    assert list(checkout.iterdir()) == []  # nothing written where it was run
    written = tmp_path / "tmp" / "pse-summaries" / "incident-review"
    assert (written / "rules_summary.md").read_text().strip() == out.strip()
    assert "rules_summary.json" in err
