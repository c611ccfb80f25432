"""CLI start-up: `pse --version`, `pse --help`, `pse trace list` and `pse stats` as whole processes.

Each command runs `RUNS` times after one warm-up run, as a person runs it (the venv's `pse` script, a
fresh interpreter each time); the figures are the median wall and CPU seconds of the child process (its
own rusage, from `os.wait4`), with the minimum and maximum beside them, since these machines are shared.
The reading commands read a runs folder of `TRACES` finished runs with its store built.

`eager_import` times `python -c "import pse.batch"`: what every command paid before the CLI loaded its
commands lazily (`pse.cli` imported the batch layer, the runner and AutoGen at start). `before` holds the
same four commands as measured on the commit before that change (a91cc1a), on this kind of machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS = 7
TRACES = 20
TARGET_S = {"version": 0.2, "help": 0.2, "trace_list": 0.5, "stats": 0.5}
"""The whole-process wall times issue 33 asks of each command."""

BEFORE = {
    "commit": "a91cc1a",
    "how": "5 whole-process runs after a warm-up, median; 2 cores under a load average of about 4",
    "wall_s": {"version": 3.66, "help": 3.86, "trace_list": 4.05, "stats": 4.18},
    "cpu_s": {"version": 2.67, "help": 2.85, "trace_list": 2.83, "stats": 2.84},
}


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of `argv` as a child process."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _figures(argv: list[str], cwd: Path) -> dict[str, Any]:
    _timed(argv, cwd)  # warm-up: the page cache and .pyc files
    walls, cpus = zip(*(_timed(argv, cwd) for _ in range(RUNS)), strict=True)
    return {
        "wall_median_s": round(statistics.median(walls), 3),
        "wall_min_s": round(min(walls), 3),
        "wall_max_s": round(max(walls), 3),
        "cpu_median_s": round(statistics.median(cpus), 3),
    }


def _runs_folder(root: Path) -> Path:
    from pse.store import close_stores, open_store
    from pse.trace import CycleRecord, Trace, write_trace

    runs = root / "runs"
    for i in range(TRACES):
        at = f"2026-01-01T10:{i:02d}:00.000+00:00"
        trace = Trace(run_id=f"run-{i:03d}", task="code-delivery", started_at=at, ended_at=at)
        trace.outcome = "PASSED"
        trace.cycles = [CycleRecord(index=1, kind="initial", first_speaker="Planner", started_at=at)]
        write_trace(trace, runs / trace.run_id)
    from pse.config import Settings

    open_store(Settings(runs_dir=runs)).sync(runs)  # the store as a run leaves it
    close_stores()
    return runs


def run() -> dict[str, Any]:
    pse = str(Path(sys.executable).with_name("pse"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = str(_runs_folder(root))
        commands = {
            "version": [pse, "--version"],
            "help": [pse, "--help"],
            "trace_list": [pse, "trace", "list", "--runs-dir", runs],
            "stats": [pse, "stats", "--runs-dir", runs],
        }
        figures: dict[str, Any] = {name: _figures(argv, root) for name, argv in commands.items()}
        figures["eager_import"] = _figures([sys.executable, "-c", "import pse.batch"], root)
    for name, target in TARGET_S.items():
        figures[name]["target_wall_s"] = target
        figures[name]["meets_target"] = figures[name]["wall_median_s"] < target
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    figures["runs_each"] = RUNS
    figures["before"] = BEFORE
    return figures
