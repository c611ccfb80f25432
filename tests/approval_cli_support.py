"""What the CLI approval tests share: a task whose policy holds calls, a demo cassette with a risky
write, and a `pse run` in a process of its own (so a held call can be answered, or the process killed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pse.protocol import render_tool_calls
from pse.tasks import TaskRegistry

_CODE_DELIVERY = TaskRegistry.discover(None).get("code-delivery")
DEMO: list[dict[str, str]] = json.loads(_CODE_DELIVERY.cassette_path.read_text())["turns"]  # type: ignore[union-attr]
PSE_BIN = Path(sys.executable).parent / "pse"
OUTSIDE = "[policy.Specialist.write_file]\napproval = { outside_outputs = true }\n"


def guarded_task(root: Path, policy: str = OUTSIDE, name: str = "guarded") -> Path:
    """The code-delivery task as a user task `name` whose policy holds calls; returns its tasks dir."""
    tasks = root / "tasks"
    shutil.copytree(_CODE_DELIVERY.dir, tasks / name)
    with (tasks / name / "task.toml").open("a", encoding="utf-8") as toml:
        toml.write("\n" + policy)
    (tasks / "registry.toml").write_text(f'[tasks.{name}]\npath = "{name}"\n')
    return tasks


def with_calls(turn: dict[str, str], *calls: tuple[str, dict[str, str]]) -> dict[str, str]:
    """`turn` (a message with a <tool_calls> block) with more invokes at the end of its block."""
    inner = render_tool_calls(list(calls)).split("<tool_calls>", 1)[1].rsplit("</tool_calls>", 1)[0]
    return {**turn, "content": turn["content"].replace("</tool_calls>", inner + "</tool_calls>", 1)}


def notes_turns(content: str = "notes\n") -> list[dict[str, str]]:
    """The demo, its Specialist also writing NOTES.md (not a declared output) in its first message."""
    turns = list(DEMO)
    turns[1] = with_calls(turns[1], ("write_file", {"path": "NOTES.md", "content": content}))
    return turns


def write_cassette(path: Path, turns: list[dict[str, str]]) -> Path:
    path.write_text(json.dumps({"version": 1, "turns": turns}))
    return path


def trace_of(runs: Path, run_id: str) -> dict[str, Any]:
    return json.loads((runs / run_id / "trace.json").read_text())


def start_run(
    tmp_path: Path, turns: list[dict[str, str]], *, env: dict[str, str] | None = None, task: str = "guarded"
) -> tuple[subprocess.Popen[str], Path]:
    """`pse run TASK --json` in its own process; returns it and the runs dir."""
    runs, tasks = tmp_path / "runs", tmp_path / "tasks"
    cassette = write_cassette(tmp_path / "cassette.json", turns)
    command = [str(PSE_BIN), "run", task, "--cassette", str(cassette), "--tasks-dir", str(tasks)]
    command += ["--runs-dir", str(runs), "--json"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PSE_")}
    process = subprocess.Popen(
        command,
        env={**clean, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    return process, runs


def wait_held(runs: Path, process: subprocess.Popen[str], timeout: float = 60) -> str:
    """The id of the run once its trace on disk says it waits for an approval."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for trace_file in runs.glob("*/trace.json"):
            try:
                trace = json.loads(trace_file.read_text())
            except ValueError:
                continue  # being replaced
            if trace["state"] == "AWAITING_APPROVAL":
                return str(trace["run_id"])
        if process.poll() is not None:
            raise AssertionError(f"the run ended before it held a call: {process.communicate()}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"no held call in {timeout} s: {process.communicate()}")


def finish(process: subprocess.Popen[str], timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    """Wait for the run's process; its exit code, --json summary and stderr."""
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, json.loads(stdout.strip().splitlines()[-1]), stderr
