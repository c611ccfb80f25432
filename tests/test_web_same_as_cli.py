"""The dashboard says what the CLI says: a message and a tool call in the same words (never protocol XML),
an invalid task listed with the problems `pse validate` prints, a task that cannot start refused with
what the page can do about it, and a cost without a price called "unpriced"."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pse._describe import describe_call, describe_message
from pse.cli._live import cost_line
from pse.config import Settings
from pse.events import EVENT_ADAPTER, MessageEvent, ToolCallEvent
from pse.runner import prepare_run, run_to_end
from pse.tasks import scaffold_task
from pse.web import create_app

LOCAL = "http://127.0.0.1"
OURS = {"X-PSE-Request": "1"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    runs = tmp_path_factory.mktemp("same") / "runs"
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", Settings(runs_dir=runs))))
    return runs, summary.run_id


def _blocks(client: TestClient, path: str) -> list[tuple[str, str]]:
    found, kind = [], ""
    with client.stream("GET", path) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: ") and kind != "end":
                found.append((kind, line.removeprefix("data: ")))
    return found


def test_the_dashboards_events_carry_the_lines_the_terminal_prints(demo: tuple[Path, str]) -> None:
    import json

    runs, run_id = demo
    with TestClient(create_app(Settings(runs_dir=runs)), base_url=LOCAL) as client:
        plain = _blocks(client, f"/api/runs/{run_id}/events")
        said = _blocks(client, f"/api/runs/{run_id}/events?said=true")
    assert [kind for kind, _ in plain] == [kind for kind, _ in said]
    assert all("said" not in json.loads(data) for _, data in plain)  # the events' own JSON, as before
    checked = 0
    for (kind, raw), (_, enriched) in zip(plain, said, strict=True):
        event, data = EVENT_ADAPTER.validate_json(raw), json.loads(enriched)
        if isinstance(event, MessageEvent):
            assert data["said"] == describe_message(event.message.source, event.message.content)
        elif isinstance(event, ToolCallEvent):
            assert data["said"] == describe_call(event.call)[0]
        else:
            assert "said" not in data, kind
            continue
        assert "<tool_calls" not in data["said"] and "<invoke" not in data["said"], data["said"]
        checked += 1
    assert checked >= 20
    lines = [json.loads(d)["said"] for k, d in said if k == "message"]
    assert lines[0].startswith("plan: Deliver quicksort.py") and "(2 steps, 4 criteria)" in lines[0]
    assert "verdict PARTIAL (TESTS_FAILING): AC1 ✗ AC2 ✓ AC3 ✗ AC4 ✓" in lines


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    scaffold_task("notes", root)
    scaffold_task("broken", root)
    toml = root / "broken" / "task.toml"
    toml.write_text(toml.read_text().replace("expected_outputs =", "expected_output ="))
    scaffold_task("bare", root)
    (root / "bare" / "cassette.json").unlink()
    toml = root / "bare" / "task.toml"
    toml.write_text(toml.read_text().replace('cassette = "cassette.json"\n', ""))
    return root


@pytest.fixture
def client(tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    for name in ("PSE_PROVIDER", "PSE_API_KEY", "OPENAI_API_KEY", "PSE_CASSETTE"):
        monkeypatch.delenv(name, raising=False)
    with TestClient(create_app(Settings(runs_dir=tmp_path / "runs", tasks_dir=tasks)), base_url=LOCAL) as c:
        yield c


def test_an_invalid_task_is_listed_with_the_problems_validate_prints(client: TestClient, tasks: Path) -> None:
    listed = {t["name"]: t for t in client.get("/api/tasks").json()}
    assert listed["broken"]["valid"] is False
    assert listed["broken"]["problems"] == [
        "unknown key 'expected_output' — fix: did you mean 'expected_outputs'? (the top level takes: description, "
        "goal, inputs, seed, expected_outputs, required_checks, checks, policy, limits, report, verification, "
        "cassette, mcp, sandbox, repository, execution)"
    ]
    assert listed["notes"]["valid"] is True and listed["notes"]["problems"] == []
    assert listed["notes"]["warnings"] == []
    assert listed["bare"]["warnings"] == [
        "task 'bare' cannot run offline: it has no cassette, and no model is configured"
    ]


def test_a_task_that_cannot_start_is_refused_with_what_the_page_can_do(client: TestClient) -> None:
    response = client.post("/api/runs", json={"task": "bare"}, headers=OURS)
    assert response.status_code == 400
    assert response.json()["detail"] == (
        "task 'bare' has no cassette to replay, and this server has no model configured: pick a Provider and "
        "a Model above (a Base URL too for a local server), or add a cassette to the task's folder"
    )
    assert "--cassette" not in response.json()["detail"]


def test_a_cost_without_a_price_is_unpriced_in_the_terminal_as_on_the_page() -> None:
    assert cost_line(0.0, "USD", ["scripted"]) == "cost unpriced (scripted has no price; set PSE_PRICES)"
    assert cost_line(0.0123, "USD", ["m"]) == "cost 0.012300 USD (unpriced, counted as 0: m)"
    assert cost_line(0.5, "EUR", []) == "cost 0.500000 EUR"
