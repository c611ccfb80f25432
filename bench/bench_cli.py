"""CLI start-up: `pse --version`, `pse --help`, `pse trace list` and `pse stats` as whole processes.

Each command runs `RUNS` times after one warm-up run, as a person runs it (the venv's `pse` script, a
fresh interpreter each time); the figures are the median wall and CPU seconds of the child process (its
own rusage, from `os.wait4`), with the minimum and maximum beside them, since these machines are shared.
The commands take turns, one run each per round, so a change in the machine's load falls on all alike.
The reading commands read a runs folder of `TRACES` finished runs with its store built.

Every command runs without the `PSE_*` and `OPENAI_*` variables of the environment it is started from, as
on a machine where nothing is configured: then `trace list` and `stats` read their settings without the
settings model (`pse.cli._reading`). `trace_list_configured` and `stats_configured` set one setting
(`PSE_PROVIDER=scripted`), so they load the model and validate it, as they do wherever anything is
configured (a `.env` file included).

`eager_import` times `python -c "import pse.batch"`: what every command paid before the CLI loaded its
commands lazily (`pse.cli` imported the batch layer, the runner and AutoGen at start). `before` holds the
same four commands as measured on the commit before that change (a91cc1a), on this kind of machine;
`before_plain_settings` holds `trace list` and `stats` on the commit before they skipped the settings model
(c18e15c) and after it, measured in turn.
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
BEFORE_PLAIN_SETTINGS = {
    "commit": "c18e15c",
    "how": "c18e15c's and b012307's trees (the after ones with nothing configured and with PSE_PROVIDER) in "
    "turn, 15 rounds after a warm-up, median, with .pyc files; 2 cores at a load of 3 to 4",
    "wall_s": {"trace_list": 0.412, "stats": 0.387},
    "cpu_s": {"trace_list": 0.385, "stats": 0.366},
    "after_wall_s": {"trace_list": 0.325, "stats": 0.342},
    "after_cpu_s": {"trace_list": 0.302, "stats": 0.316},
    "after_configured_wall_s": {"trace_list": 0.445, "stats": 0.428},
}
CONFIGURED = {"PSE_PROVIDER": "scripted"}
"""One setting, so the reading commands load and validate the settings model."""


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of `argv` as a child process."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _in_turn(commands: dict[str, tuple[list[str], dict[str, str]]], cwd: Path) -> dict[str, Any]:
    """The figures of each command (argv, environment), the commands run in turn `RUNS` times."""
    for argv, env in commands.values():
        _timed(argv, cwd, env)  # warm-up: the page cache and .pyc files
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, (argv, env) in commands.items():
            times[name].append(_timed(argv, cwd, env))
    return {name: _summary(timed) for name, timed in times.items()}


def _summary(timed: list[tuple[float, float]]) -> dict[str, Any]:
    walls, cpus = zip(*timed, strict=True)
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
        plain = {k: v for k, v in os.environ.items() if not k.upper().startswith(("PSE_", "OPENAI_"))}
        # .pyc files as an installed `pse` has them, even where PYTHONDONTWRITEBYTECODE is set (an agent's
        # sandbox): the warm-up writes them beside this bench's runs folder, not into the checkout
        plain.pop("PYTHONDONTWRITEBYTECODE", None)
        plain["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        trace_list, stats = [pse, "trace", "list", "--runs-dir", runs], [pse, "stats", "--runs-dir", runs]
        figures: dict[str, Any] = _in_turn(
            {
                "version": ([pse, "--version"], plain),
                "help": ([pse, "--help"], plain),
                "trace_list": (trace_list, plain),
                "stats": (stats, plain),
                "trace_list_configured": (trace_list, plain | CONFIGURED),
                "stats_configured": (stats, plain | CONFIGURED),
            },
            root,
        )
        figures |= _in_turn({"eager_import": ([sys.executable, "-c", "import pse.batch"], plain)}, root)
    for name, target in TARGET_S.items():
        figures[name]["target_wall_s"] = target
        figures[name]["meets_target"] = figures[name]["wall_median_s"] < target
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    figures["runs_each"] = RUNS
    figures["before"] = BEFORE
    figures["before_plain_settings"] = BEFORE_PLAIN_SETTINGS
    return figures
