"""The redesigned engine reproduces the traces of the one before it, byte for byte but ids and times.

`tests/data/reference_traces.json` was written by the engine before issue 11's redesign (a
SelectorGroupChat with scoped contexts and routing callbacks) for the two reference tasks and for
code-delivery in the `history` baseline mode. The same runs today must give the same traces: every
message, tool call and its output, gate, verdict, transition, token count and counter.

Regenerated once, on purpose (issue 17, cache-friendly prompts): a revise cycle's step_buffer stopped
repeating the fixed plan, which now travels ahead of it as its own message. That regeneration changed
only the revise cycles' `step_buffer`, `step_buffer_tokens` and prompt token counts, nothing else.
Regenerated again (issue 29): the prompts lost their worked examples and the Specialist's first phase
opens with a note of the outputs it is to write; only prompt token counts changed. And once more (issue
29, on the 1.5B model's runs): a failing test's record keeps pytest's first line of why (`message`), a
revise cycle's step_buffer lists the failing tests with it, and the Evaluator's prompt words PARTIAL and
FAIL apart; the step_buffers, the test records and prompt token counts changed, nothing else. Then
code-delivery's Specialist prompt said which imports its files hold, and its Evaluator prompt that a
returned input is no new list: their prompt token counts only. Then the Specialist's first note quoted
what the task says of its first output (code-delivery's and incident-review's prompt token counts only).
Then the task message stopped listing `inputs.json`, whose inputs it shows itself (incident-review's
`task_message` and prompt token counts only), and code-delivery's Specialist prompt that the test file's
imports end with two empty lines (its prompt token counts only). Then code-delivery seeded its own
acceptance tests (`test_acceptance.py`): its task message, the Evaluator's pytest results (4 failed, 7
passed; then 11 passed), the revise cycle's step_buffer (the task tests' messages), the sealed evidence
lists and prompt token counts changed, nothing else. Then (issue 45) run_pytest measured the delivered
code from outside it, each author's tests in a session of their own: the run_pytest outputs (a section per
session: the task's tests, the Specialist's), their facts (`report` is `checker`; `exercised`, the calls
into each declared module, replaces in-process `coverage`), the Evaluator's prompts that quote them and
their prompt token counts (code-delivery 28,634 → 28,853 tokens), a run_check's `unproven` (incident-
review's data check: `[]`), and the new `delivery` (what the run delivers) changed, nothing else.
Then (issue 44) the Evaluator's phase opens with the text of the outputs it judges, code-delivery's
Specialist prompt states requirements only, and inputs are seeded raw as `inputs/NAME` (no `inputs.json`):
prompt token counts, and incident-review's evidence list and check output (`inputs/service`), changed,
nothing else.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pse.config import load_settings
from pse.runner import prepare_run, run_to_end

REFERENCE = json.loads((Path(__file__).parent / "data" / "reference_traces.json").read_text())
RUNS = {
    "code-delivery": ("code-delivery", {}),
    "incident-review": ("incident-review", {}),
    "code-delivery-history": ("code-delivery", {"context_mode": "history"}),
}


ADDED_SINCE = {
    "estimated": 0,
    "thought": None,
    "thought_tokens": 0,
    "late": False,
    "repairs": [],
    "stopped": None,
    "tags": {},
    "enforced": True,
    "answers": [],
    "clarification": None,
    "approvals": [],
    "approval": None,
    "cached": 0,
    "depends_on": [],
    "step": None,
    "output_steps": {},
    "steps": [],
    "rate_limit": None,
    "normalised": {},
    "repository": None,
    "findings": [],
}
"""Trace fields added after the reference was written, with the value they have in these runs."""
MEASURED_SINCE = {"prefix_counted", "prefix_reusable", "model_ms", "finish_reason"}
"""Figures added since that depend on the run, dropped here: the prefix figures (tests/test_prefix.py),
a message's model time and finish reason (tests/test_models_providers.py)."""


def _without_additions(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_additions(v)
            for k, v in value.items()
            if not (k in ADDED_SINCE and v == ADDED_SINCE[k]) and k not in MEASURED_SINCE
        }
    if isinstance(value, list):
        return [_without_additions(v) for v in value]
    return value


def normalize(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace without what differs between two runs of the same cassette: ids, times, paths."""
    trace = _without_additions(trace)
    dropped = {
        "run_id",
        "started_at",
        "ended_at",
        "settings",
        "escalation",
        "report",
        "sandbox",
        "schema_version",
    }
    trace = {k: v for k, v in trace.items() if k not in dropped}
    assert trace.pop("probes") == []  # newer than the reference: a scripted run sends no probe (issue 47)
    for transition in trace["transitions"]:
        transition.pop("at", None)
    for cycle in trace["cycles"]:
        cycle.pop("transitions_at_start", None)  # added since the reference: a count, not a behaviour
        cycle.pop("started_at", None)
        cycle.pop("ended_at", None)
        assert cycle.pop("drifts") == []  # newer than the reference: no drift (hand-written turns)
        for message in cycle["messages"]:
            message.pop("at", None)
        for call in cycle["tool_calls"]:
            call.pop("at", None)
            call.pop("ms", None)
        for retrieval in cycle["retrievals"]:
            retrieval.pop("at", None)
            retrieval.pop("run_id", None)
    return trace


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_reference_runs_give_the_reference_traces(name: str, tmp_path: Path) -> None:
    task, options = RUNS[name]
    settings = load_settings(runs_dir=tmp_path, sandbox="fallback", **options)
    summary = asyncio.run(run_to_end(prepare_run(task, settings)))
    trace = normalize(json.loads(Path(summary.trace).read_text()))
    reference = {k: v for k, v in REFERENCE[name].items() if k != "schema_version"}  # v1 then, v2 now
    assert json.loads(json.dumps(trace, sort_keys=True)) == reference
