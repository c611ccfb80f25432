"""ToolAgent figures: DSML parse throughput, per-call overhead, and bash('true') latency per sandbox mode."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from pse.config import Settings
from pse.protocol import ParamSpec, parse_tool_calls, render_tool_calls
from pse.sandbox import bwrap_problem
from pse.toolagent import Policy, ToolExecutor
from pse.tools import ToolOutcome, ToolSpec, builtin_tools

_CODE_LINE = 'if a < b and c & d: print("<parameter name=x>", a[i] >= 0)  # &lt; stays literal\n'


def _message_100kb() -> str:
    content = _CODE_LINE * (100_000 // len(_CODE_LINE))
    block = render_tool_calls([("write_file", {"path": "big.py", "content": content}), ("list_files", {})])
    return f"I will write the file now.\n```xml\n{block}\n```\nThen I will check it."


def _parse_mb_per_s() -> tuple[float, int]:
    text = _message_100kb()
    tools = builtin_tools().signatures()
    rounds = 200
    started = time.perf_counter()
    for _ in range(rounds):
        parse_tool_calls(text, tools)
    elapsed = time.perf_counter() - started
    return len(text.encode()) * rounds / elapsed / 1e6, len(text.encode())


def _noop_overhead_us(workspace: Path) -> float:
    registry = builtin_tools()
    noop = ToolSpec(
        "noop", "Does nothing.", (ParamSpec("x", False, ""),), lambda ctx, x: ToolOutcome("ok", "")
    )
    registry.register(noop)
    settings = Settings(sandbox="fallback", tool_calls_per_cycle=10**9)
    policy = Policy.default(settings, registry).with_overrides({"Planner": {"noop": "read-only"}})
    executor = ToolExecutor(workspace, settings, policy, registry=registry)
    message = render_tool_calls([("noop", {})])
    rounds = 5000
    started = time.perf_counter()
    for _ in range(rounds):
        executor.execute_sync("Planner", message)
    return (time.perf_counter() - started) / rounds * 1e6


def _bash_latency_ms(
    workspace: Path, mode: str, rounds: int = 40, *, writable: bool = False
) -> dict[str, float]:
    settings = Settings(sandbox=mode, tool_calls_per_cycle=10**9)  # type: ignore[arg-type]
    policy = Policy.default(settings).with_overrides(
        {"Evaluator": {"bash": "read-write"}} if writable else None
    )
    executor = ToolExecutor(workspace, settings, policy)
    message = render_tool_calls([("bash", {"command": "true"})])
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        batch = executor.execute_sync("Evaluator", message)
        samples.append((time.perf_counter() - started) * 1000)
        assert batch.records[0].status == "ok", batch.records[0].output
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 2),
    }


def run() -> dict[str, object]:
    """Figures for `make bench` (see bench/__main__.py)."""
    mb_per_s, size = _parse_mb_per_s()
    figures: dict[str, object] = {"parse_message_bytes": size, "parse_mb_per_s": round(mb_per_s, 1)}
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        (workspace / "README.md").write_text("# bench\n")
        figures["noop_call_overhead_us"] = round(_noop_overhead_us(workspace), 1)
        figures["bash_true_fallback"] = _bash_latency_ms(workspace, "fallback")
        problem = bwrap_problem()
        figures["bash_true_bwrap"] = (
            _bash_latency_ms(workspace, "bwrap") if problem is None else {"skipped": problem}
        )
        # A read-write command gets a private copy of the workspace and PSE applies its changes after:
        # measured on a workspace of 200 files of 4 KB (a small project).
        for i in range(200):
            (workspace / f"m{i}.py").write_text("x = 1\n" * 680)
        figures["bash_true_rw_200_files_fallback"] = _bash_latency_ms(
            workspace, "fallback", 20, writable=True
        )
        figures["bash_true_rw_200_files_bwrap"] = (
            _bash_latency_ms(workspace, "bwrap", 20, writable=True)
            if problem is None
            else {"skipped": problem}
        )
    return figures
