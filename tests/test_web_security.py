"""Attacks on the dashboard, each performed for real against the app, each asserted contained.

The attacker writes run folders (model-driven tools do), or drives the user's browser from another
site, a sandboxed iframe or a `data:` page, or sends oversized requests without the token. The only
trusted thing is the runs directory itself.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pse.config import Settings
from pse.engine import Trace, load_trace, write_trace
from pse.web import create_app
from pse.web._app import STATIC_DIR
from pse.web._security import CSRF_HEADER, MAX_REQUEST_BODY_BYTES

LOCAL = "http://127.0.0.1"
TOKEN = "s3cret-token-for-the-tests-0123456789"
SECRET = "TOP-SECRET"
OURS = {CSRF_HEADER: "1"}
"""What the dashboard's own front-end adds to every state-changing call."""
HUGE = 400 * 1024 * 1024
"""The declared size of the oversized bodies: 400 MiB, which the server must never pull."""
CHUNK = 1024


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


def _outcome(client: TestClient, run_id: str) -> dict[str, object]:
    """The run's outcome event, read from its SSE stream (which ends with it, then `end`)."""
    with client.stream("GET", f"/api/runs/{run_id}/events") as response:
        datas = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    outcome: dict[str, object] = json.loads(datas[-2])
    return outcome


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


