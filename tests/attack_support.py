"""A Specialist attacking the demo, end to end: the demo's plan, a Specialist that writes chosen files, an
Evaluator that runs the checks and says PASS; the run is real (real tools, real sandbox, both modes).

What tests/test_sealed_verification.py and tests/test_measured_outside.py share.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pse.config import Settings
from pse.protocol import ToolCall, parse_tool_calls, render_tool_calls
from pse.runner import RunSummary, prepare_run, run_to_end
from pse.sandbox import bwrap_problem
from pse.tools import builtin_tools

BWRAP_MISSING = bwrap_problem()
MODES = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"no bwrap: {BWRAP_MISSING}")
    ),
    "fallback",
]
ROOT = Path(__file__).resolve().parents[1]
DEMO = json.loads((ROOT / "tasks" / "code-delivery" / "cassette.json").read_text())["turns"]
PLAN, EVALUATOR_PASS = DEMO[0]["content"], DEMO[8]["content"]


def _demo_files() -> dict[str, str]:
    calls = parse_tool_calls(DEMO[1]["content"], {s.name: s.signature for s in builtin_tools()}).items
    return {c.arguments["path"]: c.arguments["content"] for c in calls if isinstance(c, ToolCall)}


BUGGY = _demo_files()  # quicksort.py drops values equal to the pivot: 2 of its 7 tests fail
FIXED = (
    BUGGY["quicksort.py"]
    .replace("larger = [", "equal = [i for i in items if i == pivot]\n    larger = [")
    .replace("pivot, *quicksort(larger)", "*equal, *quicksort(larger)")
)
TESTS = BUGGY["test_quicksort.py"]

Calls = list[tuple[str, dict[str, str]]]


def cassette(tmp_path: Path, files: dict[str, str], *batches: Calls, reports: int = 1) -> Path:
    """The demo's plan; a Specialist writing `files` and reporting (`reports` times: a report PSE asks
    again about needs more than one); an Evaluator running the checks (one message per batch), then
    saying PASS."""
    batches = batches or ([("run_pytest", {"target": "."}), ("run_ruff", {"target": "."})],)
    report = {"role": "Specialist", "content": "<report>Artifacts: quicksort.py, test_quicksort.py</report>"}
    turns = [
        {"role": "Planner", "content": PLAN},
        {
            "role": "Specialist",
            "content": render_tool_calls(
                [("write_file", {"path": p, "content": c}) for p, c in files.items()]
            ),
        },
        *([report] * reports),
        *({"role": "Evaluator", "content": render_tool_calls(batch)} for batch in batches),
        {"role": "Evaluator", "content": EVALUATOR_PASS},
    ]
    path = tmp_path / f"attack-{len(list(tmp_path.glob('attack-*.json')))}.json"
    path.write_text(json.dumps({"turns": turns}))
    return path


def run_attack(
    tmp_path: Path, mode: str, script: Path, task: str = "code-delivery", **extra: Any
) -> tuple[RunSummary, dict[str, Any]]:
    """Run `task` replaying `script` in sandbox `mode`, no retry unless `extra` says; the summary and the
    trace."""
    limits = {"max_partial_retries": 0, "max_fail_retries": 0, **extra}
    settings = Settings(
        provider="scripted", cassette=script, runs_dir=tmp_path / "runs", sandbox=mode, replay_strict=False,
        **limits,
    )  # type: ignore[arg-type]  # fmt: skip
    summary = asyncio.run(run_to_end(prepare_run(task, settings)))
    return summary, json.loads(Path(summary.trace).read_text())


def refused(
    tmp_path: Path, mode: str, script: Path, task: str = "code-delivery", **extra: Any
) -> dict[str, Any]:
    """`run_attack`, which must not end PASSED; its trace."""
    summary, trace = run_attack(tmp_path, mode, script, task, **extra)
    assert summary.outcome != "PASSED", f"forged PASS: {summary.outcome_reason}"
    return trace


def own_tests_task(tmp_path: Path) -> Path:
    """A tasks folder holding code-delivery without its seeded acceptance tests (task `own-tests`): only
    the Specialist's tests can run the delivered file."""
    tasks = tmp_path / "tasks"
    folder = shutil.copytree(ROOT / "tasks" / "code-delivery", tasks / "own-tests")
    (folder / "test_acceptance.py").unlink()
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(toml.replace('seed = ["test_acceptance.py"]\n', ""))
    (tasks / "registry.toml").write_text('[tasks.own-tests]\npath = "own-tests"\n')
    return tasks


def failures(trace: dict[str, Any]) -> list[str]:
    return list(trace["cycles"][0]["gate"]["failures"])


def calls(trace: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    return [c for c in trace["cycles"][0]["tool_calls"] if c["tool"] == tool]
