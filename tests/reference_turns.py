"""The reference cassettes' turns with what each role was allowed at that turn, for the grammar tests.

The reference cassettes: both built-in tasks', the shared contract sample and the one `pse new`
scaffolds. A role's tools are the ones a run of that task grants it (policy and registry, as the
runner builds them for `create_model_client`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pse.config import load_settings
from pse.knowledge import RunKnowledge
from pse.protocol import ToolSignature, plan_criteria
from pse.roles import Role
from pse.tasks import TaskRegistry
from pse.tasks._scaffold import scaffold_task
from pse.toolagent import Policy

__all__ = ["SAMPLE", "Turn", "reference_turns", "role_tools"]

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path("/work/shared/contract/sample-cassette.json")  # the shared contract's, wherever the clone is

Turn = tuple[str, str, str, tuple[str, ...] | None, tuple[ToolSignature, ...]]
"""(where, role, content, the plan's criterion ids so far, the role's granted tools)."""


def role_tools(
    role: str, task_name: str | None = None, tasks_dir: Path | None = None
) -> tuple[ToolSignature, ...]:
    """The role's granted tools as a run of that task grants them (default policy without a task)."""
    settings = load_settings()
    task = TaskRegistry.discover(tasks_dir).get(task_name) if task_name else None
    knowledge = RunKnowledge(task.knowledge_dir if task else None, settings)
    policy = Policy.default(settings, knowledge.registry).with_overrides(task.config.policy if task else None)
    specs = (knowledge.registry.get(tool) for tool, _ in policy.tools_for(role))
    return tuple(spec.signature for spec in specs if spec is not None)


def reference_turns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Turn]:
    """Every turn of every reference cassette, in order, named `source#index`."""
    scaffold = tmp_path_factory.mktemp("tasks")
    scaffold_task("weekly-report", scaffold)
    sources = [
        *(
            (f"tasks/{name}", REPO / "tasks" / name / "cassette.json", name, None)
            for name in ("code-delivery", "incident-review")
        ),
        ("shared/contract", SAMPLE, None, None),
        ("scaffold", scaffold / "weekly-report" / "cassette.json", "weekly-report", scaffold),
    ]
    for where, path, task, tasks_dir in sources:
        criteria = None
        for i, turn in enumerate(json.loads(path.read_text(encoding="utf-8"))["turns"]):
            if turn["role"] == Role.PLANNER:
                criteria = plan_criteria([turn["content"]]) or criteria
            yield (
                f"{where}#{i}",
                turn["role"],
                turn["content"],
                criteria,
                role_tools(turn["role"], task, tasks_dir),
            )
