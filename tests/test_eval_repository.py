"""`pse eval` on a repository (issue 32, item 3: "a suite may hold tests no role ever sees"): a suite's
`repo` makes every instance a repository run, a worktree of its own on its own branch, and after the run
the instance's hidden check judges the delivered worktree. The hidden tests live in the suite's `hidden/`
folder, outside the repository: no role's prompt, message or tool output ever holds them.

The built-in `code-change` task and its cassette (which fixes `make demo-repo`'s repository) run for real,
in both sandbox modes; only the hidden tests differ between the two instances.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cli_support import pse
from pse.sandbox import bwrap_problem
from repo_support import git, load_demo

ROOT = Path(__file__).resolve().parents[1]
CASSETTE = ROOT / "tasks" / "code-change" / "cassette.json"
CANARY = "HIDDEN-REPO-CANARY"
HIDDEN = '''"""{canary}: word_count of the delivered repository, on a case no role was shown.

The delivered code runs in a child process; this one only reads what it printed (docs/eval.md).
"""
import subprocess, sys
code = "import sys; sys.path.insert(0, sys.argv[1]); from textstats import word_count; print(word_count(sys.argv[2]))"
done = subprocess.run([sys.executable, "-I", "-c", code, sys.argv[1], {text!r}], capture_output=True, text=True)
got = done.stdout.strip()
if done.returncode != 0 or got != "{count}":
    sys.exit(f"word_count({text!r}) gave {{got or done.stderr[-300:]}}, not {count}")
print("hidden check passed")
'''


def _suite(folder: Path, demo: ModuleType, extra: str = "") -> Path:
    """A suite on the demo repository: `tabs` (the fix splits on tabs too: a true pass) and `hyphens`
    (a hidden test the fix does not meet: the run claims PASSED, the hidden check refuses it)."""
    (folder / "hidden").mkdir(parents=True)
    demo.make_demo_repo(folder)  # folder/textstats, beside hidden/
    (folder / "suite.toml").write_text(
        f'task = "code-change"\ndescription = "textstats fixes, judged by hidden tests"\nrepo = "textstats"\n{extra}'
    )
    checks = {"tabs": ("a\tb  c", 3), "hyphens": ("well-known words", 3)}
    lines = []
    for name, (text, count) in checks.items():
        (folder / "hidden" / f"test_{name}.py").write_text(
            HIDDEN.format(canary=CANARY, text=text, count=count)
        )
        lines.append(
            {
                "id": name,
                "inputs": {"REQUEST": demo.REQUEST},
                "hidden_check": ["python", f"{{hidden}}/test_{name}.py", "{workspace}"],
            }
        )
    (folder / "instances.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def _seen(trace: dict[str, Any]) -> str:
    """Everything the run's roles saw: the task message, every message, every tool call and output."""
    seen = [trace["task_message"]] + [m["content"] for c in trace["cycles"] for m in c["messages"]]
    calls = [t for c in trace["cycles"] for t in c["tool_calls"]]
    return json.dumps(seen + [t["output"] for t in calls] + [t["arguments"] for t in calls])


