"""The built-in `code-change` task and `make demo-repo` (issue 32, item 6): its cassette fixes the bug of the
small repository `scripts/demo_repo.py` builds, offline, and the person's uncommitted edit stays."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from pse.config import Settings
from pse.exceptions import UserError
from pse.runner import prepare_run, run_to_end
from repo_support import git, load_demo


def test_the_cassette_fixes_the_demo_repository(tmp_path: Path) -> None:
    demo = load_demo()
    repo = demo.make_demo_repo(tmp_path)
    status, head = git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")
    failing = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=repo,
        capture_output=True,
    )
    assert failing.returncode == 1  # the bug is real: the repository fails its own tests
    settings = Settings(runs_dir=tmp_path / "runs", sandbox="fallback")  # type: ignore[call-arg]
    prepared = prepare_run("code-change", settings, inputs={"REQUEST": demo.REQUEST}, repo=repo)
    summary = asyncio.run(run_to_end(prepared))

    assert summary.outcome == "PASSED", summary.outcome_reason
    assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")) == (status, head)
    assert git(repo, "rev-list", f"{head.strip()}..{summary.branch}").split() == [summary.commit]
    assert git(repo, "diff", "--name-only", head.strip(), summary.commit or "").split() == [
        "textstats/words.py"
    ]
    assert "+    return len(text.split())" in Path(summary.patch or "").read_text()


def test_code_change_needs_a_repository(tmp_path: Path) -> None:
    settings = Settings(runs_dir=tmp_path / "runs")  # type: ignore[call-arg]
    with pytest.raises(UserError, match="works on a git repository; fix: pass --repo PATH"):
        prepare_run("code-change", settings, inputs={"REQUEST": "anything"})
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_make_demo_repo_says_its_folder_goes_and_how_to_keep_it(tmp_path: Path) -> None:
    """Issue 47, item 8: the demo printed a patch path deleted when it exited, and never said --keep DIR."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "demo_repo.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    patch = next(line for line in done.stdout.splitlines() if line.startswith("patch:"))
    assert patch.endswith(" (in the temporary folder; printed here, as it goes when the demo ends)")
    assert not Path(patch.split()[1]).exists()  # gone, as it says
    last = done.stdout.strip().splitlines()[-1]
    assert last.endswith(
        "removed now; to keep them and look around, run make demo-repo DEMO_REPO_ARGS='--keep DIR' "
        "(or python scripts/demo_repo.py --keep DIR)"
    )
    kept = subprocess.run(
        [sys.executable, str(script), "--keep", str(tmp_path / "kept")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert kept.returncode == 0, kept.stderr
    patch = next(line for line in kept.stdout.splitlines() if line.startswith("patch:"))
    assert Path(patch.split()[1]).is_file() and "--keep DIR" not in kept.stdout
