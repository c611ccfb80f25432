"""Testing PSE tasks and the engine in process: test models and a harness that runs a task from memory.

```python
from pse.testing import FunctionModel, ScriptedModel, in_memory_task, run_task

task = in_memory_task({"goal": "Write hello.py.", "expected_outputs": ["hello.py"]})
summary, trace, prepared = await run_task(task, turns=[("Planner", "<plan>…</plan>"), ...])
```

No task folder, no cassette file: the run is wired as `pse run` wires one (policy, ToolAgent,
sandbox, gates, trace) and its folder goes to a temporary directory unless `runs_dir` says where.
docs/testing.md walks through an example.
"""

from pse.testing._harness import TaskRun, in_memory_task, run_task
from pse.testing._models import FunctionModel, ReplyFunction, ScriptedModel

__all__ = ["FunctionModel", "ReplyFunction", "ScriptedModel", "TaskRun", "in_memory_task", "run_task"]
