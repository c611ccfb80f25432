"""What the trace knows how to do: replay itself as the events a live consumer got, reopen for resume,
and give its run-history row."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pse.config import load_settings
from pse.engine import Resume
from pse.events import Event
from pse.runner import prepare_run, run_to_end
from pse.trace import RunEntry, load_trace

RANK = {
    "cycle_start": 0,
    "retrieval": 1,
    "message": 2,
    "tool_call": 2,
    "verdict": 3,
    "transition": 4,
    "outcome": 5,
}


def _key(event: Event) -> tuple[str, int, str]:
    return (event.at, RANK[event.kind], event.model_dump_json())


@pytest.mark.parametrize("task", ["code-delivery", "incident-review"])
def test_a_replayed_trace_gives_the_events_the_live_run_gave(task: str, tmp_path: Path) -> None:
    live: list[Event] = []
    settings = load_settings(runs_dir=tmp_path, sandbox="fallback", kb_inject_top_k=2)
    summary = asyncio.run(run_to_end(prepare_run(task, settings, on_event=live.append)))
    trace = load_trace(Path(summary.trace))
    replayed = trace.events()
    assert [e.kind for e in replayed].count("retrieval") == sum(len(c.retrievals) for c in trace.cycles)
    if task == "incident-review":
        assert any(e.kind == "retrieval" for e in replayed)  # the knowledge injected into cycle 1
    # The same events (retrievals included), and the replay in time order.
    assert sorted(replayed, key=_key) == sorted(live, key=_key)
    assert [e.at for e in replayed] == sorted(e.at for e in replayed)


def test_the_history_row_from_disk_equals_the_row_of_the_model(tmp_path: Path) -> None:
    settings = load_settings(runs_dir=tmp_path, sandbox="fallback")
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    path = Path(summary.trace)
    assert RunEntry.of_json(json.loads(path.read_text())) == load_trace(path).row()
    assert load_trace(path).row().tokens == 30841


def test_reopened_drops_the_cancelled_cycle_and_keeps_what_it_spent(tmp_path: Path) -> None:
    settings = load_settings(runs_dir=tmp_path, sandbox="fallback")
    trace = load_trace(Path(asyncio.run(run_to_end(prepare_run("code-delivery", settings))).trace))
    reopened = Resume.of(trace).trace
    assert len(reopened.cycles) == len(trace.cycles) - 1 and reopened.outcome is None
    assert reopened.state == reopened.transitions[-1].to == "REVISING"
    assert reopened.cassette_positions == trace.cycles[-1].positions_at_start
    assert reopened.tokens == trace.tokens


def test_reopened_cuts_at_the_cycle_start_even_when_it_shares_the_millisecond(tmp_path: Path) -> None:
    # A replayed run is fast: cycle 1's last transition and cycle 2's start may carry the same time.
    settings = load_settings(runs_dir=tmp_path, sandbox="fallback")
    trace = load_trace(Path(asyncio.run(run_to_end(prepare_run("code-delivery", settings))).trace))
    same = trace.cycles[-1].started_at
    tied = trace.model_copy(
        update={"transitions": [t.model_copy(update={"at": same}) for t in trace.transitions]}, deep=True
    )
    reopened = Resume.of(tied).trace
    assert reopened.state == reopened.transitions[-1].to == "REVISING"
    assert len(reopened.transitions) == trace.cycles[-1].transitions_at_start == 4
