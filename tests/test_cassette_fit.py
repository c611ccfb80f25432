"""A cassette fits only the run it was recorded on (issue 47, item 1): no fake work on a user's repository.

Before, `pse run code-change --repo <another repository>` with no model replayed the demo's cassette: a plan
about `word_count`, `textstats/words.py` written into the person's repository, a PASS the gates caught, and an
ERROR blaming the cassette. Now a cassette that says what it was recorded on (`recorded_on`: the inputs and
the repository's tree) is refused on anything else, before the run starts: nothing is left behind.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pse.config import Settings, load_settings
from pse.exceptions import CassetteError
from pse.models import Cassette
from pse.runner import prepare_run, run_to_end
from repo_support import git, load_demo, make_repo, user_state

ROOT = Path(__file__).resolve().parents[1]


def _left_behind(runs: Path, repo: Path) -> tuple[list[str], str, str]:
    """What a refused run left: run folders, the repository's branches, its worktrees."""
    folders = sorted(p.name for p in runs.iterdir()) if runs.exists() else []
    return folders, git(repo, "branch", "--format=%(refname:short)"), git(repo, "worktree", "list")


def test_code_change_with_no_model_on_another_repository_is_refused_before_it_starts(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    before = user_state(repo)
    settings = Settings(runs_dir=tmp_path / "runs", sandbox="fallback")  # type: ignore[call-arg]
    with pytest.raises(CassetteError) as refused:
        prepare_run("code-change", settings, inputs={"REQUEST": "make add add"}, repo=repo)
    said = str(refused.value)
    assert said.startswith("task 'code-change' needs a model on your repository: no model is configured")
    assert "it was recorded on another repository (tree 25330194db31)" in said
    assert str(ROOT / "tasks" / "code-change" / "cassette.json") in said  # the real path, not a relative one
    assert said.endswith(
        "fix: configure a model (PSE_PROVIDER, PSE_BASE_URL / PSE_API_KEY; `pse doctor` checks it)"
    )
    assert _left_behind(tmp_path / "runs", repo) == ([], "main\n", git(repo, "worktree", "list"))
    assert git(repo, "worktree", "list").count("\n") == 1  # the repository's own working tree only
    assert user_state(repo) == before


def test_the_demo_repository_with_another_request_is_refused_too(tmp_path: Path) -> None:
    repo = load_demo().make_demo_repo(tmp_path)
    settings = Settings(runs_dir=tmp_path / "runs", sandbox="fallback")  # type: ignore[call-arg]
    with pytest.raises(CassetteError, match=r"it was recorded with REQUEST='word_count counts empty strings"):
        prepare_run("code-change", settings, inputs={"REQUEST": "add a line count"}, repo=repo)
    assert _left_behind(tmp_path / "runs", repo)[:2] == ([], "main\n")


def test_a_task_cassette_replays_only_its_own_inputs_without_a_repository(tmp_path: Path) -> None:
    settings = Settings(runs_dir=tmp_path / "runs")  # type: ignore[call-arg]
    with pytest.raises(CassetteError) as refused:
        prepare_run("incident-review", settings, inputs={"service": "search-api"})
    assert str(refused.value).startswith("task 'incident-review' needs a model for these inputs:")
    assert "it was recorded with service='payment-api'" in str(refused.value)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_cassette_passed_on_the_command_line_names_itself_and_what_differs(tmp_path: Path) -> None:
    cassette = ROOT / "tasks" / "code-delivery" / "cassette.json"
    repo = make_repo(tmp_path)
    settings = Settings(runs_dir=tmp_path / "runs", cassette=cassette, sandbox="fallback")  # type: ignore[call-arg]
    with pytest.raises(CassetteError) as refused:
        prepare_run("code-delivery", settings, repo=repo)
    assert str(refused.value).startswith(
        f"cassette {cassette} replays only what it was recorded on (it was recorded without a repository); "
        "fix: run with the inputs and repository it was recorded on, record a cassette on these"
    )
    assert _left_behind(tmp_path / "runs", repo)[:2] == ([], "main\n")


def test_a_recording_notes_its_inputs_and_repository_and_replays_on_them_only(tmp_path: Path) -> None:
    demo = load_demo()
    repo = demo.make_demo_repo(tmp_path / "a")
    recording = tmp_path / "recorded.json"
    settings = load_settings(runs_dir=tmp_path / "runs", record=recording, sandbox="fallback")
    first = asyncio.run(
        run_to_end(prepare_run("code-change", settings, inputs={"REQUEST": demo.REQUEST}, repo=repo))
    )
    assert first.outcome == "PASSED", first.outcome_reason
    noted = Cassette.from_file(recording).recorded_on
    assert noted is not None and noted.inputs == {"REQUEST": demo.REQUEST}
    assert noted.repository == git(repo, "rev-parse", "HEAD^{tree}").strip()

    # The same repository built again elsewhere (another folder, another history) is the same tree: it replays.
    again = demo.make_demo_repo(tmp_path / "b")
    replay = load_settings(runs_dir=tmp_path / "runs", cassette=recording, sandbox="fallback")
    second = asyncio.run(
        run_to_end(prepare_run("code-change", replay, inputs={"REQUEST": demo.REQUEST}, repo=again))
    )
    assert second.outcome == "PASSED", second.outcome_reason

    # One byte more in the repository, and it does not.
    (again / "README.md").write_text("# textstats, changed\n")
    git(again, "commit", "-q", "-am", "another README")
    with pytest.raises(
        CassetteError, match=r"replays only what it was recorded on \(it was recorded on another"
    ):
        prepare_run("code-change", replay, inputs={"REQUEST": demo.REQUEST}, repo=again)


def test_a_hand_written_cassette_without_recorded_on_replays_anywhere(tmp_path: Path) -> None:
    """`recorded_on` is optional: a cassette someone wrote by hand says nothing, and fits anything."""
    data = json.loads((ROOT / "tasks" / "incident-review" / "cassette.json").read_text())
    assert data.pop("recorded_on") == {"inputs": {"service": "payment-api"}, "repository": None}
    cassette = tmp_path / "by-hand.json"
    cassette.write_text(json.dumps(data))
    settings = Settings(runs_dir=tmp_path / "runs", cassette=cassette, replay_strict=False)  # type: ignore[call-arg]
    prepared = prepare_run("incident-review", settings, inputs={"service": "search-api"})
    assert prepared.run_dir.is_dir()
