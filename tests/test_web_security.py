"""Attacks on the dashboard, each performed for real against the app, each asserted contained.

The attacker writes run folders (model-driven tools do). The only trusted thing is the runs
directory itself.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pse.config import Settings
from pse.engine import Trace, load_trace, write_trace
from pse.web import create_app

LOCAL = "http://127.0.0.1"
SECRET = "TOP-SECRET"


def _trace(runs: Path, run_id: str, *, task: str = "task-a", outcome: str | None = "PASSED") -> Path:
    trace = Trace(run_id=run_id, task=task, started_at="2026-01-01T10:00:00.000+00:00")
    trace.outcome = outcome  # type: ignore[assignment]
    return write_trace(trace, runs / run_id)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host directory outside the runs directory, holding secrets the dashboard must never serve."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET, encoding="utf-8")
    # A host file that even parses as a trace, so following a symlink to it would "work".
    _trace(tmp_path, "host-trace", task=SECRET)
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A runs directory with one ordinary finished run, `run-1`, whose workspace holds `ok.txt`."""
    root = tmp_path / "runs"
    _trace(root, "run-1")
    (root / "run-1" / "workspace").mkdir()
    (root / "run-1" / "workspace" / "ok.txt").write_text("fine", encoding="utf-8")
    return root


def _client(runs: Path, token: str | None = None) -> TestClient:
    return TestClient(create_app(Settings(runs_dir=runs, web_token=token)), base_url=LOCAL)


def _listing(client: TestClient, run_id: str) -> list[str]:
    response = client.get(f"/api/runs/{run_id}/files")
    assert response.status_code == 200, response.text
    return [f["path"] for f in response.json()]