async def _asgi(
    app: FastAPI, method: str, path: str, headers: dict[str, str], body: Iterator[bytes]
) -> tuple[int, int]:
    """Send one request straight to the ASGI app; return (status, body bytes the app pulled).

    `body` is pulled one chunk per `receive()`, so the count is exactly what the server asked for.
    """
    pulled = 0
    statuses: list[int] = []

    async def receive() -> dict[str, object]:
        nonlocal pulled
        chunk = next(body, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(int(message["status"]))  # type: ignore[call-overload]

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1", **headers}.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }
    await app(scope, receive, send)  # type: ignore[arg-type]
    (status,) = statuses
    return status, pulled


def _oversized() -> Iterator[bytes]:
    """A body 64 times the limit, in 1 KiB chunks: big enough to show a cap, finite should one fail."""
    return itertools.repeat(b"x" * CHUNK, 64 * MAX_REQUEST_BODY_BYTES // CHUNK)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve(runs: Path) -> Iterator[tuple[int, int]]:
    """Two real uvicorn servers on loopback over `runs`: (port without a token, port with TOKEN)."""
    import uvicorn

    servers, threads, ports = [], [], []
    for token in (None, TOKEN):
        port = _free_port()
        app = create_app(Settings(runs_dir=runs, web_token=token))
        srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=srv.run, name=f"pse-web-attack-{port}")
        thread.start()
        servers.append(srv)
        threads.append(thread)
        ports.append(port)
    for srv, thread in zip(servers, threads, strict=True):
        while not srv.started:
            if not thread.is_alive():
                raise RuntimeError("the dashboard server did not start")
            time.sleep(0.02)
    try:
        yield ports[0], ports[1]
    finally:
        for srv in servers:
            srv.should_exit = True
        for thread in threads:
            thread.join()


def _declare_huge_body_and_send_none(port: int, path: str, extra: str = "") -> int:
    """Send only the headers of a POST declaring a 400 MiB body; return the status the server answers.

    The server can only answer by deciding before reading: not one body byte is ever sent. (Should it
    wait for the body instead, the socket timeout turns that into a test failure.)
    """
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {HUGE}\r\n{extra}\r\n"
            ).encode()
        )
        status_line = sock.makefile("rb").readline().decode()
    return int(status_line.split()[1])


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
            resume = client.post("/api/runs/evil/resume", headers=OURS)
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
            resume = client.post("/api/runs/run-2/resume", headers=OURS)
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

    # ---- the user's browser, driven by someone else's page ---------------------------------------

    def test_origin_null_cannot_cancel_resume_or_start(self, runs: Path) -> None:
        with _client(runs) as client:
            started = client.post("/api/runs", json={"task": "code-delivery"}, headers=OURS)
            assert started.status_code == 201
            run_id = started.json()["run_id"]
            for headers in ({}, OURS, {"Content-Type": "application/json"}):
                null = {"Origin": "null", **headers}
                for action in ("cancel", "resume"):
                    response = client.post(f"/api/runs/{run_id}/{action}", headers=null)
                    assert response.status_code == 403, (action, headers)
                    assert "Origin: null" in response.json()["detail"]
            again = client.post("/api/runs", json={"task": "code-delivery"}, headers={"Origin": "null"})
            assert again.status_code == 403
            assert _outcome(client, run_id)["outcome"] == "PASSED"  # never cancelled
            started = [p.name for p in runs.iterdir() if p.is_dir() and p.name != "run-1"]
            assert started == [run_id]  # nothing else started

    @pytest.mark.parametrize(
        ("headers", "status"),
        [
            ({}, 403),  # a no-cors fetch or a form with no body
            ({"Content-Type": "text/plain"}, 415),
            ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
            ({"Content-Type": "multipart/form-data; boundary=x"}, 415),
        ],
    )
    def test_a_post_without_json_or_the_custom_header_is_refused(
        self, runs: Path, headers: dict[str, str], status: int
    ) -> None:
        _trace(runs, "run-2", task="code-delivery", outcome=None)
        with _client(runs) as client:
            started = client.post("/api/runs", json={"task": "code-delivery"}, headers=OURS)
            live = started.json()["run_id"]
            assert client.post(f"/api/runs/{live}/cancel", headers=headers).status_code == status
            assert client.post("/api/runs/run-2/resume", headers=headers).status_code == status
            form = client.post("/api/runs", content=b'{"task": "code-delivery"}', headers=headers)
            assert form.status_code == status
            assert _outcome(client, live)["outcome"] == "PASSED"  # the cancel never reached it
            assert client.app.state.manager.get("run-2") is None  # type: ignore[attr-defined]
            assert sorted(p.name for p in runs.iterdir() if p.is_dir()) == sorted(["run-1", "run-2", live])

    def test_the_dashboards_own_post_shapes_are_accepted(self, runs: Path) -> None:
        # the front-end sends what we require: in its source, and in the bundle the app serves
        source = (Path(__file__).parents[1] / "web" / "src" / "lib" / "api.js").read_text(encoding="utf-8")
        assert f'opts.headers["{CSRF_HEADER}"] = "1"' in source
        bundle = "".join(p.read_text(encoding="utf-8") for p in (STATIC_DIR / "assets").glob("*.js"))
        assert f'"{CSRF_HEADER}"' in bundle
        with _client(runs) as client:
            started = client.post("/api/runs", json={"task": "code-delivery"}, headers=OURS)
            assert started.status_code == 201
            run_id = started.json()["run_id"]
            assert client.post(f"/api/runs/{run_id}/cancel", headers=OURS).status_code == 202
            outcome = _outcome(client, run_id)
            assert outcome["outcome"] == "ERROR" and str(outcome["reason"]).startswith("CANCELLED")
            assert client.post(f"/api/runs/{run_id}/resume", headers=OURS).status_code == 202
            assert _outcome(client, run_id)["outcome"] == "PASSED"

    # ---- oversized and unauthenticated bodies ----------------------------------------------------

    async def test_an_oversized_body_is_refused_with_413_without_being_read(self, runs: Path) -> None:
        app = create_app(Settings(runs_dir=runs))
        json_ = {"Content-Type": "application/json"}
        declared = {**json_, "Content-Length": str(HUGE)}
        assert await _asgi(app, "POST", "/api/runs", declared, _oversized()) == (413, 0)
        assert await _asgi(app, "POST", "/api/runs/run-1/cancel", declared, _oversized()) == (413, 0)
        # Chunked (no Content-Length): pulled until just past the limit, then cut off.
        status, pulled = await _asgi(app, "POST", "/api/runs", json_, _oversized())
        assert status == 413 and MAX_REQUEST_BODY_BYTES < pulled <= MAX_REQUEST_BODY_BYTES + CHUNK
        # A streaming response reads on only to notice a disconnect; the cap holds there too.
        status, pulled = await _asgi(app, "GET", "/api/runs/run-1/events", {}, _oversized())
        assert status in {200, 413} and pulled <= MAX_REQUEST_BODY_BYTES + CHUNK
        # A body under the limit still goes through.
        small = json.dumps({"task": "no-such-task"}).encode()
        assert await _asgi(app, "POST", "/api/runs", json_, iter([small])) == (404, len(small))

    async def test_with_a_token_an_unauthenticated_large_body_gets_401_unread(self, runs: Path) -> None:
        app = create_app(Settings(runs_dir=runs, web_token=TOKEN))
        json_ = {"Content-Type": "application/json"}
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            for length in ({"Content-Length": str(HUGE)}, {}):
                headers = {**json_, **auth, **length}
                for path in ("/api/runs", "/api/runs/run-1/cancel", "/api/tasks"):
                    method = "GET" if path == "/api/tasks" else "POST"
                    assert await _asgi(app, method, path, headers, _oversized()) == (401, 0), (path, headers)
        # With the token, the size cap still applies.
        good = {**json_, "Authorization": f"Bearer {TOKEN}"}
        status, pulled = await _asgi(app, "POST", "/api/runs", good, _oversized())
        assert status == 413 and pulled <= MAX_REQUEST_BODY_BYTES + CHUNK

    def test_a_real_server_answers_a_huge_declared_body_before_reading_it(
        self, serve: tuple[int, int]
    ) -> None:
        open_port, token_port = serve
        assert _declare_huge_body_and_send_none(open_port, "/api/runs") == 413
        assert _declare_huge_body_and_send_none(token_port, "/api/runs") == 401
        assert _declare_huge_body_and_send_none(token_port, "/api/runs/run-1/cancel") == 401
        authorized = f"Authorization: Bearer {TOKEN}\r\n"
        assert _declare_huge_body_and_send_none(token_port, "/api/runs", authorized) == 413


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
