"""A run that waits on disk for a person's approval, built without a server: the demo's Specialist
writes one file more than the plan declares (NOTES.md), a task policy holds such writes, and the run
is interrupted once the call is held. No process has the run then; a decision must resume it."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from pse.config import Settings, load_settings
from pse.events import ApprovalEvent, Event
from pse.protocol import render_tool_calls
from pse.runner import PreparedRun, prepare_run, run_to_end
from pse.tasks import TaskRegistry

__all__ = ["HELD_CASSETTE", "HELD_TASK", "guarded_settings", "held_run", "trace_of"]

HELD_TASK = "guarded"
HELD_CASSETTE = "notes-cassette.json"
"""The cassette in the task's folder whose Specialist also writes NOTES.md (a browser may pick it)."""
_POLICY = "\n[policy.Specialist.write_file]\napproval = { outside_outputs = true }\n"


def _guarded_task(tmp_path: Path) -> Path:
    """TMP/tasks with one user task, `guarded`: the code-delivery demo whose Specialist's writes
    outside the declared outputs wait for a person."""
    tasks = tmp_path / "tasks"
    demo = TaskRegistry.discover(None).get("code-delivery")
    shutil.copytree(demo.dir, tasks / HELD_TASK)
    with (tasks / HELD_TASK / "task.toml").open("a", encoding="utf-8") as toml:
        toml.write(_POLICY)
    (tasks / "registry.toml").write_text(f'[tasks.{HELD_TASK}]\npath = "{HELD_TASK}"\n')
    return tasks


def _cassette(tasks: Path, notes: str) -> Path:
    """The demo cassette, its Specialist's first tool_calls message writing NOTES.md too."""
    cassette_path = TaskRegistry.discover(None).get("code-delivery").cassette_path
    assert cassette_path is not None
    turns = json.loads(cassette_path.read_text())["turns"]
    block = render_tool_calls([("write_file", {"path": "NOTES.md", "content": notes})])
    invoke = block.split("<tool_calls>", 1)[1].rsplit("</tool_calls>", 1)[0].lstrip("\n")
    first = turns[1]["content"]
    assert turns[1]["role"] == "Specialist" and "</tool_calls>" in first
    cut = first.rindex("</tool_calls>")
    turns[1] = {**turns[1], "content": first[:cut] + invoke + first[cut:]}
    path = tasks / HELD_TASK / HELD_CASSETTE
    path.write_text(json.dumps({"version": 1, "turns": turns}))
    return path


def guarded_settings(tmp_path: Path, notes: str = "notes\n", **options: Any) -> Settings:
    """Settings for `guarded` runs in `tmp_path` (runs, tasks, the NOTES.md cassette; `options` added)."""
    tasks = _guarded_task(tmp_path)
    return load_settings(
        runs_dir=tmp_path / "runs",
        cassette=_cassette(tasks, notes),
        tasks_dir=tasks,
        **{"approval_timeout_s": 300.0, **options},
    )


def held_run(tmp_path: Path, notes: str = "notes\n", **options: Any) -> tuple[Settings, str]:
    """A `guarded` run that waits in AWAITING_APPROVAL on disk, no process holding it.

    Returns the settings it ran with (see `guarded_settings`) and its id.
    """
    settings = guarded_settings(tmp_path, notes, **options)
    prepared: list[PreparedRun] = []

    def on_event(event: Event) -> None:  # stop once the call is held: after the event is handled
        if isinstance(event, ApprovalEvent) and event.approval.decision is None:
            asyncio.get_running_loop().call_soon(prepared[0].engine.interrupt)

    async def run() -> str:
        prepared.append(prepare_run(HELD_TASK, settings, on_event=on_event))
        summary = await run_to_end(prepared[0])
        assert (summary.state, summary.outcome) == ("AWAITING_APPROVAL", None), summary
        return summary.run_id

    return settings, asyncio.run(run())


def trace_of(settings: Settings, run_id: str) -> dict[str, Any]:
    """The run's trace as it is on disk."""
    trace: dict[str, Any] = json.loads((settings.runs_dir / run_id / "trace.json").read_text())
    return trace
