"""The run list's search and columns, the report, the metrics' infrastructure errors and the not-found
answers, through FastAPI's TestClient on traces written to disk (synthetic ones and a real demo run)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pse.config import Settings
from pse.engine import Trace, write_trace
from pse.runner import prepare_run, run_to_end
from pse.web import create_app

LOCAL = "http://127.0.0.1"
MODEL_DOWN = (
    "ModelUnavailableError: Planner's model 'm' (openai at http://127.0.0.1:9/v1) gave no usable answer "
    "after 1 attempt(s). Check that the server is up."
)


def _trace(
    runs: Path,
    run_id: str,
    *,
    minute: int,
    outcome: str | None = "PASSED",
    reason: str = "",
    messages: list[tuple[str, str]] = (),  # type: ignore[assignment]
    settings: dict[str, Any] | None = None,
    cycles: int = 1,
) -> None:
    started = f"2026-01-01T10:{minute:02d}:00.000+00:00"
    data = Trace(run_id=run_id, task="task-a", started_at=started).model_dump(by_alias=True)
    data.update(outcome=outcome, outcome_reason=reason, settings=settings or {})
    if outcome is not None:
        data["ended_at"] = f"2026-01-01T10:{minute:02d}:07.500+00:00"
    data["cycles"] = [
        {
            "index": i + 1,
            "kind": "initial",
            "first_speaker": "Planner",
            "started_at": started,
            "messages": [{"source": s, "content": c, "at": started} for s, c in messages] if i == 0 else [],
            "tokens": {"Planner": {"prompt": 100 * (i + 1), "completion": 10}},
        }
        for i in range(cycles)
    ]
    data["tokens"] = {"by_role": {"Planner": {"prompt": 100, "completion": 10}, "Evaluator": {"prompt": 50}}}
    write_trace(Trace.model_validate(data), runs / run_id)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    _trace(runs, "run-a", minute=0, reason="PASS (ALL_MET)", messages=[("Specialist", "wrote quicksort.py")])
    _trace(
        runs,
        "run-b",
        minute=1,
        outcome="ESCALATED",
        reason="PARTIAL (TESTS_FAILING) with every retry used",
        messages=[("Evaluator", "Duplicate values are DROPPED by the pivot split, so two tests fail.")],
        settings={"provider": "openai", "model": "gpt-x", "api_key": "***", "protocol": "native"},
        cycles=2,
    )
    _trace(runs, "run-c", minute=2, outcome="ERROR", reason=MODEL_DOWN)
    _trace(runs, "run-d", minute=3, outcome="ERROR", reason="ReplayMismatchError: turn 3 differs")
    _trace(runs, "run-e", minute=4, outcome=None)
    return runs


@pytest.fixture
def client(runs: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(runs_dir=runs)), base_url=LOCAL) as c:
        yield c


def _ids(page: dict[str, Any]) -> list[str]:
    return [r["run_id"] for r in page["runs"]]


def test_search_finds_runs_by_id_task_reason_and_message_text(client: TestClient) -> None:
    by_reason = client.get("/api/runs", params={"q": "tests_failing"}).json()
    assert _ids(by_reason) == ["run-b"] and by_reason["runs"][0]["match"]["field"] == "outcome_reason"
    by_id = client.get("/api/runs", params={"q": "RUN-C"}).json()
    assert _ids(by_id) == ["run-c"] and by_id["runs"][0]["match"]["field"] == "run_id"
    by_text = client.get("/api/runs", params={"q": "pivot split"}).json()
    assert _ids(by_text) == ["run-b"] and by_text["query"] == "pivot split"
    hit = by_text["runs"][0]["match"]
    assert (hit["field"], hit["role"]) == ("message", "Evaluator")
    assert "DROPPED by the pivot split" in hit["snippet"]
    # every run without a match in id, task or reason had its message text read
    assert by_text["text_searched"] == 5 and by_text["text_search_limit"] == 1000
    assert client.get("/api/runs", params={"q": "nowhere at all"}).json()["total"] == 0
    everything = client.get("/api/runs", params={"q": "task-a", "limit": 2, "offset": 2}).json()
    assert everything["total"] == 5 and _ids(everything) == ["run-c", "run-b"]
    filtered = client.get("/api/runs", params={"q": "quicksort", "outcome": "ESCALATED"}).json()
    assert filtered["total"] == 0  # run-a matches the text, but not the outcome
    assert client.get("/api/runs", params={"q": "x" * 201}).status_code == 422
    plain = client.get("/api/runs").json()
    assert plain["query"] is None and plain["text_searched"] is None and plain["total"] == 5


def test_list_rows_carry_duration_model_sandbox_and_infrastructure_errors(client: TestClient) -> None:
    rows = {r["run_id"]: r for r in client.get("/api/runs").json()["runs"]}
    assert rows["run-a"]["duration_s"] == 7.5 and rows["run-e"]["duration_s"] is None
    assert rows["run-a"]["facts"]["provider"] == "scripted" and rows["run-a"]["facts"]["model"] == "scripted"
    b = rows["run-b"]["facts"]
    assert (b["provider"], b["model"], b["protocol"]) == ("openai", "gpt-x", "native")
    assert b["models"] == {
        "Planner": "openai/gpt-x",
        "Specialist": "openai/gpt-x",
        "Evaluator": "openai/gpt-x",
    }
    assert b["tokens_by_role"] == {"Planner": 110, "Evaluator": 50}
    assert b["tokens_by_cycle"] == [110, 210]
    assert [rows[r]["infrastructure_error"] for r in ("run-a", "run-b", "run-c", "run-d")] == [
        False,
        False,
        True,  # the model was down: not the run's doing
        False,  # a replay that differs is the run's own failure
    ]


def test_one_runs_facts(client: TestClient) -> None:
    facts = client.get("/api/runs/run-b/facts").json()
    assert (facts["provider"], facts["model"], facts["protocol"]) == ("openai", "gpt-x", "native")
    assert client.get("/api/runs/20990101-000000-nope-abcdef/facts").status_code == 404


def test_metrics_count_infrastructure_errors_apart_from_the_pass_rate(client: TestClient) -> None:
    stats = client.get("/api/stats").json()
    assert stats["runs"] == 4 and stats["outcomes"] == {"PASSED": 1, "ESCALATED": 1, "ERROR": 2}
    assert stats["infrastructure_errors"] == 1 and stats["judged_runs"] == 3
    assert stats["pass_rate"] == round(1 / 3, 4)
    assert stats["judged_first_cycle_pass_rate"] == round(1 / 3, 4)
    assert stats["first_cycle_pass_rate"] == 0.25  # the store's figure, every finished run counted
    series = {r["run_id"]: r for r in stats["series"]}
    assert series["run-c"]["infrastructure_error"]
    assert series["run-b"]["facts"]["tokens_by_cycle"] == [110, 210]


def test_an_unknown_run_is_a_404_that_names_no_server_path(client: TestClient, runs: Path) -> None:
    for path in ("/api/runs/20990101-000000-nope-abcdef", "/api/runs/20990101-000000-nope-abcdef/report"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json()["detail"] == "no run '20990101-000000-nope-abcdef'"
        assert str(runs) not in response.text and str(runs.parent) not in response.text


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    runs = tmp_path_factory.mktemp("demo") / "runs"
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", Settings(runs_dir=runs))))
    return runs, summary.run_id


def test_the_report_is_served_as_inert_text(demo: tuple[Path, str], runs: Path) -> None:
    root, run_id = demo
    with TestClient(create_app(Settings(runs_dir=root)), base_url=LOCAL) as c:
        response = c.get(f"/api/runs/{run_id}/report")
    assert response.status_code == 200
    assert response.text == (root / run_id / "report.md").read_text(encoding="utf-8")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.headers["content-security-policy"] == "sandbox"
    with TestClient(create_app(Settings(runs_dir=runs)), base_url=LOCAL) as c:
        assert c.get("/api/runs/run-a/report").status_code == 404  # no report.md in that run
        patch = c.get("/api/runs/run-a/patch")  # no repository run: no change.patch (issue 47)
        assert (patch.status_code, patch.json()["detail"]) == (404, "no change.patch in run 'run-a'")


def test_the_new_routes_need_the_token_too(runs: Path) -> None:
    token = "catalog-token-0123456789abcdef"
    with TestClient(create_app(Settings(runs_dir=runs, web_token=token)), base_url=LOCAL) as c:
        for path in ("/api/runs?q=pivot", "/api/runs/run-a/facts", "/api/runs/run-a/report"):
            assert c.get(path).status_code == 401, path
        assert c.get("/api/runs/run-b/facts", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_a_checkout_without_the_built_front_end_says_how_to_build_it(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pse.web._app.STATIC_DIR", tmp_path / "not-built")
    with TestClient(create_app(Settings(runs_dir=runs)), base_url=LOCAL) as c:
        page = c.get("/")
        assert c.get("/api/runs").status_code == 200  # the API works without it
    assert page.status_code == 503 and "make setup" in page.text and "npm ci" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
