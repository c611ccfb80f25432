"""The engine judges a review once (`pse.engine._decide.judge`) and its verdict event carries the decision.

A scripted cassette in which the Evaluator says PASS over a failing pytest: the hard gate makes the
cycle PARTIAL. The event the engine sends says PARTIAL, as the trace does, and the terminal's live
view shows that decision as sent (the dashboard's side is `test_judge_once_browser.py`).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

from pse.cli._live import LiveView
from pse.config import load_settings
from pse.engine import Trace, load_trace
from pse.engine._decide import judge
from pse.events import Event, GateRecord, VerdictEvent, VerdictRecord
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry

ROOT = Path(__file__).parents[1]
_TURNS = json.loads(
    (TaskRegistry.discover(None).get("code-delivery").cassette_path).read_text()  # type: ignore[union-attr]
)["turns"]
PLAN, S_BAD, S_REPORT, E_CHECKS, _, _, _, _, E_PASS = ((t["role"], t["content"]) for t in _TURNS)
PASS_OVER_A_FAILING_PYTEST = [PLAN, S_BAD, S_REPORT, E_CHECKS, E_PASS]
"""The buggy quicksort, pytest run and failing, then the Evaluator's PASS all the same."""


async def gated_run(tmp_path: Path) -> tuple[Trace, list[Event]]:
    """Run the cassette above with no retries; return its trace and every event the engine sent."""
    cassette = tmp_path / "cassette.json"
    turns = [{"role": role, "content": content} for role, content in PASS_OVER_A_FAILING_PYTEST]
    cassette.write_text(json.dumps({"version": 1, "turns": turns}))
    settings = load_settings(
        cassette=cassette, runs_dir=tmp_path / "runs", max_partial_retries=0, max_fail_retries=0
    )
    events: list[Event] = []
    summary = await run_to_end(prepare_run("code-delivery", settings, on_event=events.append))
    return load_trace(Path(summary.trace)), events


def test_judge_turns_only_an_enforced_gate_failure_under_a_pass_into_partial() -> None:
    failed = GateRecord(passed=False, failures=["check:pytest: 2 failed", "outputs_exist: missing: a.py"])
    unenforced = failed.model_copy(update={"enforced": False})
    passed = GateRecord(passed=True)
    ok = VerdictRecord(status="PASS", reason_code="ALL_MET")
    fail = VerdictRecord(status="FAIL", reason_code="WRONG_APPROACH")
    cases = [(ok, failed), (ok, passed), (ok, unenforced), (fail, failed), (None, failed)]
    judged = [
        judge(verdict, gate, enforced=gate.enforced, no_verdict="REVIEW_ERROR: x") for verdict, gate in cases
    ]
    assert [(j.result, j.reason) for j in judged] == [
        ("PARTIAL", "HARD_GATE: check:pytest: 2 failed; outputs_exist: missing: a.py"),
        ("PASS", "ALL_MET"),
        ("PASS", "ALL_MET"),
        ("FAIL", "WRONG_APPROACH"),
        ("ERROR", "REVIEW_ERROR: x"),
    ]


async def test_the_verdict_event_carries_the_cycle_result_the_trace_records(tmp_path: Path) -> None:
    trace, events = await gated_run(tmp_path)
    cycle = trace.cycles[0]
    assert cycle.verdict is not None and cycle.verdict.status == "PASS"
    assert cycle.result == "PARTIAL" and cycle.result_reason.startswith("HARD_GATE: check:pytest")
    sent = [e for e in events if isinstance(e, VerdictEvent)]
    assert [(e.cycle, e.result, e.result_reason) for e in sent] == [(1, "PARTIAL", cycle.result_reason)]
    assert trace.outcome == "ESCALATED"
    # the events rebuilt from the trace (what the dashboard replays) say the same
    rebuilt = [e for e in trace.events() if isinstance(e, VerdictEvent)]
    assert [(e.result, e.result_reason) for e in rebuilt] == [("PARTIAL", cycle.result_reason)]

    # the terminal's live view, fed the run's events, shows the engine's PARTIAL
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    with LiveView(console, "code-delivery", trace.run_id) as view:
        for event in events:
            view.on_event(event)
    engine_lines = [line.plain.strip() for line in view.lines if line.plain.strip().startswith("Engine")]
    assert engine_lines == ["Engine cycle 1: Evaluator PASS → gate `check:pytest` failed → PARTIAL"]


def test_the_gate_to_partial_rule_is_written_once() -> None:
    # `HARD_GATE: ` is the reason the rule gives; only the engine's judge builds it, and neither the CLI
    # nor the dashboard tests a PASS against the gate's `enforced` to find the result again.
    built = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "src" / "pse").rglob("*.py"))
        if re.search(r"""["']HARD_GATE: ["']""", path.read_text(encoding="utf-8"))
    ]
    assert built == ["src/pse/engine/_decide.py"]
    shown = [ROOT / "web" / "src" / "lib" / "run.js", ROOT / "src" / "pse" / "cli" / "_live.py"]
    for path in shown:
        assert not re.search(r'"PASS".{0,80}enforced|enforced.{0,80}"PASS"', path.read_text(encoding="utf-8"))
