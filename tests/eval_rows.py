"""A small evaluation built by hand for the report, API and browser tests: 3 instances × 2 arms.

Known figures (pse | single):
  claimed pass 2/3 | 3/3, true pass 2/3 | 1/3, false pass 0/2 | 2/3, first pass 1/3 | 1/3,
  rework cycles (0+1+2)/3 = 1.00 | 0.00, tokens 6,000 | 1,500, tokens per true pass 3,000 | 1,500,
  handoff failures 1/20 | 4/10, denied calls 0/12 | 3/6.
Paired pse vs single: both 1 (the hostile instance), only pse 1 (inst-a), only single 0, neither 1.

One instance id and one outcome reason are XSS payloads, and one hidden check prints markup.
"""

from __future__ import annotations

import json
from pathlib import Path

from pse.evals import HiddenResult, ResultRow

__all__ = ["EVAL_ID", "HOSTILE_INSTANCE", "HOSTILE_OUTPUT", "HOSTILE_REASON", "META", "ROWS", "write_folder"]

EVAL_ID = "eval-1"
HOSTILE_INSTANCE = "<script>alert(1)</script>"
HOSTILE_REASON = '"><img src=x onerror=alert(1)>'
HOSTILE_OUTPUT = "</pre></details><script>alert(2)</script><b onmouseover=alert(3)>x</b>"
META = {
    "eval_id": EVAL_ID,
    "suite": "tiny-suite",
    "task": "code-delivery",
    "description": "three instances, two arms",
    "arms": ["pse", "single"],
    "instances": ["inst-a", HOSTILE_INSTANCE, "inst-c"],
    "created_at": "2026-01-01T10:00:00+00:00",
}


def _row(
    instance: str,
    arm: str,
    *,
    outcome: str,
    hidden: bool,
    cycles: int,
    tokens: int,
    turns: int,
    failures: int,
    calls: int,
    denied: int,
    reason: str = "",
    output: str = "",
    minute: int = 0,
) -> ResultRow:
    claimed = outcome == "PASSED"
    return ResultRow(
        eval_id=EVAL_ID,
        instance=instance,
        arm=arm,
        run_id=f"20260101-10{minute:02d}00-code-delivery-{arm}{minute:02d}",
        claimed_outcome=outcome,
        outcome_reason=reason,
        claimed_pass=claimed,
        hidden=HiddenResult(passed=hidden, exit_code=0 if hidden else 1, duration_s=0.5, output=output),
        true_pass=claimed and hidden,
        false_pass=claimed and not hidden,
        cycles=cycles,
        first_pass=claimed and hidden and cycles == 1,
        tokens=tokens,
        cost=tokens / 1_000_000,
        wall_s=2.0 * cycles,
        role_turns=turns,
        handoff_failures=failures,
        format_repairs=failures,
        tool_calls=calls,
        denied_calls=denied,
        finished_at=f"2026-01-01T10:{minute:02d}:00+00:00",
    )


ROWS = [
    _row("inst-a", "pse", outcome="PASSED", hidden=True, cycles=1, tokens=1000, turns=6, failures=0,
         calls=4, denied=0, minute=1),
    _row(HOSTILE_INSTANCE, "pse", outcome="PASSED", hidden=True, cycles=2, tokens=2000, turns=6,
         failures=1, calls=4, denied=0, minute=2),
    _row("inst-c", "pse", outcome="ESCALATED", hidden=False, cycles=3, tokens=3000, turns=8, failures=0,
         calls=4, denied=0, reason="retries exhausted", output="2 failed, 5 passed", minute=3),
    _row("inst-a", "single", outcome="PASSED", hidden=False, cycles=1, tokens=400, turns=3, failures=2,
         calls=2, denied=1, reason=HOSTILE_REASON, output=HOSTILE_OUTPUT, minute=4),
    _row(HOSTILE_INSTANCE, "single", outcome="PASSED", hidden=True, cycles=1, tokens=500, turns=3,
         failures=1, calls=2, denied=1, minute=5),
    _row("inst-c", "single", outcome="PASSED", hidden=False, cycles=1, tokens=600, turns=4, failures=1,
         calls=2, denied=1, minute=6),
]  # fmt: skip


def write_folder(evals: Path, *, torn_line: bool = True, summary: bool = False) -> Path:
    """The evaluation's folder under `evals`: eval.json and results.jsonl (with a torn last line)."""
    from pse.evals import summarize_rows

    folder = evals / EVAL_ID
    folder.mkdir(parents=True)
    (folder / "eval.json").write_text(json.dumps(META), encoding="utf-8")
    lines = [r.model_dump_json() for r in ROWS]
    text = "\n".join(lines) + "\n"
    if torn_line:
        text += lines[0][: len(lines[0]) // 2]  # a crash in the middle of a write
    (folder / "results.jsonl").write_text(text, encoding="utf-8")
    if summary:
        done = summarize_rows(
            ROWS, eval_id=EVAL_ID, suite=META["suite"], task=META["task"], arms=META["arms"],
            now="2026-01-01T10:06:00+00:00",
        )  # fmt: skip
        (folder / "summary.json").write_text(done.model_dump_json(), encoding="utf-8")
    return folder