class _FifoWatch:
    """Notices whether anyone opens a FIFO for reading: it keeps trying to open the write end.

    Opening a FIFO's write end without blocking succeeds only while a reader has it open; then the
    watch records it and closes the write end, so a reader stuck in a blocking read gets EOF and the
    test goes on (and fails) instead of hanging.
    """

    def __init__(self, *fifos: Path) -> None:
        self.fifos = fifos
        self.opened: set[Path] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for fifo in self.fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    continue  # ENXIO: nobody is reading
                self.opened.add(fifo)
            self._stop.wait(0.005)

    def __enter__(self) -> _FifoWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class TestDashboardAttacks:
    """Each test is one attack on the dashboard; each asserts the attack was contained."""

    # ---- run folders written by tools -----------------------------------------------------------

    def test_symlinked_trace_json_serves_no_host_file(self, runs: Path, host: Path) -> None:
        (runs / "evil").mkdir()
        (runs / "evil" / "trace.json").symlink_to(host.parent / "host-trace" / "trace.json")
        with _client(runs) as client:
            for path in ("/api/runs/evil", "/api/runs/evil/events"):
                response = client.get(path)
                assert response.status_code == 404, path
                assert SECRET not in response.text
            history = client.get("/api/runs")
            assert [r["run_id"] for r in history.json()["runs"]] == ["run-1"]
            assert SECRET not in history.text and SECRET not in client.get("/api/stats").text
            resume = client.post("/api/runs/evil/resume")
            assert resume.status_code == 404 and SECRET not in resume.text
        with pytest.raises(FileNotFoundError):
            load_trace(runs / "evil", beneath=runs)

    def test_symlinked_workspace_lists_and_serves_nothing(self, runs: Path, host: Path) -> None:
        _trace(runs, "run-2", outcome=None)
        (runs / "run-2" / "workspace").symlink_to(host, target_is_directory=True)
        with _client(runs) as client:
            assert _listing(client, "run-2") == []
            response = client.get("/api/runs/run-2/files/secret.txt")
            assert response.status_code == 404 and SECRET not in response.text
            # Resuming would hand the run's tools the host directory as their workspace.
            resume = client.post("/api/runs/run-2/resume")
            assert resume.status_code == 409 and "not a real directory" in resume.json()["detail"]

    def test_symlinked_file_inside_the_workspace_is_not_followed(self, runs: Path, host: Path) -> None:
        (runs / "run-1" / "workspace" / "notes.txt").symlink_to(host / "secret.txt")
        with _client(runs) as client:
            assert _listing(client, "run-1") == ["ok.txt"]
            response = client.get("/api/runs/run-1/files/notes.txt")
            assert response.status_code == 404 and SECRET not in response.text
            assert client.get("/api/runs/run-1/files/ok.txt").text == "fine"

    def test_symlinked_intermediate_directory_is_not_followed(self, runs: Path, host: Path) -> None:
        (runs / "run-1" / "workspace" / "deep").mkdir()
        (runs / "run-1" / "workspace" / "deep" / "sub").symlink_to(host, target_is_directory=True)
        (runs / "run-1" / "workspace" / "deep" / "own.txt").write_text("mine", encoding="utf-8")
        with _client(runs) as client:
            assert _listing(client, "run-1") == ["ok.txt", "deep/own.txt"]
            response = client.get("/api/runs/run-1/files/deep/sub/secret.txt")
            assert response.status_code == 404 and SECRET not in response.text
            assert client.get("/api/runs/run-1/files/deep/own.txt").text == "mine"

    def test_fifos_are_never_opened_and_nothing_hangs(self, runs: Path) -> None:
        workspace_fifo = runs / "run-1" / "workspace" / "pipe"
        os.mkfifo(workspace_fifo)
        (runs / "fifo-run").mkdir()
        trace_fifo = runs / "fifo-run" / "trace.json"
        os.mkfifo(trace_fifo)
        with _FifoWatch(workspace_fifo, trace_fifo) as watch, _client(runs) as client:
            assert _listing(client, "run-1") == ["ok.txt"]
            assert client.get("/api/runs/run-1/files/pipe").status_code == 404
            assert [r["run_id"] for r in client.get("/api/runs").json()["runs"]] == ["run-1"]
            assert client.get("/api/stats").status_code == 200
            for path in ("/api/runs/fifo-run", "/api/runs/fifo-run/events"):
                assert client.get(path).status_code == 404, path
        assert watch.opened == set()


def test_run_files_reader_refuses_what_tools_can_plant(tmp_path: Path, host: Path) -> None:
    """The shared no-follow reader itself: every planted shape reads as absent, a regular file reads."""
    from pse._run_files import RunFileTooLarge, read_beneath, regular_files_beneath

    runs = tmp_path / "runs"
    ws = runs / "r" / "workspace"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "f.txt").write_text("ok", encoding="utf-8")
    (ws / "link").symlink_to(host / "secret.txt")
    (ws / "dirlink").symlink_to(host, target_is_directory=True)
    os.mkfifo(ws / "fifo")
    assert read_beneath(runs, ["r", "workspace", "d", "f.txt"], max_bytes=2) == b"ok"
    with pytest.raises(RunFileTooLarge):
        read_beneath(runs, ["r", "workspace", "d", "f.txt"], max_bytes=1)
    for parts in (["link"], ["dirlink", "secret.txt"], ["fifo"], ["d"], ["..", "..", "host", "secret.txt"]):
        with pytest.raises(FileNotFoundError):
            read_beneath(runs, ["r", "workspace", *parts], max_bytes=1024)
    assert regular_files_beneath(runs, ["r", "workspace"], max_files=10, max_depth=8) == [("d/f.txt", 2)]
    assert regular_files_beneath(runs, ["r", "workspace"], max_files=10, max_depth=0) == []
    # The runs directory itself is trusted, and may be reached through a symlink.
    (tmp_path / "runs-link").symlink_to(runs, target_is_directory=True)
    assert read_beneath(tmp_path / "runs-link", ["r", "workspace", "d", "f.txt"], max_bytes=2) == b"ok"
