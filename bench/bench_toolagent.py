"""ToolAgent figures: DSML parse throughput, per-call overhead, bash('true') latency per sandbox mode, and
a block of independent checks run at once against one after another."""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from pse.config import Settings
from pse.protocol import ParamSpec, ToolCall, parse_tool_calls, render_tool_calls
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


def _call_ms(executor: ToolExecutor, call: tuple[str, dict[str, str]], rounds: int) -> list[float]:
    """Milliseconds of one Evaluator call through the executor, `rounds` times (each must succeed)."""
    message = render_tool_calls([call])
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        batch = executor.execute_sync("Evaluator", message)
        samples.append((time.perf_counter() - started) * 1000)
        assert batch.records[0].status == "ok", batch.records[0].output
    return samples


def _bash_latency_ms(
    workspace: Path, mode: str, rounds: int = 40, *, writable: bool = False
) -> dict[str, float]:
    settings = Settings(sandbox=mode, tool_calls_per_cycle=10**9)  # type: ignore[arg-type]
    policy = Policy.default(settings).with_overrides(
        {"Evaluator": {"bash": "read-write"}} if writable else None
    )
    executor = ToolExecutor(workspace, settings, policy)
    samples = sorted(_call_ms(executor, ("bash", {"command": "true"}), rounds))
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 2),
    }


def _pytest_start_ms(mode: str, rounds: int = 10) -> dict[str, float]:
    """`run_pytest` on a project of one trivial test: what a check costs beyond its tests (interpreter,
    pytest and its plugins starting in the sandbox, the JUnit report read back)."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        workspace.chmod(0o755)  # as root, commands run as the sandbox uid: it must enter the workspace
        (workspace / "test_one.py").write_text("def test_one():\n    assert True\n")
        settings = Settings(sandbox=mode, tool_calls_per_cycle=10**9)  # type: ignore[arg-type]
        executor = ToolExecutor(workspace, settings, Policy.default(settings))
        samples = _call_ms(executor, ("run_pytest", {"target": "."}), rounds)
        return {"p50_ms": round(statistics.median(samples), 1), "max_ms": round(max(samples), 1)}


def _demo_files() -> dict[str, str]:
    """The files the demo's Specialist has written when its run passes (the cassette's last writes)."""
    root = Path(__file__).resolve().parents[1]
    turns = json.loads((root / "tasks" / "code-delivery" / "cassette.json").read_text())["turns"]
    tools = builtin_tools().signatures()
    files: dict[str, str] = {}
    for turn in (t for t in turns if t["role"] == "Specialist"):
        for call in parse_tool_calls(turn["content"], tools).items:
            if isinstance(call, ToolCall) and call.name == "write_file":
                files[call.arguments["path"]] = call.arguments["content"]
    return files


def _sealed_check_ms(mode: str, rounds: int = 10) -> dict[str, float]:
    """What a check measured from outside costs: `run_pytest` over a snapshot where one author wrote the
    tests (one session: a checking process and a product process), over the demo's final workspace (the
    task's acceptance tests and the Specialist's: two sessions at once), and building a snapshot alone
    (2 files, and 200 files of 4 KB)."""
    from pse.sandbox._snapshot import build_snapshot, unseal
    from pse.tools import EvidenceRules

    root = Path(__file__).resolve().parents[1]
    demo = _demo_files()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        for label, by_role in (("one_session", {}), ("demo_two_sessions", demo)):
            workspace = Path(tmp) / label
            workspace.mkdir(mode=0o755)
            (workspace / "test_acceptance.py").write_text(
                (root / "tasks" / "code-delivery" / "test_acceptance.py").read_text()
            )
            if not by_role:
                (workspace / "quicksort.py").write_text(demo["quicksort.py"])
            settings = Settings(sandbox=mode, tool_calls_per_cycle=10**9)  # type: ignore[arg-type]
            rules = EvidenceRules(expected_outputs=("quicksort.py", "test_quicksort.py"))
            executor = ToolExecutor(workspace, settings, Policy.default(settings), evidence=rules)
            writes = [("write_file", {"path": p, "content": c}) for p, c in by_role.items()]
            if writes:
                executor.execute_sync("Specialist", render_tool_calls(writes))
            samples = _call_ms(executor, ("run_pytest", {"target": "."}), rounds)
            figures[f"run_pytest_{label}_p50_ms"] = round(statistics.median(samples), 1)
        for count in (2, 200):
            live = Path(tmp) / f"live{count}"
            live.mkdir()
            for i in range(count):
                (live / f"m{i}.py").write_text("x = 1\n" * 680)
            samples = []
            for n in range(rounds * 2):
                target = Path(tmp) / f"snap{count}-{n}"
                started = time.perf_counter()
                build_snapshot(
                    target, {"workspace": (live, dict.fromkeys((f"m{i}.py" for i in range(count)), ""))}
                )
                samples.append((time.perf_counter() - started) * 1000)
                unseal(target)
            figures[f"snapshot_{count}_files_p50_ms"] = round(statistics.median(samples), 2)
    return figures


def _checks_block_s(
    mode: str, parallel: int, rounds: int = 3, *, second_check: bool = False
) -> dict[str, float]:
    """Wall time of one Evaluator block (pytest, ruff, a read; with `second_check` also a read-only
    bash command of ~1 s, as a type checker would be) on a project whose tests take ~1 s."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        workspace.chmod(0o755)  # as root, commands run as the sandbox uid: it must enter the workspace
        (workspace / "mod.py").write_text(
            "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(50))
        )
        (workspace / "test_mod.py").write_text(
            "import time\n\nfrom mod import f1\n\n\ndef test_f():\n    time.sleep(1)\n    assert f1(1) == 2\n"
        )
        settings = Settings(sandbox=mode, tool_parallel_calls=parallel, tool_calls_per_cycle=10**9)  # type: ignore[arg-type]
        executor = ToolExecutor(workspace, settings, Policy.default(settings))
        calls = [
            ("run_pytest", {"target": "."}),
            ("run_ruff", {"target": "."}),
            ("read_file", {"path": "mod.py"}),
        ]
        if second_check:
            calls.append(("bash", {"command": "sleep 1; grep -c def mod.py"}))
        block = render_tool_calls(calls)
        walls: list[float] = []
        slowest: list[float] = []
        total: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            batch = asyncio.run(executor.execute("Evaluator", block))
            walls.append(time.perf_counter() - started)
            slowest.append(max(r.ms for r in batch.records) / 1000)
            total.append(sum(r.ms for r in batch.records) / 1000)
            assert all(r.status == "ok" for r in batch.records), [r.output for r in batch.records]
        return {
            "wall_s": round(statistics.median(walls), 3),
            "slowest_call_s": round(statistics.median(slowest), 3),
            "sum_of_calls_s": round(statistics.median(total), 3),
        }


