"""What an evaluation costs besides its runs: the hidden check of a HumanEval problem, and the harness.

* `hidden_check_p50_ms`: the humaneval hidden check of a canonical solution (the sandboxed parent, the
  child that imports the solution, every call over the pipe) over 12 problems, per sandbox mode.
* `all_164_canonical_s`: every problem's hidden check once, under bwrap (what a full suite spends
  judging, one at a time).
* `harness_overhead_ms_per_pair`: a scripted `pse eval` of 2 instances × 2 arms, its wall time
  less the runs' own (trace started → ended) and their hidden checks: the results rows, summary,
  report and cassette handling per (instance, arm).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from pse.config import load_settings
from pse.evals._harness import EvalRun, _stage_hidden, run_eval
from pse.evals._hidden import run_hidden_check
from pse.evals._suite import load_suite
from pse.runner import registry_for
from pse.sandbox import bwrap_problem

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _hidden_checks(mode: str, problems: int) -> list[float]:
    settings = load_settings(sandbox=mode)
    suite = load_suite("humaneval", registry_for(settings))
    from pse.evals._suite import humaneval_data

    _, data = humaneval_data()
    times = []
    with tempfile.TemporaryDirectory() as scratch:
        # the check and its channel module, staged as `pse eval` stages them
        hidden = _stage_hidden(suite, Path(scratch))
        assert hidden is not None
        for instance, problem in list(zip(suite.instances, data, strict=True))[:problems]:
            workspace = Path(scratch) / instance.id
            workspace.mkdir()
            (workspace / "solution.py").write_text(problem["prompt"] + problem["canonical_solution"])
            started = time.perf_counter()
            result = run_hidden_check(
                instance,
                workspace,
                settings,
                hidden_dir=hidden,
                secret_paths=suite.secret_paths
                if mode == "bwrap"
                else (),  # fallback cannot mask; timing only
                timeout_s=60,
            )
            times.append(time.perf_counter() - started)
            if not result.passed:
                raise RuntimeError(
                    f"{instance.id}: the canonical solution failed: {result.error or result.output[:300]}"
                )
    return times


def _harness_overhead() -> float:
    from eval_scripts import standard_arms, write_cassettes

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        arms = {k: v for k, v in standard_arms().items() if k in ("pse", "single")}
        cassettes = write_cassettes(root / "c", arms)
        settings = load_settings(runs_dir=root / "runs")
        suite = load_suite("humaneval", registry_for(settings))
        chosen = [i for i in suite.instances if i.id in ("HumanEval-0", "HumanEval-53")]
        plan = EvalRun(suite, settings, ["pse", "single"], chosen, root / "eval", cassettes=cassettes)
        started = time.perf_counter()
        asyncio.run(run_eval(plan))
        total = time.perf_counter() - started
        inside = 0.0
        for line in (root / "eval" / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            trace = json.loads((root / "runs" / row["run_id"] / "trace.json").read_text())
            inside += _seconds(trace["started_at"], trace["ended_at"]) + row["hidden"]["duration_s"]
        return (total - inside) / 4


def run() -> dict[str, Any]:
    figures: dict[str, Any] = {}
    modes = ["fallback"] + (["bwrap"] if bwrap_problem() is None else [])
    for mode in modes:
        times = _hidden_checks(mode, 12)
        figures[f"hidden_check_p50_ms_{mode}"] = round(statistics.median(times) * 1000, 1)
    if "bwrap" in modes:
        started = time.perf_counter()
        _hidden_checks("bwrap", 164)
        figures["all_164_canonical_s_bwrap"] = round(time.perf_counter() - started, 1)
    figures["harness_overhead_ms_per_pair"] = round(_harness_overhead() * 1000, 1)
    return figures
