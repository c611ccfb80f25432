"""The dashboard API through FastAPI's TestClient: every endpoint, auth, guards, SSE, runs and cancel.

Runs are real: the demo task replays its cassette with real pytest and ruff (about a second each).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pse.config import Settings
from pse.engine import Trace, load_trace, write_trace
from pse.events import EVENT_ADAPTER, Event
from pse.runner import prepare_run, run_to_end
from pse.web import create_app

LOCAL = "http://127.0.0.1"
TOKEN = "s3cret-token-for-the-tests-0123456789"
OURS = {"X-PSE-Request": "1"}
"""What the dashboard's own front-end sends on every state-changing call (the CSRF guard wants it)."""


def _client(runs: Path, token: str | None = None) -> TestClient:
    return TestClient(create_app(Settings(runs_dir=runs, web_token=token)), base_url=LOCAL)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path / "runs") as c:
        yield c


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs directory holding one demo run that ended PASSED, run by the runner (not by a server)."""
    runs = tmp_path_factory.mktemp("finished") / "runs"
    asyncio.run(run_to_end(prepare_run("code-delivery", Settings(runs_dir=runs))))
    return runs


def _only_run(runs: Path) -> str:
    (run_dir,) = [p for p in runs.iterdir() if (p / "trace.json").is_file()]
    return run_dir.name


def _read_sse(lines: Iterator[str]) -> list[tuple[str, str, str]]:
    """(id, event, data) of every SSE block until the stream ends."""
    blocks: list[tuple[str, str, str]] = []
    current: dict[str, str] = {}
    for line in lines:
        if not line:
            if current:
                blocks.append((current.get("id", ""), current.get("event", ""), current.get("data", "")))
            current = {}
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        current[key] = value
    return blocks


def _events(client: TestClient, run_id: str, **headers: str) -> list[tuple[str, str, str]]:
    with client.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return _read_sse(response.iter_lines())


def _start(client: TestClient, **body: object) -> str:
    response = client.post("/api/runs", json={"task": "code-delivery", **body})
    assert response.status_code == 201, response.text
    run_id = response.json()["run_id"]
    assert response.json()["events"] == f"/api/runs/{run_id}/events"
    return str(run_id)


# ---- tasks, starting, SSE ----------------------------------------------------------------------


def test_tasks_lists_each_task_with_inputs_and_cassettes(client: TestClient) -> None:
    tasks = {t["name"]: t for t in client.get("/api/tasks").json()}
    assert {"code-delivery", "incident-review"} <= set(tasks)
    assert tasks["code-delivery"]["valid"] is True
    assert tasks["code-delivery"]["cassettes"] == ["cassette.json"]
    assert tasks["code-delivery"]["description"].startswith("Deliver quicksort.py")


def test_a_run_streams_every_event_in_order_and_a_late_subscriber_gets_the_same(client: TestClient) -> None:
    run_id = _start(client)
    manager = client.app.state.manager  # type: ignore[attr-defined]
    with client.stream("GET", f"/api/runs/{run_id}/events") as first:
        lines = first.iter_lines()
        head: list[str] = []
        for line in lines:  # read up to the first complete event, then let a second subscriber join
            head.append(line)
            if line == "":
                break
        assert manager.get(run_id).ended is False  # the run is still going when the late subscriber joins
        late = _events(client, run_id)
        early = _read_sse(iter(head + list(lines)))
    assert early == late
    *events, end = early
    assert end == ("", "end", '{"error": null}')
    assert [e[0] for e in events] == [str(i) for i in range(1, len(events) + 1)]
    parsed = [EVENT_ADAPTER.validate_json(data) for _, _, data in events]
    assert [e.kind for e in parsed] == [kind for _, kind, _ in events]
    assert parsed[0].kind == "cycle_start" and parsed[-1].kind == "outcome"
    assert [e.kind for e in parsed].count("outcome") == 1
    assert parsed[-1].outcome == "PASSED"  # type: ignore[union-attr]
    # every message and tool call of the trace was streamed, in the trace's order
    trace = Trace.model_validate(client.get(f"/api/runs/{run_id}").json())
    assert [e.message for e in parsed if e.kind == "message"] == [m for c in trace.cycles for m in c.messages]  # type: ignore[union-attr]
    assert [e.call for e in parsed if e.kind == "tool_call"] == [
        t for c in trace.cycles for t in c.tool_calls
    ]  # type: ignore[union-attr]
    verdicts = [e for e in parsed if e.kind == "verdict"]
    assert [v.verdict.status for v in verdicts] == ["PARTIAL", "PASS"]  # type: ignore[union-attr]
    assert verdicts[0].gate.failures == ["check:pytest: last run_pytest run: status error, exit code 1"]  # type: ignore[union-attr]
    # Last-Event-ID resumes after what a client already has
    resumed = _events(client, run_id, **{"Last-Event-ID": "10"})
    assert resumed[:-1] == events[10:]


def test_replay_of_a_run_not_started_by_this_server_matches_what_was_streamed(
    finished_runs: Path, tmp_path: Path
) -> None:
    run_id = _only_run(finished_runs)
    trace = load_trace(finished_runs / run_id)
    with _client(finished_runs) as c:
        *events, end = _events(c, run_id)
    assert end == ("", "end", '{"error": null}')
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("cycle_start") == 2 and kinds.count("verdict") == 2 and kinds[-1] == "outcome"
    assert kinds.count("message") == sum(len(c.messages) for c in trace.cycles)
    assert kinds.count("tool_call") == sum(len(c.tool_calls) for c in trace.cycles)
    assert kinds.count("transition") == len(trace.transitions)
    assert json.loads(events[-1][2])["outcome"] == "PASSED"
    # an interrupted run (no outcome) replays what it has and then says why the stream ends
    trace.outcome, trace.ended_at = None, None
    copy = tmp_path / "runs" / run_id
    write_trace(trace, copy)
    with _client(tmp_path / "runs") as c:
        *events, end = _events(c, run_id)
    assert "outcome" not in [kind for _, kind, _ in events]
    assert json.loads(end[2])["error"] == "the run is not executing in this server and has no outcome"


def test_replay_trace_orders_by_time_and_counts_every_record(finished_runs: Path) -> None:
    trace = load_trace(finished_runs / _only_run(finished_runs))
    events: list[Event] = trace.events()
    assert [e.at for e in events[:-1]] == sorted(e.at for e in events[:-1])
    assert events[0].kind == "cycle_start" and events[-1].kind == "outcome"
    assert len(events) == len(trace.transitions) + 1 + sum(
        2 + len(c.messages) + len(c.tool_calls) + len(c.retrievals) for c in trace.cycles
    )


def test_concurrent_runs_execute_at_once_and_both_pass(client: TestClient) -> None:
    first, second = _start(client), _start(client)
    manager = client.app.state.manager  # type: ignore[attr-defined]
    assert {r.run_id for r in manager.active()} == {first, second}
    assert {r["run_id"] for r in client.get("/api/runs").json()["runs"] if r["live"]} <= {first, second}
    outcomes = [json.loads(_events(client, rid)[-2][2])["outcome"] for rid in (first, second)]
    assert outcomes == ["PASSED", "PASSED"]
    page = client.get("/api/runs").json()
    assert page["total"] == 2 and {r["outcome"] for r in page["runs"]} == {"PASSED"}


def test_cancel_stops_a_live_run_as_cancelled_error(client: TestClient) -> None:
    run_id = _start(client)
    response = client.post(f"/api/runs/{run_id}/cancel", headers=OURS)
    assert response.status_code == 202 and response.json() == {"run_id": run_id, "cancelling": True}
    outcome = json.loads(_events(client, run_id)[-2][2])
    assert outcome["outcome"] == "ERROR" and outcome["reason"].startswith("CANCELLED")
    assert client.post(f"/api/runs/{run_id}/cancel", headers=OURS).status_code == 409  # already over
    assert client.post("/api/runs/no-such-run/cancel", headers=OURS).status_code == 404
    assert load_trace(client.app.state.runs_root / run_id).outcome == "ERROR"  # type: ignore[attr-defined]


def test_a_cancelled_run_resumes_from_the_dashboard(client: TestClient) -> None:
    run_id = _start(client)
    assert client.post(f"/api/runs/{run_id}/cancel", headers=OURS).status_code == 202
    _events(client, run_id)
    response = client.post(f"/api/runs/{run_id}/resume", headers=OURS)
    assert response.status_code == 202 and response.json()["run_id"] == run_id
    again = client.post(f"/api/runs/{run_id}/resume", headers=OURS)
    assert again.status_code in (409, 202)  # live, or over already
    events = _events(client, run_id)
    kinds = [kind for _, kind, _ in events]
    outcome = json.loads(events[-2][2])
    assert outcome["outcome"] == "PASSED" and kinds.count("cycle_start") == 2
    trace = load_trace(client.app.state.runs_root / run_id)  # type: ignore[attr-defined]
    assert trace.outcome == "PASSED" and trace.resumed == 1
    # A run that has an outcome (not a cancellation) cannot be resumed; an unknown one is 404.
    response = client.post(f"/api/runs/{run_id}/resume", headers=OURS)
    assert response.status_code == 409 and "already ended PASSED" in response.json()["detail"]
    assert client.post("/api/runs/no-such-run/resume", headers=OURS).status_code == 404


def test_stopping_the_server_cancels_live_runs_and_records_them(tmp_path: Path) -> None:
    with _client(tmp_path / "runs") as c:
        run_id = _start(c)
    trace = load_trace(tmp_path / "runs" / run_id)
    assert trace.outcome == "ERROR" and trace.outcome_reason.startswith("CANCELLED")


def test_too_many_runs_is_refused_with_429(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pse.web._runs.MAX_ACTIVE_RUNS", 1)
    run_id = _start(client)
    response = client.post("/api/runs", json={"task": "code-delivery"})
    assert response.status_code == 429 and "1 runs are executing" in response.json()["detail"]
    client.post(f"/api/runs/{run_id}/cancel", headers=OURS)
    _events(client, run_id)


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"task": "no-such-task"}, 404, "no task named 'no-such-task'"),
        ({"task": "../etc"}, 422, "pattern"),
        ({"task": "code-delivery", "inputs": {"nope": "x"}}, 400, "nope"),
        ({"task": "code-delivery", "cassette": "../incident-review/cassette.json"}, 422, "pattern"),
        ({"task": "code-delivery", "cassette": "/etc/passwd"}, 422, "pattern"),
        ({"task": "code-delivery", "cassette": "task.json"}, 400, "has no cassette 'task.json'"),
        ({"task": "code-delivery", "base_url": "https://evil.example/v1"}, 422, "on this machine"),
        ({"task": "code-delivery", "base_url": "http://u:p@127.0.0.1/v1"}, 422, "credentials"),
        ({"task": "code-delivery", "provider": "magic"}, 422, "provider"),
        ({"task": "code-delivery", "record": "/tmp/x.json"}, 422, "record"),
    ],
)
def test_start_run_rejects_bad_requests_and_leaves_nothing_behind(
    client: TestClient, body: dict[str, object], status: int, fragment: str
) -> None:
    response = client.post("/api/runs", json=body)
    assert response.status_code == status
    assert fragment in json.dumps(response.json())
    assert [p for p in client.app.state.runs_root.iterdir() if p.is_dir()] == []  # type: ignore[attr-defined]


def test_start_run_accepts_a_listed_cassette_and_loopback_provider_options(client: TestClient) -> None:
    run_id = _start(client, cassette="cassette.json", provider="scripted", model="scripted")
    assert json.loads(_events(client, run_id)[-2][2])["outcome"] == "PASSED"
    settings = client.get(f"/api/runs/{run_id}").json()["settings"]
    assert settings["provider"] == "scripted" and settings["cassette"].endswith("code-delivery/cassette.json")


# ---- history, trace, stats -----------------------------------------------------------------------


def _synthetic(runs: Path, run_id: str, task: str, outcome: str | None, cycles: int, minute: int) -> None:
    data = Trace(run_id=run_id, task=task, started_at=f"2026-01-01T10:{minute:02d}:00.000+00:00").model_dump(
        by_alias=True
    )
    data["outcome"] = outcome
    data["cycles"] = [
        {"index": i + 1, "kind": "initial", "first_speaker": "Planner", "started_at": data["started_at"]}
        for i in range(cycles)
    ]
    data["tokens"] = {"prompt": 100 * cycles, "completion": 10, "total": 100 * cycles + 10, "by_role": {}}
    write_trace(Trace.model_validate(data), runs / run_id)


@pytest.fixture
def history(tmp_path: Path) -> Iterator[TestClient]:
    runs = tmp_path / "runs"
    plan = [("a", "PASSED", 1), ("b", "PASSED", 2), ("a", "ESCALATED", 3), ("b", "ERROR", 1), ("a", None, 1)]
    for minute, (task, outcome, cycles) in enumerate(plan * 3):
        _synthetic(runs, f"run-{minute:02d}", f"task-{task}", outcome, cycles, minute)
    (runs / "not-a-run").mkdir()
    (runs / "broken").mkdir()
    (runs / "broken" / "trace.json").write_text("{not json", encoding="utf-8")
    with _client(runs) as c:
        yield c


def test_run_history_is_paginated_newest_first_and_filtered(history: TestClient) -> None:
    page = history.get("/api/runs", params={"limit": 4}).json()
    assert page["total"] == 15 and page["offset"] == 0 and page["limit"] == 4
    assert [r["run_id"] for r in page["runs"]] == ["run-14", "run-13", "run-12", "run-11"]
    last = history.get("/api/runs", params={"limit": 4, "offset": 12}).json()
    assert [r["run_id"] for r in last["runs"]] == ["run-02", "run-01", "run-00"]
    assert history.get("/api/runs", params={"task": "task-a"}).json()["total"] == 9
    passed_b = history.get("/api/runs", params={"task": "task-b", "outcome": "PASSED"}).json()
    assert [r["run_id"] for r in passed_b["runs"]] == ["run-11", "run-06", "run-01"]
    running = history.get("/api/runs", params={"outcome": "RUNNING"}).json()
    assert running["total"] == 3 and all(r["outcome"] is None and not r["live"] for r in running["runs"])
    assert history.get("/api/runs", params={"outcome": "MAYBE"}).status_code == 400
    assert history.get("/api/runs", params={"limit": 501}).status_code == 422
    assert history.get("/api/runs", params={"offset": -1}).status_code == 422


def test_run_history_sees_a_new_trace_after_caching(history: TestClient) -> None:
    assert history.get("/api/runs").json()["total"] == 15
    _synthetic(history.app.state.runs_root, "run-99", "task-c", "TIMEOUT", 1, 59)  # type: ignore[attr-defined]
    page = history.get("/api/runs", params={"limit": 1}).json()
    assert page["total"] == 16 and page["runs"][0]["run_id"] == "run-99"


def test_stats_aggregates_finished_runs_with_series_and_histogram(history: TestClient) -> None:
    stats = history.get("/api/stats").json()
    assert stats["runs"] == 12
    assert stats["outcomes"] == {"PASSED": 6, "ESCALATED": 3, "ERROR": 3}
    assert stats["first_cycle_pass_rate"] == 0.25
    assert stats["mean_cycles_to_pass"] == 1.5
    assert stats["cycles_to_pass"] == {"1": 3, "2": 3}
    assert [r["run_id"] for r in stats["series"]][:3] == ["run-00", "run-01", "run-02"]
    assert len(stats["series"]) == 12


def test_get_run_returns_the_trace(finished_runs: Path) -> None:
    run_id = _only_run(finished_runs)
    with _client(finished_runs) as c:
        response = c.get(f"/api/runs/{run_id}")
        assert c.get("/api/runs/20990101-000000-nope-abcdef").status_code == 404
    assert response.status_code == 200
    assert Trace.model_validate(response.json()) == load_trace(finished_runs / run_id)


# ---- workspace files and traversal ---------------------------------------------------------------


def test_files_are_listed_and_served_as_inert_text(finished_runs: Path) -> None:
    run_id = _only_run(finished_runs)
    with _client(finished_runs) as c:
        listing = c.get(f"/api/runs/{run_id}/files").json()
        response = c.get(f"/api/runs/{run_id}/files/quicksort.py")
    assert [f["path"] for f in listing] == ["quicksort.py", "test_acceptance.py", "test_quicksort.py"]
    assert response.status_code == 200 and "def quicksort" in response.text
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.headers["content-security-policy"] == "sandbox"
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.fixture
def trap(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    """A run whose workspace holds symlinks out of it, next to a secret outside the runs directory."""
    runs = tmp_path / "runs"
    _synthetic(runs, "run-1", "task-a", "PASSED", 1, 0)
    workspace = runs / "run-1" / "workspace"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "ok.txt").write_text("fine", encoding="utf-8")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET", encoding="utf-8")
    (workspace / "link-out").symlink_to(secret)
    (workspace / "sub" / "dir-out").symlink_to(tmp_path)
    outside = tmp_path / "outside-run"
    _synthetic(tmp_path, "outside-run", "task-a", "PASSED", 1, 0)
    (outside / "workspace").mkdir()
    (outside / "workspace" / "x.txt").write_text("TOP-SECRET", encoding="utf-8")
    (runs / "evil").symlink_to(outside)
    with _client(runs) as c:
        yield c, "run-1"


@pytest.mark.parametrize(
    ("path", "statuses"),
    [
        ("ok.txt", {200}),
        ("link-out", {404}),
        ("sub/dir-out/secret.txt", {404}),
        ("..%2F..%2Fsecret.txt", {400, 404}),
        ("%2e%2e/%2e%2e/secret.txt", {400, 404}),
        ("sub/../../trace.json", {400, 404}),
        ("%2Fetc%2Fpasswd", {400, 404}),
        ("/etc/passwd", {400, 404}),
        ("..\\..\\secret.txt", {400}),
        ("ok.txt%00.png", {400, 404}),
        ("sub", {404}),
        ("missing.txt", {404}),
    ],
)
def test_file_paths_never_leave_the_workspace(
    trap: tuple[TestClient, str], path: str, statuses: set[int]
) -> None:
    client, run_id = trap
    response = client.get(f"/api/runs/{run_id}/files/{path}")
    assert response.status_code in statuses
    assert "TOP-SECRET" not in response.text
    if response.status_code == 200:
        assert response.text == "fine"


@pytest.mark.parametrize(
    "run_id", ["..", "%2e%2e", ".hidden", "evil", "run-1%2F..%2F..", "%2Fetc", "a" * 300, "run-1;rm"]
)
def test_run_ids_are_validated_and_never_leave_the_runs_directory(
    trap: tuple[TestClient, str], run_id: str
) -> None:
    client, _ = trap
    for suffix in ("", "/events", "/files", "/files/x.txt", "/files/trace.json"):
        response = client.get(f"/api/runs/{run_id}{suffix}")
        assert response.status_code in {400, 404}, (run_id, suffix, response.status_code)
        assert "TOP-SECRET" not in response.text
    assert client.post(f"/api/runs/{run_id}/cancel", headers=OURS).status_code in {400, 404}


# ---- auth, guards, bind ----------------------------------------------------------------------------

ENDPOINTS = [
    ("GET", "/api/tasks"),
    ("GET", "/api/runs"),
    ("POST", "/api/runs"),
    ("GET", "/api/runs/run-1"),
    ("GET", "/api/runs/run-1/events"),
    ("POST", "/api/runs/run-1/cancel"),
    ("GET", "/api/runs/run-1/files"),
    ("GET", "/api/runs/run-1/files/ok.txt"),
    ("GET", "/api/stats"),
]


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[TestClient]:
    runs = tmp_path / "runs"
    _synthetic(runs, "run-1", "task-a", "PASSED", 1, 0)
    (runs / "run-1" / "workspace").mkdir()
    (runs / "run-1" / "workspace" / "ok.txt").write_text("fine", encoding="utf-8")
    with _client(runs, token=TOKEN) as c:
        yield c


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_with_a_token_every_api_call_needs_the_bearer(guarded: TestClient, method: str, path: str) -> None:
    body = {"json": {"task": "no-such-task"}} if method == "POST" and path == "/api/runs" else {}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        response = guarded.request(method, path, headers={**OURS, **headers}, **body)  # type: ignore[arg-type]
        assert response.status_code == 401, (path, headers)
        assert response.headers["www-authenticate"] == "Bearer"
    auth = {**OURS, "Authorization": f"Bearer {TOKEN}"}
    ok = guarded.request(method, path, headers=auth, **body)  # type: ignore[arg-type]
    assert ok.status_code in {200, 404, 409}, (path, ok.text)  # 404: no such task; 409: run not live


def test_with_a_token_the_ui_itself_loads_and_any_host_is_served(guarded: TestClient) -> None:
    page = guarded.get("/", headers={"Host": "dash.example:8080"})
    assert page.status_code == 200 and "PSE dashboard" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets), assets
    for asset in assets:  # the built front-end loads without the token, under the same CSP
        response = guarded.get(asset)
        assert response.status_code == 200, asset
        assert "script-src 'self'" in response.headers["content-security-policy"]
    auth = {"Authorization": f"Bearer {TOKEN}", "Host": "dash.example:8080"}
    assert guarded.get("/api/tasks", headers=auth).status_code == 200
    assert guarded.get("/api/openapi.json").status_code == 401  # no schema browsing without the token
    assert guarded.get("/api/openapi.json", headers=auth).status_code == 404  # nor with it


def test_without_a_token_every_api_call_is_open_on_loopback(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _synthetic(runs, "run-1", "task-a", "PASSED", 1, 0)
    (runs / "run-1" / "workspace").mkdir()
    (runs / "run-1" / "workspace" / "ok.txt").write_text("fine", encoding="utf-8")
    with _client(runs) as c:
        for method, path in ENDPOINTS:
            body = {"json": {"task": "no-such-task"}} if method == "POST" and path == "/api/runs" else {}
            response = c.request(method, path, headers=OURS, **body)  # type: ignore[arg-type]
            assert response.status_code in {200, 404, 409}, (path, response.text)
            assert response.status_code != 401


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example"}, 403),  # DNS rebinding: a foreign name resolving to 127.0.0.1
        ({"Host": "localhost:8080"}, 200),
        ({"Host": "[::1]:8080"}, 200),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": LOCAL}, 200),
    ],
)
def test_without_a_token_foreign_hosts_and_origins_are_refused(
    client: TestClient, headers: dict[str, str], status: int
) -> None:
    assert client.get("/api/tasks", headers=headers).status_code == status


def test_cross_site_posts_are_refused(client: TestClient) -> None:
    form = client.post("/api/runs", content=b"task=code-delivery", headers={"Content-Type": "text/plain"})
    assert form.status_code == 415
    foreign = client.post(
        "/api/runs", json={"task": "code-delivery"}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    assert [p for p in client.app.state.runs_root.iterdir() if p.is_dir()] == []  # type: ignore[attr-defined]


def test_no_get_route_starts_a_run(client: TestClient) -> None:
    for path in ("/api/runs?task=code-delivery", "/api/runs/start", "/api/tasks?run=code-delivery", "/"):
        client.get(path)
    assert [p for p in client.app.state.runs_root.iterdir() if p.is_dir()] == []  # type: ignore[attr-defined]
    from pse.web._api import router

    gets = {r.path for r in router.routes if "GET" in getattr(r, "methods", set())}
    assert "/api/runs" in gets and "/api/runs/{run_id}/cancel" not in gets


def test_bind_guard_refuses_non_loopback_without_a_long_token(tmp_path: Path) -> None:
    from pse.exceptions import UserError
    from pse.web import check_bind, serve

    for host in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost"):
        check_bind(host, None)
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.com"):
        with pytest.raises(UserError, match="PSE_WEB_TOKEN is not set"):
            check_bind(host, None)
        with pytest.raises(UserError, match="fewer than 16"):
            check_bind(host, "short")
        check_bind(host, TOKEN)
    with pytest.raises(UserError, match=r"refusing to bind 0\.0\.0\.0"):  # refused before anything binds
        serve(Settings(runs_dir=tmp_path / "runs"), host="0.0.0.0", port=1)


def test_pse_serve_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    import subprocess
    import sys

    pse = Path(sys.executable).with_name("pse")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PSE_")}
    result = subprocess.run(
        [str(pse), "serve", "--host", "0.0.0.0", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "refusing to bind 0.0.0.0" in result.stderr


def test_default_address_is_loopback_8080() -> None:
    import pse.web

    assert (pse.web.DEFAULT_HOST, pse.web.DEFAULT_PORT) == ("127.0.0.1", 8080)
