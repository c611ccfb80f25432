"""A newcomer's third pass at the CLI (issue 47, item 8): the rough edges, each as they met it and as it is.

- piped output wrapped at 80 columns: `trace:` / `report:` paths on lines of their own, the no-model notice
  broken mid-sentence; now a line of text sent to a program is whole (tables keep their width);
- `pse tasks` suggested `stats`; now `list`;
- cost read "0.0000 USD" on one row and "unpriced" on the others, and `pse stats` said "cost per passed run
  0.0000 USD" when no run had a price;
- `pse validate` warned of the built-in humaneval task on a fresh clone;
- report.md listed no criteria, findings or where the delivered files are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import pse
from pse.config import Settings
from pse.runner import prepare_run, run
from pse.runner import run_to_end as _run_to_end


def _piped(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`pse ARGS` as a program that reads its output sees it: a pipe, and no COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS" and not k.startswith("PSE_")}
    env["PSE_KB_BACKEND"] = "offline"
    return subprocess.run(
        [sys.executable, "-c", "from pse.cli import main; main()", *args],
        capture_output=True, text=True, cwd=cwd, env=env, check=False,
    )  # fmt: skip


def test_piped_output_keeps_each_line_whole(tmp_path: Path) -> None:
    done = _piped("run", "code-delivery", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    notice = next(line for line in done.stderr.splitlines() if line.startswith("No model configured"))
    assert notice.endswith("(set PSE_PROVIDER / PSE_API_KEY for a real model).")  # one line, not broken
    trace = next(line for line in lines if line.startswith("trace:"))
    report = next(line for line in lines if line.startswith("report:"))
    assert trace.split()[1].endswith("/trace.json") and Path(trace.split()[1]).is_file()
    assert report.split()[1].endswith("/report.md") and Path(report.split()[1]).is_file()
    assert max(len(line) for line in lines if "┃" in line or "│" in line) <= 80  # the table keeps its width


def test_pse_tasks_suggests_pse_list(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = pse(monkeypatch, capsys, "tasks")
    assert code == 2
    assert "No such command 'tasks'. Did you mean 'list'? (pse list: List the tasks you can run.)" in err
    assert "stats" not in err
    code, _, err = pse(monkeypatch, capsys, "statz")  # a misspelling still gets click's closest name
    assert code == 2 and "Did you mean 'stats'?" in err


def test_cost_is_unpriced_or_a_dash_never_a_free_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    run("code-delivery", runs_dir=runs)  # scripted: tokens, no price
    down = Settings(  # type: ignore[call-arg]
        runs_dir=runs, provider="openai", model="m", base_url="http://127.0.0.1:9/v1", model_max_retries=0
    )
    import asyncio

    stopped = asyncio.run(_run_to_end(prepare_run("code-delivery", down)))  # no call answered: nothing spent
    assert stopped.outcome == "ERROR" and stopped.tokens.total == 0
    code, out, _ = pse(monkeypatch, capsys, "trace", "list", "--runs-dir", str(runs))
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()[:1].isdigit()}
    assert len(rows) == 2
    assert "—" in rows[stopped.run_id] and "0.0000" not in out
    assert sum("unpriced" in row for row in rows.values()) == 1
    code, out, _ = pse(monkeypatch, capsys, "stats", "--runs-dir", str(runs))
    assert code == 0 and "0.0000" not in out
    row = next(line for line in out.splitlines() if "cost per passed run" in line)
    assert row.split("cost per passed run")[1].strip() == "unpriced (no model has a price; set PSE_PRICES)"


def test_validate_on_a_fresh_clone_warns_of_nothing_built_in(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = pse(monkeypatch, capsys, "validate")
    assert (code, err) == (0, "") and out.strip() == "ok: all tasks valid"
    code, out, err = pse(monkeypatch, capsys, "validate", "humaneval")  # named: it says what it needs
    assert code == 0 and "task 'humaneval' cannot run offline" in " ".join(err.split())


def test_report_md_lists_the_criteria_the_findings_and_where_the_files_are(tmp_path: Path) -> None:
    summary = run("code-delivery", runs_dir=tmp_path / "runs")
    report = Path(summary.report or "").read_text()
    workspace = Path(summary.trace).parent / "workspace"
    criteria = report.split("## Criteria\n\n")[1].split("\n\n")[0].splitlines()
    assert [line.split(":")[0] for line in criteria] == ["- ✓ AC1", "- ✓ AC2", "- ✓ AC3", "- ✓ AC4"]
    assert criteria[2] == (
        "- ✓ AC3: pytest passes on the workspace — pytest: 11 passed, the task's acceptance tests included"
    )
    assert f"## Delivered files\n\n- the workspace: {workspace} (quicksort.py, test_quicksort.py)\n" in report
    assert report.index("## Delivered files") < report.index("## The Specialist's last report")
    assert "## Findings" not in report  # the verdict had none: no empty section
