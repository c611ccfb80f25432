"""Run history: entries from traces, the per-trace cache, statistics and run-id validation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import pse.store._store
from pse.exceptions import UserError
from pse.history import RunHistory, run_dir_of, stats_of
from pse.trace import RunEntry


def _trace(
    runs: Path, run_id: str, outcome: str | None, cycles: int, denied: int = 0, started: str = ""
) -> None:
    calls = [{"decision": "allowed"}] * 2 + [{"decision": "denied"}] * denied
    data = {
        "run_id": run_id,
        "task": "t",
        "outcome": outcome,
        "outcome_reason": "",
        "started_at": started or run_id,
        "ended_at": None,
        "cycles": [{"tool_calls": calls}] + [{"tool_calls": []}] * (cycles - 1),
        "tokens": {"total": 1000 * cycles},
        "cost": {"amount": 0.5 * cycles, "currency": "EUR"},
    }
    (runs / run_id).mkdir(parents=True, exist_ok=True)
    (runs / run_id / "trace.json").write_text(json.dumps(data))


def test_entries_newest_first_and_stats(tmp_path: Path) -> None:
    _trace(tmp_path, "r1", "PASSED", 1)
    _trace(tmp_path, "r2", "PASSED", 3, denied=2)
    _trace(tmp_path, "r3", "ESCALATED", 4)
    _trace(tmp_path, "r4", None, 1)  # still running: listed, not counted
    (tmp_path / "junk").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "trace.json").write_text("{not json")
    entries = RunHistory(tmp_path).entries()
    assert [e.run_id for e in entries] == ["r4", "r3", "r2", "r1"]
    stats = stats_of(entries)
    assert stats.runs == 3 and stats.outcomes == {"PASSED": 2, "ESCALATED": 1}
    assert stats.first_cycle_pass_rate == round(1 / 3, 4) and stats.mean_cycles_to_pass == 2.0
    assert (stats.tool_calls, stats.denied_tool_call_rate) == (8, 0.25)
    assert (stats.tokens_per_passed_run, stats.cost_per_passed_run, stats.currency) == (2000.0, 1.0, "EUR")


def test_store_reads_only_new_and_unfinished_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store is the index: a read re-reads no finished trace, only folders it has not seen and runs
    still going; a vanished folder's row goes; a finished trace rewritten by hand needs `rebuild`."""
    for i in range(5):
        _trace(tmp_path, f"r{i}", "PASSED", 1)
    _trace(tmp_path, "live", None, 1)
    history = RunHistory(tmp_path, sync_every_s=0)
    reads: list[str] = []
    real_entry = RunEntry.of_json
    monkeypatch.setattr(
        pse.store._store.RunEntry, "of_json", lambda data: reads.append(data["run_id"]) or real_entry(data)
    )
    assert len(history.entries()) == 6 and len(reads) == 6
    assert len(history.entries()) == 6 and len(reads) == 6  # nothing changed: nothing re-read
    _trace(tmp_path, "r2", "ESCALATED", 2)  # a finished run rewritten outside PSE
    _trace(tmp_path, "live", "PASSED", 2)  # the unfinished run went on
    _trace(tmp_path, "r9", "PASSED", 1)  # added
    shutil.rmtree(tmp_path / "r0")  # removed
    entries = history.entries()
    assert sorted(reads[6:]) == ["live", "r9"]
    assert sorted(e.run_id for e in entries) == ["live", "r1", "r2", "r3", "r4", "r9"]
    assert next(e for e in entries if e.run_id == "live").outcome == "PASSED"
    assert next(e for e in entries if e.run_id == "r2").outcome == "PASSED"  # not re-read …
    report = history.store.rebuild(tmp_path)
    assert (report.indexed, report.dropped) == (6, 0)
    assert next(e for e in history.entries() if e.run_id == "r2").outcome == "ESCALATED"  # … until rebuilt


@pytest.mark.parametrize("bad", ["../x", "..", ".", "a/b", "", ".hidden", "x" * 300])
def test_run_ids_are_plain_folder_names(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UserError, match="is not a run id"):
        run_dir_of(tmp_path, bad)


def test_unknown_run_says_how_to_list(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="pse trace list"):
        run_dir_of(tmp_path, "20260101-000000-t-abcdef")


def test_the_reading_commands_read_the_embedded_store_without_opening_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`list_runs` and `compute_stats` (`pse trace list`, `pse stats`) read an embedded store in step with
    its folder through the standard library, and get what the store answers; a store out of step is
    the store's to sync, and a folder without a store is read from its traces, creating nothing."""
    from pse._run_index import read_runs
    from pse.config import load_settings
    from pse.history import compute_stats, list_runs

    runs = tmp_path / "runs"
    _trace(runs, "r1", "PASSED", 1, started="2026-01-01T10:00")
    _trace(runs, "r2", "ESCALATED", 2, denied=1, started="2026-01-01T11:00")
    _trace(runs, "r3", None, 1, started="2026-01-01T11:00")  # the same start: the run id decides
    settings = load_settings(runs_dir=runs)
    assert read_runs(runs) is not None and not (runs / "runs.sqlite3").exists()
    no_store = (list_runs(runs, settings), compute_stats(runs, settings))
    assert not (runs / "runs.sqlite3").exists()  # a reader creates nothing

    history = RunHistory(runs, settings, sync_every_s=0)
    store_entries, store_stats = history.entries(), history.stats()[0]
    assert [e.run_id for e in store_entries] == ["r3", "r2", "r1"]
    assert no_store == (store_entries, store_stats)
    assert read_runs(runs) == store_entries and read_runs(runs, limit=2) == store_entries[:2]

    class Unopened(RunHistory):
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("the store was opened")

    with monkeypatch.context() as patched:
        patched.setattr("pse.history.RunHistory", Unopened)
        assert list_runs(runs, settings, limit=1) == store_entries[:1]
        assert compute_stats(runs, settings) == store_stats

    _trace(runs, "r4", "PASSED", 3, started="2026-01-01T12:00")  # a folder the store has not seen yet
    assert read_runs(runs) is None
    assert [e.run_id for e in list_runs(runs, settings)] == ["r4", "r3", "r2", "r1"]  # the store synced
    assert read_runs(runs) == history.entries()
    assert compute_stats(runs, settings) == history.stats()[0]
    _trace(runs, "r3", "PASSED", 2, started="2026-01-01T11:00")  # the running run went on
    assert read_runs(runs) is None and list_runs(runs, settings)[1].outcome == "PASSED"
