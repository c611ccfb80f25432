"""The incident-review reference task end to end on its cassette: rules, knowledge, check, report."""

from __future__ import annotations

import json
from pathlib import Path

from pse.config import load_settings
from pse.engine import load_trace
from pse.events import RetrievalEvent
from pse.runner import prepare_run, run_to_end


async def test_incident_review_passes_with_evidence_knowledge_and_report(tmp_path: Path) -> None:
    events: list[object] = []
    prepared = prepare_run("incident-review", load_settings(runs_dir=tmp_path), on_event=events.append)
    summary = await run_to_end(prepared)
    trace = load_trace(Path(summary.trace))
    assert summary.outcome == "PASSED", summary.outcome_reason

    # The rules summary (zero model calls) is part of the opening message and of the workspace.
    assert "## Rules summary (computed without a model)" in trace.task_message
    assert (prepared.workspace / "rules_summary.json").is_file()

    # The required check ran, by the Evaluator, and passed; the gates agree.
    cycle = trace.cycles[0]
    checks = [c for c in cycle.tool_calls if c.tool == "run_check"]
    assert [(c.requester, c.arguments["name"], c.facts["exit_code"]) for c in checks] == [
        ("Evaluator", "evidence_index", 0)
    ]
    assert cycle.gate.passed

    # The Specialist consulted the knowledge base: the call is audited and filed as a retrieval with citations.
    search = next(c for c in cycle.tool_calls if c.tool == "search_knowledge")
    assert search.requester == "Specialist" and search.decision == "allowed"
    assert [r.query for r in cycle.retrievals] == [search.arguments["query"]]
    cited = cycle.retrievals[0].results
    assert len(cited) == 5 and {"file", "start_line", "end_line", "score"} <= set(cited[0])
    assert any(isinstance(e, RetrievalEvent) for e in events)  # the same event reaches live consumers

    # The deliverable is extracted as the run's report.
    report = Path(summary.report or "").read_text()
    assert report == (prepared.workspace / "incident_report.md").read_text()
    index = json.loads((prepared.workspace / "evidence_index.json").read_text())
    assert all(f"[{item['id']}]" in report for item in index["evidence"][:3])
