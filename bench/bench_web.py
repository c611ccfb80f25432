"""Dashboard benchmarks, against a real uvicorn server on a loopback port.

1. `GET /api/runs` latency with 10,000 small valid traces on disk: the first (cold) listing, warm
   listings (the history cache holds: one stat per run folder), a listing right after a trace changed
   (everything re-read), and a filtered one.
2. SSE delivery latency during demo runs: from the moment the engine hands an event to the broker
   (stamped by a wrapper around `LiveRun.publish`) to the moment a streaming client has parsed it.
"""

from __future__ import annotations

import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from pse.config import Settings
from pse.engine import Trace, write_trace
from pse.events import Event

TRACES = 10_000
LISTINGS = 40
DEMO_RUNS = 3


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _server(runs: Path) -> Iterator[str]:
    import uvicorn

    from pse.web import create_app

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(Settings(runs_dir=runs)), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


def _synthetic_traces(runs: Path, count: int) -> None:
    outcomes = ["PASSED", "PASSED", "ESCALATED", "ERROR", "TIMEOUT"]
    for i in range(count):
        trace = Trace(
            run_id=f"20260101-{i:06d}-bench-{i:06x}",
            task="code-delivery" if i % 2 else "incident-review",
            started_at=f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000+00:00",
            outcome=outcomes[i % len(outcomes)],  # type: ignore[arg-type]
        )
        write_trace(trace, runs / trace.run_id)


def _timed_get(client: httpx.Client, url: str, **params: Any) -> float:
    started = time.perf_counter()
    response = client.get(url, params=params)
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000


def _history_latency() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        started = time.perf_counter()
        _synthetic_traces(runs, TRACES)
        generated_s = time.perf_counter() - started
        with _server(runs) as base, httpx.Client(base_url=base, timeout=120) as client:
            cold = _timed_get(client, "/api/runs")
            warm = [_timed_get(client, "/api/runs", limit=50) for _ in range(LISTINGS)]
            filtered = [
                _timed_get(client, "/api/runs", task="code-delivery", outcome="PASSED")
                for _ in range(LISTINGS)
            ]
            changed = []
            for i in range(5):
                (runs / f"20260101-{i:06d}-bench-{i:06x}" / "trace.json").touch()
                changed.append(_timed_get(client, "/api/runs"))
            stats = [_timed_get(client, "/api/stats") for _ in range(LISTINGS)]
            total = client.get("/api/runs").json()["total"]
    assert total == TRACES, total
    return {
        "traces": TRACES,
        "generate_s": round(generated_s, 2),
        "cold_ms": round(cold, 1),
        "warm_p50_ms": _pct(warm, 0.5),
        "warm_p95_ms": _pct(warm, 0.95),
        "filtered_p50_ms": _pct(filtered, 0.5),
        "filtered_p95_ms": _pct(filtered, 0.95),
        "after_change_p50_ms": _pct(changed, 0.5),
        "stats_p50_ms": _pct(stats, 0.5),
        "stats_p95_ms": _pct(stats, 0.95),
    }


def _sse_latency() -> dict[str, Any]:
    from pse.web import LiveRun

    created: dict[tuple[str, int], float] = {}
    original = LiveRun.publish

    def stamped(self: LiveRun, event: Event) -> None:
        created[(self.run_id, len(self.events) + 1)] = time.perf_counter()
        original(self, event)

    latencies: list[float] = []
    LiveRun.publish = stamped  # type: ignore[method-assign]
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            _server(Path(tmp) / "runs") as base,
            httpx.Client(base_url=base, timeout=120) as client,
        ):
            for _ in range(DEMO_RUNS):
                run_id = client.post("/api/runs", json={"task": "code-delivery"}).json()["run_id"]
                with client.stream("GET", f"/api/runs/{run_id}/events") as stream:
                    number = None
                    for line in stream.iter_lines():
                        if line.startswith("id: "):
                            number = int(line[4:])
                        elif line.startswith("data: ") and number is not None:
                            latencies.append((time.perf_counter() - created[(run_id, number)]) * 1000)
                            number = None
    finally:
        LiveRun.publish = original  # type: ignore[method-assign]
    return {
        "demo_runs": DEMO_RUNS,
        "events": len(latencies),
        "p50_ms": _pct(latencies, 0.5),
        "p95_ms": _pct(latencies, 0.95),
        "max_ms": round(max(latencies), 2),
        "mean_ms": round(statistics.fmean(latencies), 2),
    }


def run() -> dict[str, Any]:
    """Both measurements; times in milliseconds."""
    return {"api_runs_latency": _history_latency(), "sse_delivery_latency": _sse_latency()}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
