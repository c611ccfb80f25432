"""Held tool calls decided from the dashboard's API: only with a token, listed across runs, approved
(the run resumes in the server and the write happens) or denied (the role reads the reason), for a
run waiting on disk and for one executing in the server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from approval_support import HELD_CASSETTE, HELD_TASK, guarded_settings, held_run, trace_of
from pse.config import Settings

TOKEN = "approval-token-for-the-tests-0123456789"
HEADERS = {"X-PSE-Request": "1", "Authorization": f"Bearer {TOKEN}"}
DASHBOARD = "dashboard (PSE_WEB_TOKEN holder)"


def _client(settings: Settings, token: str | None = TOKEN) -> Any:
    """The dashboard on these settings, with `token` as PSE_WEB_TOKEN (None: none)."""
    from fastapi.testclient import TestClient
    from pydantic import SecretStr

    from pse.web import create_app

    served = settings.model_copy(update={"web_token": SecretStr(token) if token else None})
    return TestClient(create_app(served), base_url="http://127.0.0.1")


def _ended(settings: Settings, run_id: str, timeout_s: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        trace = trace_of(settings, run_id)
        if trace["outcome"] is not None:
            return trace
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not end in {timeout_s} s: {trace_of(settings, run_id)['state']}")


def _workspace(settings: Settings, run_id: str) -> Path:
    return settings.runs_dir / run_id / "workspace"


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Settings, str]]:
    yield held_run(tmp_path)


def test_without_a_token_the_dashboard_decides_nothing(held: tuple[Settings, str]) -> None:
    settings, run_id = held
    url = f"/api/runs/{run_id}/approvals/A1.1"
    with _client(settings, token=None) as client:
        refused = client.post(url, json={"decision": "approve"}, headers={"X-PSE-Request": "1"})
        assert refused.status_code == 403
        assert "needs PSE_WEB_TOKEN" in refused.json()["detail"]
        assert f"pse approve {run_id}" in refused.json()["detail"]
    trace = trace_of(settings, run_id)
    assert trace["state"] == "AWAITING_APPROVAL" and trace["approvals"][0]["decision"] is None
    assert not (settings.runs_dir / run_id / "approvals").exists()


def test_an_approval_from_the_dashboard_resumes_the_run_and_the_write_happens(
    held: tuple[Settings, str],
) -> None:
    settings, run_id = held
    url = f"/api/runs/{run_id}/approvals/A1.1"
    with _client(settings) as client:
        assert client.get("/api/approvals").status_code == 401  # the token guards the listing too
        listed = client.get("/api/approvals", headers=HEADERS)
        assert listed.status_code == 200
        [item] = listed.json()
        assert (item["run_id"], item["task"], item["id"], item["live"]) == (run_id, HELD_TASK, "A1.1", False)
        assert (item["requester"], item["tool"], item["arguments"]["path"]) == (
            "Specialist",
            "write_file",
            "NOTES.md",
        )
        assert "+notes" in item["preview"] and item["rule"] == "approval.Specialist.write_file"

        assert client.post(url, json={"decision": "maybe"}, headers=HEADERS).status_code == 422
        long = client.post(url, json={"decision": "deny", "reason": "x" * 2001}, headers=HEADERS)
        assert long.status_code == 422
        assert (
            client.post(
                f"/api/runs/{run_id}/approvals/B1", json={"decision": "approve"}, headers=HEADERS
            ).status_code
            == 422
        )
        unknown = client.post(
            f"/api/runs/{run_id}/approvals/A9.9", json={"decision": "approve"}, headers=HEADERS
        )
        assert unknown.status_code == 409 and "A1.1" in unknown.json()["detail"]
        both = client.post(url, json={"decision": "deny", "all": True}, headers=HEADERS)
        assert both.status_code == 409 and "--all" in both.json()["detail"]
        assert trace_of(settings, run_id)["approvals"][0]["decision"] is None

        approved = client.post(url, json={"decision": "approve", "reason": "notes are fine"}, headers=HEADERS)
        assert approved.status_code == 202, approved.text
        assert approved.json() == {
            "run_id": run_id,
            "approval": "A1.1",
            "decision": "approved",
            "resumed": True,
            "events": f"/api/runs/{run_id}/events",
        }
        trace = _ended(settings, run_id)
        assert trace["outcome"] == "PASSED"
        [approval] = trace["approvals"]
        assert (approval["decision"], approval["via"], approval["by"], approval["reason"]) == (
            "approved",
            "api",
            DASHBOARD,
            "notes are fine",
        )
        assert (_workspace(settings, run_id) / "NOTES.md").read_text() == "notes\n"
        again = client.post(url, json={"decision": "approve"}, headers=HEADERS)
        assert again.status_code == 409 and "waits for no approval" in again.json()["detail"]
        assert client.get("/api/approvals", headers=HEADERS).json() == []


def test_a_denial_from_the_dashboard_goes_back_to_the_role_with_its_reason(
    held: tuple[Settings, str],
) -> None:
    settings, run_id = held
    reason = "no notes in this delivery, please"
    with _client(settings) as client:
        denied = client.post(
            f"/api/runs/{run_id}/approvals/A1.1", json={"decision": "deny", "reason": reason}, headers=HEADERS
        )
        assert denied.status_code == 202 and denied.json()["decision"] == "denied"
        assert denied.json()["resumed"] is True
        trace = _ended(settings, run_id)
    assert trace["outcome"] == "PASSED"  # the demo's turns go on as recorded
    assert trace["approvals"][0]["decision"] == "denied" and trace["approvals"][0]["via"] == "api"
    [call] = [
        c
        for cycle in trace["cycles"]
        for c in cycle["tool_calls"]
        if c["requester"] == "Specialist" and c["arguments"].get("path") == "NOTES.md"
    ]
    assert call["decision"] == "denied" and reason in call["output"]
    assert not (_workspace(settings, run_id) / "NOTES.md").exists()


def test_a_run_executing_in_the_server_takes_the_decision_without_a_resume(tmp_path: Path) -> None:
    settings = guarded_settings(tmp_path)
    with _client(settings.model_copy(update={"cassette": None})) as client:
        started = client.post(
            "/api/runs", json={"task": HELD_TASK, "cassette": HELD_CASSETTE}, headers=HEADERS
        )
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 60
        pending: list[dict[str, Any]] = []
        while not pending and time.monotonic() < deadline:
            pending = client.get("/api/approvals", headers=HEADERS).json()
            time.sleep(0.1)
        assert [(p["run_id"], p["id"], p["live"]) for p in pending] == [(run_id, "A1.1", True)]
        run = client.get(f"/api/runs/{run_id}", headers=HEADERS).json()
        assert run["state"] == "AWAITING_APPROVAL"
        decided = client.post(
            f"/api/runs/{run_id}/approvals/A1.1", json={"decision": "approve", "all": True}, headers=HEADERS
        )
        assert decided.status_code == 202, decided.text
        assert decided.json()["resumed"] is False
        assert decided.json()["events"] == f"/api/runs/{run_id}/events"
        trace = _ended(settings, run_id)
    assert trace["outcome"] == "PASSED" and trace["resumed"] == 0
    assert (trace["approvals"][0]["via"], trace["approvals"][0]["scope"]) == ("api", "run")
    assert (_workspace(settings, run_id) / "NOTES.md").is_file()


def test_a_run_another_process_executes_is_left_to_that_process(held: tuple[Settings, str]) -> None:
    from pse.engine import holding_run

    settings, run_id = held
    with _client(settings) as client, holding_run(settings.runs_dir / run_id):  # "another process"
        decided = client.post(
            f"/api/runs/{run_id}/approvals/A1.1", json={"decision": "approve"}, headers=HEADERS
        )
        assert decided.status_code == 202, decided.text
        assert (decided.json()["resumed"], decided.json()["events"]) == (False, None)
        assert client.get("/api/approvals", headers=HEADERS).json() == []  # decided, for that process
    decision = json.loads((settings.runs_dir / run_id / "approvals" / "A1.1.json").read_text())
    assert (decision["decision"], decision["via"], decision["by"]) == ("approved", "api", DASHBOARD)
    assert trace_of(settings, run_id)["outcome"] is None  # nobody resumed it here


def test_a_server_that_stops_leaves_a_waiting_run_waiting_and_the_next_one_resumes_it(tmp_path: Path) -> None:
    """A restart of `pse serve` while a call waits: the run is not cancelled; the next server (or the
    CLI) decides it and the run goes on from the held call, no model call repeated."""
    settings = guarded_settings(tmp_path)
    with _client(settings.model_copy(update={"cassette": None})) as client:
        started = client.post(
            "/api/runs", json={"task": HELD_TASK, "cassette": HELD_CASSETTE}, headers=HEADERS
        )
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 60
        while trace_of(settings, run_id)["state"] != "AWAITING_APPROVAL" and time.monotonic() < deadline:
            time.sleep(0.1)
    held = trace_of(settings, run_id)  # the server has stopped
    assert (held["state"], held["outcome"], held["approvals"][0]["decision"]) == (
        "AWAITING_APPROVAL",
        None,
        None,
    )
    with _client(settings) as client:
        assert [p["id"] for p in client.get("/api/approvals", headers=HEADERS).json()] == ["A1.1"]
        decided = client.post(
            f"/api/runs/{run_id}/approvals/A1.1", json={"decision": "approve"}, headers=HEADERS
        )
        assert decided.status_code == 202 and decided.json()["resumed"] is True, decided.text
        trace = _ended(settings, run_id)
    assert trace["outcome"] == "PASSED" and trace["resumed"] == 1
    assert trace["cassette_positions"] == {"Planner": 1, "Specialist": 4, "Evaluator": 4}
