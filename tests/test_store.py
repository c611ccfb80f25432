"""The run store on both backends: SQLite (embedded) and a real PostgreSQL server started by the suite.

Migrations, concurrent writers from several processes, the engine writing a row at each cycle end,
`pse stats` and the dashboard reading the store, `pse store rebuild` equal to the live index, a store
that is down (the run goes on), and bad store URLs.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

import pse.store._schema as schema
from cli_support import pse
from pg_support import needs_postgres, postgres_server, postgres_url  # noqa: F401  (fixtures)
from pse.config import load_settings
from pse.exceptions import ConfigError
from pse.history import RunHistory, stats_of
from pse.runner import prepare_run, run_to_end
from pse.store import SCHEMA_VERSION, RunFilter, RunStore, close_stores, open_store
from pse.trace import RunEntry, Trace, load_trace
from pse.web import create_app

BACKENDS = ["sqlite", pytest.param("postgresql", marks=needs_postgres)]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite3'}"
    return str(request.getfixturevalue("postgres_url"))


def _entry(run_id: str, outcome: str | None = "PASSED", cycles: int = 1, **fields: object) -> RunEntry:
    base: dict[str, object] = {
        "run_id": run_id,
        "task": "t",
        "outcome": outcome,
        "outcome_reason": "",
        "started_at": run_id,
        "ended_at": None,
        "cycles": cycles,
        "tokens": 1000 * cycles,
        "cost": 0.5 * cycles,
        "currency": "EUR",
        "tool_calls": 4,
        "denied_tool_calls": 1,
    }
    return RunEntry(**(base | fields))


# ---- schema ----------------------------------------------------------------------------------------


def test_migrations_apply_once_and_in_order(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(store_url)
    assert (store.migrated_from, store.version) == (0, SCHEMA_VERSION)
    store.record(_entry("r1"), Path("/runs"))
    store.close()
    again = RunStore(store_url)
    assert again.migrated_from == SCHEMA_VERSION  # nothing to apply
    again.close()

    def v2(conn: sa.engine.Connection) -> None:
        conn.execute(sa.text("ALTER TABLE runs ADD COLUMN model VARCHAR(200)"))

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, v2])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    upgraded = RunStore(store_url)
    assert upgraded.migrated_from == SCHEMA_VERSION
    with upgraded._read() as conn:
        assert conn.execute(sa.text("SELECT version FROM schema_version")).scalar() == SCHEMA_VERSION + 1
        assert conn.execute(sa.text("SELECT model FROM runs WHERE run_id = 'r1'")).scalar() is None
    assert [e.run_id for e in upgraded.entries()] == ["r1"]  # the rows survived
    upgraded.close()


def test_a_store_from_a_newer_pse_is_refused(store_url: str) -> None:
    RunStore(store_url).close()
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE schema_version SET version = 99"))
    engine.dispose()
    with pytest.raises(ConfigError, match="schema version 99, newer than this PSE knows"):
        RunStore(store_url)


def test_bad_urls_say_what_to_use(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no run store URL; use postgresql://USER:PASSWORD@HOST:PORT/DB"):
        RunStore("mysql://u:secret@db/x")
    with pytest.raises(ConfigError) as info:
        RunStore("mysql://u:secret@db/x")
    assert "secret" not in str(info.value)


# ---- rows, filters, totals --------------------------------------------------------------------------


def test_rows_filters_and_totals_equal_the_python_arithmetic(store_url: str) -> None:
    store = RunStore(store_url)
    entries = [
        _entry("r1", "PASSED", 1, tags={"batch": "b1", "arm": "pse"}),
        _entry("r2", "PASSED", 3, tags={"batch": "b1"}, prompt_tokens=900, cached_tokens=300),
        _entry("r3", "ESCALATED", 4, tags={"batch": "b2"}, prefix_counted=100, prefix_reusable=60),
        _entry("r4", None, 1, state="RUNNING"),
        _entry("r5", "ERROR", 1, task="other", handoffs=10, handoff_failures=2),
    ]
    store.record_many([(e, 0, 0) for e in entries], Path("/runs"))
    store.record(_entry("r2", "PASSED", 2, tags={"batch": "b1"}), Path("/runs"))  # replaced, tags too
    entries[1] = _entry("r2", "PASSED", 2, tags={"batch": "b1"})
    assert [e.run_id for e in store.entries()] == ["r5", "r4", "r3", "r2", "r1"]
    assert store.entries(limit=2, offset=1) == [entries[3], entries[2]]
    assert [e.run_id for e in store.entries(RunFilter(tags=(("batch", "b1"),)))] == ["r2", "r1"]
    assert [e.run_id for e in store.entries(RunFilter(outcome="RUNNING"))] == ["r4"]
    assert [e.run_id for e in store.entries(RunFilter(task="other"))] == ["r5"]
    assert store.count(RunFilter(finished=True)) == 4
    from pse.history import stats_of_totals

    assert stats_of_totals(store.totals()) == stats_of(entries)
    assert store.totals()["cycles_to_pass"] == {"1": 1, "2": 1}
    b1 = [e for e in entries if e.tags.get("batch") == "b1"]
    assert stats_of_totals(store.totals(RunFilter(tags=(("batch", "b1"),)))) == stats_of(b1)
    assert store.forget(["r1", "nope"]) == 1 and store.get("r1") is None
    store.close()


def _write_rows(url: str, worker: int, n: int) -> None:
    store = RunStore(url)
    for i in range(n):
        store.record(_entry(f"w{worker}-{i:03d}", tags={"worker": str(worker)}), Path("/runs"))
    store.close()


def test_concurrent_writers_in_several_processes_lose_nothing(store_url: str) -> None:
    RunStore(store_url).close()  # migrated once; the writers race on rows, not on the schema
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_rows, args=(store_url, w, 40)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
        assert p.exitcode == 0
    store = RunStore(store_url)
    assert store.count() == 160
    assert all(store.count(RunFilter(tags=(("worker", str(w)),))) == 40 for w in range(4))
    store.close()


def test_first_open_races_on_the_migration(store_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_rows, args=(store_url, w, 3)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
        assert p.exitcode == 0
    store = RunStore(store_url)
    assert store.count() == 9
    store.close()


# ---- the engine writes, the readers read -------------------------------------------------------------


def _run(runs: Path, store_url: str | None, **overrides: object) -> Trace:
    import asyncio

    extra = {"store_url": store_url} if store_url else {}
    settings = load_settings(runs_dir=runs, sandbox="fallback", **extra, **overrides)  # type: ignore[arg-type]
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings, tags={"batch": "x"})))
    return load_trace(Path(summary.trace))


def test_the_engine_writes_the_row_at_every_cycle_end(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int, str | None]] = []
    real = RunStore.record

    def spy(self: RunStore, entry: RunEntry, root: Path, **kw: int) -> None:
        real(self, entry, root, **kw)
        row = self.get(entry.run_id)
        assert row is not None
        seen.append((row.state, row.cycles, row.outcome))

    monkeypatch.setattr(RunStore, "record", spy)
    trace = _run(tmp_path / "runs", store_url)
    assert trace.outcome == "PASSED" and len(trace.cycles) == 2
    # written when the run starts, at each cycle end (a PARTIAL, then the PASS), and with the outcome
    assert (seen[0][2], seen[-1]) == (None, ("PASSED", 2, "PASSED"))
    assert ("REVISING", 1, None) in seen
    row = open_store(load_settings(runs_dir=tmp_path / "runs", store_url=store_url)).get(trace.run_id)
    assert row == trace.row() and row.tags == {"batch": "x"}


def test_stats_and_dashboard_read_the_store_and_rebuild_equals_the_live_index(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    traces = [_run(runs, store_url), _run(runs, store_url, token_budget=5000)]
    assert [t.outcome for t in traces] == ["PASSED", "TIMEOUT"]
    monkeypatch.setenv("PSE_STORE_URL", store_url)
    settings = load_settings(runs_dir=runs)
    store = open_store(settings)
    # a row only the store has (a run another machine indexed): the readers show it, so they read the store
    store.record(_entry("zz-elsewhere", "PASSED", 1, currency="USD"), Path("/other/machine/runs"))
    live = store.entries()
    assert live[0].run_id == "zz-elsewhere" and len(live) == 3

    code, stdout, _ = pse(monkeypatch, capsys, "stats", "--runs-dir", str(runs), "--json")
    assert code == 0
    assert json.loads(stdout) == json.loads(stats_of(live).model_dump_json())
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8080") as client:
        page = client.get("/api/runs").json()
        assert page["total"] == 3 and [r["run_id"] for r in page["runs"]] == [e.run_id for e in live]
        assert client.get("/api/runs", params={"outcome": "TIMEOUT"}).json()["total"] == 1
        metrics = client.get("/api/stats").json()
        assert metrics["runs"] == 3 and metrics["cycles_to_pass"] == {"1": 1, "2": 1}

    code, stdout, _ = pse(monkeypatch, capsys, "store", "rebuild", "--runs-dir", str(runs), "--json")
    assert code == 0 and json.loads(stdout)["indexed"] == 2
    assert store.entries() == live  # the folder's rows re-read from the traces equal what the engine wrote
    # and from nothing: a fresh store rebuilt from the folder equals the engine's rows of that folder
    close_stores()
    fresh = RunStore(f"sqlite:///{tmp_path / 'fresh.sqlite3'}")
    assert fresh.rebuild(runs).indexed == 2
    assert fresh.entries() == [e for e in live if e.run_id != "zz-elsewhere"]
    fresh.close()


def test_a_run_folder_the_store_never_saw_is_indexed_on_read(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    trace = _run(runs, None)
    (runs / "runs.sqlite3").unlink()  # a runs folder from before the store
    for extra in ("runs.sqlite3-wal", "runs.sqlite3-shm"):
        (runs / extra).unlink(missing_ok=True)
    close_stores()
    history = RunHistory(runs, load_settings(runs_dir=runs))
    assert [e.run_id for e in history.entries()] == [trace.run_id]


def test_a_store_that_is_down_never_stops_a_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens here once the socket closes
    url = f"postgresql://pse:hunter2@127.0.0.1:{port}/pse?connect_timeout=2"
    with caplog.at_level(logging.WARNING, logger="pse.store"):
        trace = _run(tmp_path / "runs", url)
    assert trace.outcome == "PASSED"
    warnings = [r.getMessage() for r in caplog.records if r.name == "pse.store"]
    assert len(warnings) == 1, warnings  # said once, not at every save
    assert "pse store rebuild" in warnings[0] and "hunter2" not in warnings[0]
    fresh = RunStore(f"sqlite:///{tmp_path / 'later.sqlite3'}")
    assert [e.run_id for e in (fresh.rebuild(tmp_path / "runs"), fresh.entries())[1]] == [trace.run_id]
    fresh.close()


def test_a_bad_store_url_stops_the_run_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PSE_STORE_URL", "mysql://u:secret@db/x")
    code, _, stderr = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(tmp_path / "runs"))
    assert code == 2
    assert "no run store URL" in stderr and "secret" not in stderr
    assert not [p for p in (tmp_path / "runs").glob("*") if p.is_dir()]  # nothing left behind
