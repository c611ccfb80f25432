"""The dashboard's Start form on a repository (issue 32): only a repository the server was started with
(`pse serve --repo PATH`, an allow-list), with a base ref; anything else is refused with the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from browser_support import (
    AXE,
    CHROMIUM,
    CHROMIUM_ARGS,
    Watch,
    axe_violations,
    free_port,
    needs_chromium,
    serving,
)
from cli_support import pse
from pse.config import Settings
from pse.exceptions import UserError
from pse.web import create_app
from repo_support import FIXED, TASK, git, make_repo, make_task, turns, user_state

LOCAL = "http://127.0.0.1"


def _settings(tmp_path: Path, tasks: Path) -> Settings:
    return Settings(
        runs_dir=tmp_path / "runs", tasks_dir=tasks, provider="scripted", sandbox="fallback",
        max_partial_retries=0, max_fail_retries=0, replay_strict=False,
    )  # type: ignore[arg-type]  # fmt: skip


def _events(client: TestClient, run_id: str) -> list[str]:
    with client.stream("GET", f"/api/runs/{run_id}/events") as response:
        return [line for line in response.iter_lines() if line.startswith("data: ")]


def test_a_run_starts_on_an_allowed_repository_and_on_no_other(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo, "checkout", "-q", "-b", "work")  # the person's own branch, left as it is
    (repo / "notes.txt").write_text("mine, uncommitted\n")
    tasks = make_task(tmp_path)
    (tasks / TASK / "cassette.json").write_text(json.dumps({"turns": turns({"calc/core.py": FIXED})}))
    before = user_state(repo)
    allowed = str(repo.resolve())
    with TestClient(
        create_app(_settings(tmp_path, tasks), repositories=[repo, repo]), base_url=LOCAL
    ) as client:
        assert client.get("/api/repositories").json() == {"repositories": [allowed]}
        start = {"task": TASK, "cassette": "cassette.json"}
        elsewhere = make_repo(tmp_path / "other")  # a real repository, just not one this server allows
        refused = client.post("/api/runs", json={**start, "repo": str(elsewhere)})
        assert refused.status_code == 400
        assert refused.json()["detail"] == (
            f"this server may not work on the repository {str(elsewhere)!r} (it allows: {allowed}); fix: "
            f"restart the dashboard with pse serve --repo {elsewhere} (repeat --repo for more), or pick an "
            "allowed one"
        )
        assert client.post("/api/runs", json={**start, "repo": allowed + "/"}).status_code == 400  # exactly
        alone = client.post("/api/runs", json={**start, "base": "main"})
        assert alone.status_code == 400 and "a base ref needs a repository" in alone.json()["detail"]
        for bad in ("--upload-pack=x", "main branch", "a" * 201):
            assert client.post("/api/runs", json={**start, "repo": allowed, "base": bad}).status_code == 422
        missing = client.post("/api/runs", json={**start, "repo": allowed, "base": "nope"})
        assert missing.status_code == 400 and "no such commit" in missing.json()["detail"]
        assert git(elsewhere, "branch", "--list", "pse/*") == ""
        assert [p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()] == []  # nothing was left

        started = client.post("/api/runs", json={**start, "repo": allowed, "base": "main"})
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        ended = [json.loads(line.removeprefix("data: ")) for line in _events(client, run_id)]
        assert [e.get("outcome") for e in ended if e.get("kind") == "outcome"] == ["PASSED"], ended[-3:]
        # what the page fetches once the stream ends: the change is committed before the outcome is sent
        shown = client.get(f"/api/runs/{run_id}").json()["repository"]
        assert shown["branch"] == f"pse/{run_id}" and shown["commit"] and shown["patch"]
        assert git(repo, "rev-parse", shown["branch"]).strip() == shown["commit"]
        patch = client.get(f"/api/runs/{run_id}/patch")  # the run page's Repository section (issue 47)
        assert patch.status_code == 200 and patch.text == Path(shown["patch"]).read_text()
        assert patch.headers["content-security-policy"] == "sandbox"
        assert patch.headers["content-type"] == "text/plain; charset=utf-8"
    trace = json.loads((tmp_path / "runs" / run_id / "trace.json").read_text())
    assert trace["repository"]["branch"] == f"pse/{run_id}" and trace["repository"]["commit"]
    assert git(repo, "show", f"pse/{run_id}:calc/core.py") == FIXED
    assert git(repo, "merge-base", f"pse/{run_id}", "main") == git(repo, "rev-parse", "main")
    assert user_state(repo) == before  # the person's branch, working tree, index and stash untouched


def test_without_an_allowed_repository_a_repository_task_says_how_to_allow_one(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(runs_dir=tmp_path / "runs")), base_url=LOCAL) as client:
        assert client.get("/api/repositories").json() == {"repositories": []}
        tasks = {t["name"]: t for t in client.get("/api/tasks").json()}
        assert tasks["code-change"]["warnings"][0] == (
            "code-change works on a git repository, and this server allows none: restart it with pse serve "
            "--repo PATH to pick one here, or run pse run code-change --repo PATH"  # its subject (issue 47)
        )
    repo = make_repo(tmp_path)
    with TestClient(
        create_app(Settings(runs_dir=tmp_path / "runs"), repositories=[repo]), base_url=LOCAL
    ) as client:
        tasks = {t["name"]: t for t in client.get("/api/tasks").json()}
        assert not any("git repository" in w for w in tasks["code-change"]["warnings"])


def test_pse_serve_refuses_a_repository_that_is_not_one_before_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UserError, match="no such folder"):
        create_app(Settings(runs_dir=tmp_path / "runs"), repositories=[tmp_path / "nowhere"])
    (tmp_path / "plain").mkdir()
    code, _, said = pse(monkeypatch, capsys, "serve", "--runs-dir", str(tmp_path / "runs"), "--port", str(free_port()),
                        "--repo", str(tmp_path / "plain"))  # fmt: skip
    assert code == 2 and f"--repo {tmp_path / 'plain'} is not a git repository" in said


@needs_chromium
def test_the_start_form_offers_the_allowed_repositories_and_a_base_ref(tmp_path: Path) -> None:
    """In Chromium: the Repository field lists what the server allows, the Base ref field comes with a
    repository, a bad ref is refused in the page's alert, and a good one starts the run on its branch."""
    from playwright.sync_api import expect, sync_playwright

    repo = make_repo(tmp_path)
    tasks = make_task(tmp_path)
    (tasks / TASK / "cassette.json").write_text(json.dumps({"turns": turns({"calc/core.py": FIXED})}))
    app = create_app(_settings(tmp_path, tasks), repositories=[repo])
    with serving(app, "pse-web-repository") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.watch = Watch(page, ("400 (Bad Request)",))
        page.goto(f"{url}/")
        page.select_option("#start-task", TASK)
        expect(page.locator("#start-repo option")).to_have_text(
            ["none (a fresh workspace)", str(repo.resolve())]
        )
        expect(page.locator("#start-base")).to_have_count(0)
        page.select_option("#start-repo", str(repo.resolve()))
        page.fill("#start-base", "nope")
        if AXE.is_file():
            assert axe_violations(page) == []
        page.click("#start-button")
        expect(page.locator("#start-error")).to_contain_text(
            "Could not start fix-repo: --base nope: no such commit"
        )
        page.fill("#start-base", "main")
        page.click("#start-button")
        expect(page).to_have_url(re.compile(r"#/run/\d{8}-\d{6}-fix-repo-[0-9a-f]{6}$"))
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        run_id = page.url.rsplit("/", 1)[1]
        assert page.watch.problems == []
        browser.close()
    assert git(repo, "show", f"pse/{run_id}:calc/core.py") == FIXED
