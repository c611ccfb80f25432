"""Independent read-only calls of one <tool_calls> block run at the same time; writes keep the order."""

from __future__ import annotations

import itertools
from datetime import datetime
from pathlib import Path

import pytest

from pse.config import Settings
from pse.events import ToolCallRecord
from pse.protocol import render_tool_calls
from pse.toolagent import Policy, ToolExecutor

SLOW_TEST = "import time\n\n\ndef test_slow():\n    time.sleep(1.5)\n"


def _span(record: ToolCallRecord) -> tuple[float, float]:
    """When the call ran: (start, end) in seconds, from its audit record (`at` is when it ended)."""
    end = datetime.fromisoformat(record.at).timestamp()
    return end - record.ms / 1000, end


def _executor(ws: Path, parallel: int, **kw: object) -> ToolExecutor:
    settings = Settings(sandbox="fallback", tool_parallel_calls=parallel, tool_timeout_s=60)
    return ToolExecutor(ws, settings, Policy.default(settings), **kw)  # type: ignore[arg-type]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "test_slow.py").write_text(SLOW_TEST)
    (root / "notes.md").write_text("notes\n")
    return root


CHECKS = render_tool_calls(
    [
        ("run_pytest", {"target": "."}),
        ("run_ruff", {"target": "."}),
        ("read_file", {"path": "notes.md"}),
        ("bash", {"command": "sleep 1; echo slept"}),
    ]
)


async def test_a_block_of_checks_and_a_read_runs_at_once_and_answers_in_order(ws: Path) -> None:
    seen: list[ToolCallRecord] = []
    batch = await _executor(ws, 4, on_record=seen.append).execute("Evaluator", CHECKS)
    assert [r.tool for r in batch.records] == ["run_pytest", "run_ruff", "read_file", "bash"]
    assert [r.index for r in batch.records] == [1, 2, 3, 4] and seen == list(batch.records)
    assert [r.status for r in batch.records] == ["ok", "ok", "ok", "ok"], [r.output for r in batch.records]
    assert batch.text.index('index="1"') < batch.text.index('index="2"') < batch.text.index('index="4"')
    spans = [_span(r) for r in batch.records]
    pytest_span, bash_span = spans[0], spans[3]
    assert max(pytest_span[0], bash_span[0]) < min(pytest_span[1], bash_span[1]), spans  # they overlapped


async def test_one_at_a_time_when_the_bound_is_one(ws: Path) -> None:
    batch = await _executor(ws, 1).execute("Evaluator", CHECKS)
    spans = [_span(r) for r in batch.records]
    for earlier, later in itertools.pairwise(spans):
        assert earlier[1] <= later[0] + 0.01, spans  # each starts once the one before ended


async def test_calls_after_a_write_keep_their_order_and_see_it(ws: Path) -> None:
    text = render_tool_calls(
        [
            ("read_file", {"path": "notes.md"}),
            ("write_file", {"path": "draft.md", "content": "changed\n"}),  # the task's notes.md is read-only
            ("read_file", {"path": "draft.md"}),
            ("list_files", {"path": "."}),
        ]
    )
    batch = await _executor(ws, 4).execute("Specialist", text)
    assert [r.status for r in batch.records] == ["ok", "ok", "ok", "ok"]
    assert "notes" in batch.records[0].output and "changed" in batch.records[2].output
    spans = [_span(r) for r in batch.records]
    assert spans[1][1] <= spans[2][0] + 0.01  # the read after the write started after it


async def test_budgets_and_denials_hold_when_calls_run_at_once(ws: Path) -> None:
    settings = Settings(sandbox="fallback", tool_parallel_calls=4, tool_calls_per_cycle=2)
    executor = ToolExecutor(ws, settings, Policy.default(settings))
    text = render_tool_calls(
        [("read_file", {"path": "notes.md"})] * 3 + [("write_file", {"path": "x", "content": ""})]
    )
    batch = await executor.execute("Evaluator", text)
    assert [(r.status, r.rule) for r in batch.records] == [
        ("ok", "roles.Evaluator.read_file"),
        ("ok", "roles.Evaluator.read_file"),
        ("denied", "budget.Evaluator.read_file"),
        ("denied", "policy.default_deny"),
    ]
