"""The built-in `code-change` task and `make demo-repo` (issue 32, item 6): its cassette fixes the bug of the
small repository `scripts/demo_repo.py` builds, offline, and the person's uncommitted edit stays."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pse.config import Settings
from pse.exceptions import UserError
from pse.runner import prepare_run, run_to_end

ROOT = Path(__file__).resolve().parents[1]


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_repo", ROOT / "scripts" / "demo_repo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_the_cassette_fixes_the_demo_repository(tmp_path: Path) -> None:
    demo = _demo()
    repo = demo.make_demo_repo(tmp_path)
    status, head = _git(repo, "status", "--porcelain"), _git(repo, "rev-parse", "HEAD")
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
    assert (_git(repo, "status", "--porcelain"), _git(repo, "rev-parse", "HEAD")) == (status, head)
    assert _git(repo, "rev-list", f"{head.strip()}..{summary.branch}").split() == [summary.commit]
    assert _git(repo, "diff", "--name-only", head.strip(), summary.commit or "").split() == [
        "textstats/words.py"
    ]
    assert "+    return len(text.split())" in Path(summary.patch or "").read_text()


def test_code_change_needs_a_repository(tmp_path: Path) -> None:
    settings = Settings(runs_dir=tmp_path / "runs")  # type: ignore[call-arg]
    with pytest.raises(UserError, match="works on a git repository; fix: pass --repo PATH"):
        prepare_run("code-change", settings, inputs={"REQUEST": "anything"})
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