def run() -> dict[str, object]:
    """Figures for `make bench` (see bench/__main__.py)."""
    mb_per_s, size = _parse_mb_per_s()
    figures: dict[str, object] = {"parse_message_bytes": size, "parse_mb_per_s": round(mb_per_s, 1)}
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        (workspace / "README.md").write_text("# bench\n")
        figures["noop_call_overhead_us"] = round(_noop_overhead_us(workspace), 1)
        figures["run_pytest_one_test_fallback"] = _pytest_start_ms("fallback")
        figures["run_pytest_one_test_bwrap"] = (
            _pytest_start_ms("bwrap") if bwrap_problem() is None else {"skipped": bwrap_problem()}
        )
        figures["sealed_check_fallback"] = _sealed_check_ms("fallback")
        figures["sealed_check_bwrap"] = (
            _sealed_check_ms("bwrap") if bwrap_problem() is None else {"skipped": bwrap_problem()}
        )
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
    # PSE_TOOL_PARALLEL_CALLS: the block takes about its slowest call at 4, the sum of its calls at 1.
    mode = "bwrap" if bwrap_problem() is None else "fallback"
    figures[f"checks_block_{mode}"] = {
        "parallel_4": _checks_block_s(mode, 4),
        "one_at_a_time": _checks_block_s(mode, 1),
        "with_a_second_slow_check_parallel_4": _checks_block_s(mode, 4, second_check=True),
        "with_a_second_slow_check_one_at_a_time": _checks_block_s(mode, 1, second_check=True),
    }
    return figures
