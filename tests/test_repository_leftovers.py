"""What a repository run leaves in the person's repository, by how it ends, and `pse clean` as the way out
(issue 47, item 2).

Before, every failed run left a branch `pse/<id>` and a locked worktree behind (two after two tries), and
`pse clean` only pruned runs a week old. Now a run that ended for good (PASSED, ERROR, TIMEOUT, accepted
or closed by a person) takes itself out of the repository: no worktree, and a branch only when it holds
the run's commit. A run that can still go on (ESCALATED, waiting, cancelled) keeps both, and
`pse clean RUN_ID` removes them; plain `pse clean` says which runs still hold some.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import pse
from pse.config import Settings
from pse.runner import RunSummary, answer_run, prepare_run, run_to_end
from repo_support import BUGGY, FAIL, FIXED, git, make_repo, make_task, turns, user_state


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    make_task(tmp_path)
    return make_repo(tmp_path)


def _run(tmp_path: Path, repo: Path, script: list[dict[str, str]], **limits: Any) -> RunSummary:
    cassette = tmp_path / f"cassette-{len(list(tmp_path.glob('cassette-*')))}.json"
    cassette.write_text(json.dumps({"turns": script}))
    settings = Settings(  # type: ignore[call-arg]
        provider="scripted", cassette=cassette, runs_dir=tmp_path / "runs", tasks_dir=tmp_path / "tasks",
        sandbox="fallback", max_partial_retries=0, max_fail_retries=0, replay_strict=False, **limits,
    )  # fmt: skip
    return asyncio.run(run_to_end(prepare_run("fix-repo", settings, repo=repo)))


def _left(repo: Path) -> tuple[list[str], list[str]]:
    """The run branches and the run worktrees in the repository."""
    branches = [b for b in git(repo, "branch", "--format=%(refname:short)").split() if b.startswith("pse/")]
    worktrees = [line for line in git(repo, "worktree", "list").splitlines() if "[pse/" in line]
    return branches, worktrees


def _trace(summary: RunSummary) -> dict[str, Any]:
    return json.loads(Path(summary.trace).read_text())  # type: ignore[no-any-return]


def test_a_passed_run_leaves_its_branch_with_its_commit_and_no_worktree(tmp_path: Path, repo: Path) -> None:
    summary = _run(tmp_path, repo, turns({"calc/core.py": FIXED}))
    assert summary.outcome == "PASSED" and summary.commit is not None
    assert _left(repo) == ([summary.branch], [])
    git(repo, "checkout", "-q", summary.branch or "")  # no worktree holds it: the person can check it out
    assert (repo / "calc" / "core.py").read_text() == FIXED
    record = _trace(summary)["repository"]
    assert record["released"] is True
    assert record["note"].endswith("; the branch is all the run left in your repository")


def test_an_error_leaves_nothing_in_the_repository_and_the_diff_in_the_run_folder(
    tmp_path: Path, repo: Path
) -> None:
    before = user_state(repo)
    script = turns({"calc/core.py": BUGGY + "# half done\n"})[:3]  # the Evaluator has no turn: ERROR
    summary = _run(tmp_path, repo, script)
    assert summary.outcome == "ERROR", summary.outcome_reason
    assert _left(repo) == ([], []) and user_state(repo) == before
    assert "+# half done" in Path(summary.patch or "").read_text()
    run_dir = Path(summary.trace).parent
    assert (run_dir / "workspace" / "calc" / "core.py").read_text() == BUGGY + "# half done\n"
    assert _trace(summary)["repository"]["note"] == (
        "ERROR: nothing committed; change.patch holds the diff so far; nothing of the run is left in your "
        "repository"
    )


def test_a_timeout_leaves_nothing_either(tmp_path: Path, repo: Path) -> None:
    summary = _run(tmp_path, repo, turns({"calc/core.py": FIXED}), token_budget=1)
    assert summary.outcome == "TIMEOUT", summary.outcome_reason
    assert _left(repo) == ([], [])


def test_an_escalated_run_keeps_its_worktree_until_pse_clean_names_it(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = str(tmp_path / "runs")
    summary = _run(tmp_path, repo, turns({"calc/core.py": BUGGY + "# tried\n"}, FAIL))
    assert summary.outcome == "ESCALATED"
    branches, worktrees = _left(repo)
    assert branches == [summary.branch] and len(worktrees) == 1 and "locked" in git(repo, "worktree", "list")
    note = _trace(summary)["repository"]["note"]
    assert note.endswith(
        f"the run can go on, so its worktree and branch {summary.branch} stay in your repository "
        f"(`pse clean {summary.run_id}` removes them)"
    )
    lock = git(repo, "worktree", "list", "--porcelain")
    assert f"`pse clean {summary.run_id} --runs-dir {runs}` removes it" in lock  # what git itself shows

    code, out, _ = pse(monkeypatch, capsys, "clean", "--runs-dir", runs)  # nothing expired
    assert code == 0 and " ".join(out.split()) == (
        "removed 0 run(s) "
        f"1 run(s) can still go on, so each keeps a worktree and a branch pse/<run_id> in its repository: "
        f"{summary.run_id} in {repo}; `pse clean RUN_ID` removes one, `pse clean --all` every run"
    )
    code, out, _ = pse(monkeypatch, capsys, "clean", summary.run_id[:20], "--runs-dir", runs)
    assert code == 0 and out.splitlines() == ["removed 1 run(s)"]
    assert _left(repo) == ([], []) and not Path(summary.trace).parent.exists()


def test_closing_an_escalated_run_takes_it_out_of_the_repository(tmp_path: Path, repo: Path) -> None:
    summary = _run(tmp_path, repo, turns({"calc/core.py": BUGGY + "# tried\n"}, FAIL))
    settings = Settings(runs_dir=tmp_path / "runs", tasks_dir=tmp_path / "tasks")  # type: ignore[call-arg]
    trace = answer_run(summary.run_id, settings, decision="reject", by="a person")
    assert trace.repository is not None and trace.repository.released
    assert _left(repo) == ([], [])
    assert (Path(summary.trace).parent / "workspace" / "calc" / "core.py").is_file()


def test_pse_clean_of_a_passed_run_says_the_branch_with_its_commit_stays(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = _run(tmp_path, repo, turns({"calc/core.py": FIXED}))
    code, out, _ = pse(monkeypatch, capsys, "clean", "last", "--runs-dir", str(tmp_path / "runs"))
    assert code == 0 and " ".join(out.split()) == (
        "removed 1 run(s) "
        f"kept branch {summary.branch} in {repo}: it holds the run's commit {(summary.commit or '')[:12]}; "
        f"merge it, then `git -C {repo} branch -D {summary.branch}`"
    )
    assert _left(repo) == ([summary.branch], [])


def test_pse_clean_of_no_such_run_is_one_line_and_exit_2(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "runs").mkdir()
    code, _, err = pse(
        monkeypatch, capsys, "clean", "20990101-000000-x-abcdef", "--runs-dir", str(tmp_path / "runs")
    )
    assert code == 2
    assert "no run '20990101-000000-x-abcdef' in" in err and "`pse trace list` shows the runs" in err


def test_a_batch_lists_only_the_branches_left_in_the_repository(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = tmp_path / "batch.json"
    cassette.write_text(json.dumps({"turns": turns({"calc/core.py": BUGGY + "#\n"})[:3]}))  # each row: ERROR
    for name, value in (("PSE_SANDBOX", "fallback"), ("PSE_CASSETTE", str(cassette)),
                        ("PSE_REPLAY_STRICT", "false"), ("PSE_PROVIDER", "scripted")):  # fmt: skip
        monkeypatch.setenv(name, value)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    _, out, _ = pse(
        monkeypatch, capsys, "batch", "fix-repo", "--inputs", str(rows), "--repo", str(repo),
        "--runs-dir", str(tmp_path / "runs"), "--tasks-dir", str(tmp_path / "tasks"), "--json",
    )  # fmt: skip
    summary = json.loads(out)
    assert summary["outcomes"] == {"ERROR": 1}
    assert summary["branches"] == [] and summary["runs"][0]["branch"] is None  # no branch is left to name
    assert _left(repo) == ([], [])
