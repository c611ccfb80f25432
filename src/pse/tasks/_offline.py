"""Whether a valid task can run as it stands: what `pse validate` warns of without failing.

A task with no cassette and no model configured cannot run at all (`pse run` stops before it starts);
a cassette whose Specialist never writes one of the task's expected outputs replays into a run whose
gate `outputs_exist` fails every cycle, and ends in an error that hides why. Both are warnings, not
problems: the task is valid, and a model or another cassette given at run time may be all it needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from pse.tasks._task import Problem, Task
from pse.tools import Tool

__all__ = ["cassette_writes", "offline_warnings"]

_INVOKE = re.compile(r"<invoke\s+name\s*=\s*[\"']write_file[\"']\s*>(.*?)</invoke>", re.S)
_PATH = re.compile(
    r"<parameter\s+name\s*=\s*[\"']path[\"']\s*>\s*(?:<!\[CDATA\[)?(.*?)(?:\]\]>)?\s*</parameter>", re.S
)


def _normal(path: str) -> str:
    return PurePosixPath(path.strip()).as_posix().removeprefix("./")


def _turn_writes(turn: Any) -> Iterable[str]:
    if not isinstance(turn, dict):
        return
    content = turn.get("content")
    for invoke in _INVOKE.findall(content if isinstance(content, str) else ""):
        found = _PATH.search(invoke)
        if found:
            yield _normal(found.group(1))
    for call in turn.get("tool_calls") or []:  # the native protocol's function calls
        arguments = call.get("arguments") if isinstance(call, dict) else None
        path = arguments.get("path") if isinstance(arguments, dict) else None
        if call.get("name") == Tool.WRITE_FILE and isinstance(path, str):
            yield _normal(path)


def cassette_writes(path: Path) -> set[str] | None:
    """The workspace paths a cassette's turns write with `write_file` (None: not a readable cassette;
    `validate` reports that as a problem of its own)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    turns = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(turns, list):
        return None
    return {written for turn in turns for written in _turn_writes(turn)}


def offline_warnings(task: Task, *, model_configured: bool, cassette: Path | None = None) -> list[Problem]:
    """What stands between `task` and a run: no cassette and no model, or a cassette that never writes
    an expected output.

    Args:
        task: a valid task.
        model_configured: whether every role has a real model (none falls back to the scripted one).
        cassette: the cassette a run would replay (PSE_CASSETTE); default: the task's own.
    """
    cassette = cassette or task.cassette_path
    task_file = str(task.dir / "task.toml")
    if cassette is None:
        if model_configured:
            return []
        return [
            Problem(
                file=task_file,
                message=f"task {task.name!r} cannot run offline: it has no cassette, and no model is "
                "configured",
                fix=f"record one with a real model (`pse run {task.name} --record "
                f"{task.dir / 'cassette.json'}`), or configure a model (PSE_PROVIDER, PSE_MODEL, "
                "PSE_BASE_URL)",
            )
        ]
    written = cassette_writes(cassette)
    if written is None or model_configured:
        return []
    missing = [p for p in task.config.expected_outputs if _normal(p) not in written]
    if not missing:
        return []
    return [
        Problem(
            file=str(cassette),
            message=f"the cassette never writes the expected output{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}: a replay fails the gate outputs_exist in every cycle",
            fix="record the cassette again, or add a Specialist turn that writes "
            + ", ".join(missing)
            + ' (<invoke name="write_file">); or fix expected_outputs in task.toml',
        )
    ]
