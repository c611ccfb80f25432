"""Many runs: `pse batch` on the local and the Ray executor, and the run store at 100,000 runs.

1. 200 runs of the code-delivery demo with 1 s of simulated model latency per call: the local executor
   (concurrency 50), Ray with 2 workers (25 runs at once each), and one run alone. Tool calls are real
   (fallback sandbox), so the 2 cores are shared by every run's pytest and ruff.
2. The store at 100,000 runs, SQLite and PostgreSQL (a throwaway server from Debian's binaries, as the
   tests start it): the dashboard's `/api/runs` first page p50, the same filtered by outcome, and
   `pse stats` (totals in SQL) p50.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from pse.batch import BatchRun, LocalExecutor, RayExecutor, run_batch
from pse.config import load_settings
from pse.history import compute_stats
from pse.runner import prepare_run, registry_for, run_to_end
from pse.store import RunStore, close_stores
from pse.trace import RunEntry
from pse.web import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the tests' PostgreSQL helper
from pg_support import PG_BIN, PostgresServer

LATENCY_S = 1.0
RUNS = 200
STORE_ROWS = 100_000


def _batch(tmp: Path, executor: Any, name: str) -> dict[str, Any]:
    settings = load_settings(runs_dir=tmp / name, sandbox="fallback", scripted_latency_s=LATENCY_S)
    task = registry_for(settings).get("code-delivery")
    plan = BatchRun(task=task, rows=[{}] * RUNS, settings=settings, executor=executor, tag=name)
    started = time.perf_counter()
    summary = asyncio.run(run_batch(plan))
    wall = time.perf_counter() - started
    close_stores()
    return {
        "wall_s": round(wall, 1),
        "runs_per_minute": round(RUNS / wall * 60, 1),
        "outcomes": summary.outcomes,
    }


def batches(tmp: Path) -> dict[str, Any]:
    settings = load_settings(runs_dir=tmp / "alone", sandbox="fallback", scripted_latency_s=LATENCY_S)
    started = time.perf_counter()
    alone = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    one = time.perf_counter() - started
    local = _batch(tmp, LocalExecutor(50), "local-50")
    ray = _batch(tmp, RayExecutor(workers=2, per_worker=25), "ray-2x25")
    return {
        "runs": RUNS,
        "simulated_model_latency_s": LATENCY_S,
        "model_calls_per_run": 9,
        "one_run_alone_wall_s": round(one, 1),
        "one_run_outcome": alone.outcome,
        "local_concurrency_50": local,
        "ray_2_workers_25_each": ray,
        "local_over_one_run": round(local["wall_s"] / one, 2),
        "ray_over_one_run": round(ray["wall_s"] / one, 2),
    }


def _rows(n: int) -> list[tuple[RunEntry, int, int]]:
    outcomes = ["PASSED", "PASSED", "PASSED", "ESCALATED", "ERROR", "TIMEOUT", None]
    rows = []
    for i in range(n):
        outcome = outcomes[i % len(outcomes)]
        entry = RunEntry(
            run_id=f"20261101-{i:06d}-t-{i:06x}",
            task=("code-delivery", "incident-review")[i % 2],
            outcome=outcome,
            state=outcome or "RUNNING",
            outcome_reason="",
            started_at=f"2026-11-01T{i:09d}",
            ended_at=None,
            cycles=1 + i % 3,
            tokens=10_000 + i % 5000,
            prompt_tokens=9000,
            cost=0.01,
            currency="USD",
            tool_calls=8,
            denied_tool_calls=i % 2,
            handoffs=9,
            tags={"batch": f"b{i % 100}"},
        )
        rows.append((entry, 0, 0))
    return rows


def _p50_ms(call: Any, repeat: int = 30) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def _store_figures(url: str, runs: Path) -> dict[str, Any]:
    runs.mkdir(parents=True, exist_ok=True)
    store = RunStore(url)
    started = time.perf_counter()
    rows = _rows(STORE_ROWS)
    for at in range(0, len(rows), 5000):
        store.record_many(rows[at : at + 5000], Path("/elsewhere/runs"))
    load_s = time.perf_counter() - started
    store.close()
    settings = load_settings(runs_dir=runs, store_url=url)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        page = _p50_ms(lambda: client.get("/api/runs").raise_for_status())
        filtered = _p50_ms(
            lambda: client.get("/api/runs", params={"outcome": "ESCALATED"}).raise_for_status()
        )
        metrics = _p50_ms(lambda: client.get("/api/stats").raise_for_status(), repeat=10)
        assert client.get("/api/runs").json()["total"] == STORE_ROWS
    stats = _p50_ms(lambda: compute_stats(runs, settings), repeat=10)
    close_stores()
    return {
        "rows": STORE_ROWS,
        "insert_s": round(load_s, 1),
        "api_runs_first_page_p50_ms": page,
        "api_runs_filtered_p50_ms": filtered,
        "api_stats_p50_ms": metrics,
        "pse_stats_p50_ms": stats,
    }


def store(tmp: Path) -> dict[str, Any]:
    figures = {"sqlite": _store_figures(f"sqlite:///{tmp / 'store.sqlite3'}", tmp / "sqlite-runs")}
    if PG_BIN is None:
        figures["postgresql"] = {"skipped": "PostgreSQL server binaries not installed"}
        return figures
    root = Path(tempfile.mkdtemp(prefix="pse-bench-pg-"))
    root.chmod(0o755)
    server = PostgresServer(root)
    try:
        figures["postgresql"] = _store_figures(server.new_database(), tmp / "pg-runs")
    finally:
        server.stop()
    return figures


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        return {"store_100k": store(tmp), "batch_200": batches(tmp)}