@pytest.mark.parametrize("mode", ["bwrap", "fallback"])
def test_a_hidden_test_judges_the_delivered_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    if mode == "bwrap" and bwrap_problem() is not None:
        pytest.skip(f"bwrap unusable here: {bwrap_problem()}")
    demo = load_demo()
    suite = _suite(tmp_path / "suite", demo)
    repo = suite / "textstats"
    head, status = git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")
    cassettes = tmp_path / "c" / "pse"
    cassettes.mkdir(parents=True)
    for instance in ("tabs", "hyphens"):
        (cassettes / f"{instance}.json").write_text(CASSETTE.read_text())
    monkeypatch.setenv("PSE_SANDBOX", mode)
    out, runs = tmp_path / "eval", tmp_path / "runs"
    code, stdout, stderr = pse(
        monkeypatch, capsys, "eval", str(suite), "--arms", "pse", "--cassettes", str(tmp_path / "c"),
        "--out", str(out), "--runs-dir", str(runs), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    rows = {
        json.loads(line)["instance"]: json.loads(line)
        for line in (out / "results.jsonl").read_text().splitlines()
    }
    tabs, hyphens = rows["tabs"], rows["hyphens"]
    assert (tabs["claimed_outcome"], tabs["hidden"]["passed"], tabs["true_pass"]) == ("PASSED", True, True)
    assert "hidden check passed" in tabs["hidden"]["output"]
    # the same delivered change, a hidden test it does not meet: claimed PASSED, not a true pass
    assert (hyphens["claimed_outcome"], hyphens["hidden"]["passed"]) == ("PASSED", False)
    assert (hyphens["true_pass"], hyphens["false_pass"]) == (False, True)
    assert "word_count('well-known words') gave 2, not 3" in hyphens["hidden"]["output"]
    arm = json.loads(stdout)["arms"]["pse"]
    assert (arm["true_passes"], arm["escaped_defects"]) == (1, 1)

    branches = set()
    for row in rows.values():
        trace = json.loads((runs / row["run_id"] / "trace.json").read_text())
        assert trace["sandbox"]["mode"] == mode
        record = trace["repository"]
        assert record["path"] == str(repo.resolve()) and record["branch"] == f"pse/{row['run_id']}"
        assert git(repo, "rev-parse", record["branch"]).strip() == record["commit"]  # each its own commit
        branches.add(record["branch"])
        text = _seen(trace)
        assert CANARY not in text and "test_hyphens" not in text and str(suite / "hidden") not in text
    assert len(branches) == 2
    assert (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")) == (head, status)


def test_a_hidden_folder_inside_the_repository_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = load_demo()
    suite = _suite(tmp_path / "suite", demo, extra='base = "main"\n')
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text().replace('"textstats"', '"."'))
    git(suite.parent, "init", "-q", str(suite))  # the suite folder itself a repository: it holds hidden/
    git(
        suite,
        "-c",
        "user.name=P",
        "-c",
        "user.email=p@example.org",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    code, _, err = pse(monkeypatch, capsys, "eval", "validate", str(suite))
    assert code == 2 and "the hidden folder is inside the repository" in err


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('repo = "nowhere"\n', "repo: --repo "),
        ('base = "main"\n', "a base ref is given, and the suite names no repository"),
    ],
)
def test_a_bad_repository_suite_is_reported(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    line: str,
    problem: str,
) -> None:
    suite = tmp_path / "suite"
    (suite / "hidden").mkdir(parents=True)
    (suite / "hidden" / "check.py").write_text("")
    (suite / "suite.toml").write_text('task = "code-change"\n' + line)
    row = {"id": "a", "inputs": {"REQUEST": "r"}, "hidden_check": ["python", "{hidden}/check.py"]}
    (suite / "instances.jsonl").write_text(json.dumps(row) + "\n")
    code, _, err = pse(monkeypatch, capsys, "eval", "validate", str(suite))
    assert code == 2 and problem in err


def test_the_direct_column_is_refused_on_a_repository_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One model request judged on one solution.py means nothing where every instance is a change to a
    repository: `--arms direct` stops before anything runs, naming the fix."""
    suite = _suite(tmp_path / "suite", load_demo())
    out, runs = tmp_path / "eval", tmp_path / "runs"
    code, _, err = pse(
        monkeypatch, capsys, "eval", str(suite), "--arms", "pse,direct", "--out", str(out), "--runs-dir", str(runs)
    )  # fmt: skip
    assert code == 2
    assert " ".join(err.split()) == (  # one line, which the console may wrap
        "error: --arms direct: suite suite is a repository suite (repo = textstats), and the direct column "
        "judges one solution.py, not a change to a repository; drop direct from --arms (the arms are: pse, "
        "single, pse-nogates, pse-history)"
    )
    assert not out.exists() and not runs.exists()  # nothing written for a call that cannot run
    # on another suite it is no arm at all, and says where the column lives
    code, _, err = pse(monkeypatch, capsys, "eval", "humaneval", "--arms", "direct", "--out", str(out))
    assert code == 2 and "direct is not an arm of pse eval but make eval-local's bare-model column" in err
