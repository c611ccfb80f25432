"""When a command's exit status is evidence (`pse.tools._exit_evidence`): the rule, case by case. The whole
attack, end to end, is tests/test_measured_outside.py's TestCommandsNeedEvidence."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pse.tools import EvidenceFile, Manifest
from pse.tools._exit_evidence import _only_readers, exit_status_problem, pytest_targets


@pytest.mark.parametrize(
    ("command", "reads_only"),
    [
        ("test ! -e scratch.txt && grep -q 'a + b' calc/core.py", True),
        ("! grep -q TODO src/app.py", True),
        ("grep -c def mod.py | wc -l; ls", True),
        ("diff expected.txt out.txt > /dev/null", True),
        ("python mod.py", False),
        ("cat mod.py | python", False),
        ("grep x $(python mod.py)", False),
        ("grep x `python mod.py`", False),
        ("find . -name '*.py' -exec python {} \\;", False),
        ("(grep x a.py)", False),
        ("awk -f prog.awk data.csv", False),
        ("grep 'unclosed", False),
    ],
)
def test_a_command_only_reads_its_files_when_every_program_it_runs_does(
    command: str, reads_only: bool
) -> None:
    assert _only_readers(command) is reads_only


def _manifest(*files: tuple[str, str]) -> Manifest:
    return Manifest(tuple(EvidenceFile(path, "output", author) for path, author in files))


def test_data_a_role_wrote_leaves_the_exit_status_evidence(tmp_path: Path) -> None:
    data = _manifest(("report.md", "Specialist"), ("index.json", "Specialist"), ("check.py", "task"))
    assert exit_status_problem("{python} check.py", data, tmp_path) is None


def test_code_a_role_wrote_takes_it_away_unless_the_command_only_reads(tmp_path: Path) -> None:
    code = _manifest(("quicksort.py", "Specialist"), ("notes.md", "Specialist"))
    problem = exit_status_problem("{python} check.py", code, tmp_path)
    assert problem is not None and problem.startswith(
        "ran, no evidence: code a role wrote was within its reach (quicksort.py (Specialist))"
    )
    assert exit_status_problem("grep -q 'def quicksort' quicksort.py", code, tmp_path) is None


def test_an_executable_data_file_is_code(tmp_path: Path) -> None:
    (tmp_path / "run.txt").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "run.txt").chmod(0o755)
    assert exit_status_problem("sh -c ./run.txt", _manifest(("run.txt", "Specialist")), tmp_path) is not None


@pytest.mark.parametrize(
    ("command", "targets"),
    [
        ("{python} -m pytest", ["."]),
        ("{python} -m pytest -q -p no:cacheprovider tests", ["tests"]),
        (f"{sys.executable} -I -m pytest -x test_a.py test_b.py::test_c", ["test_a.py", "test_b.py::test_c"]),
        ("{python} -m pytest -k fast tests", None),  # a selection PSE does not make: a plain command
        ("{python} -m pytest -p myplugin", None),
        ("{python} -m pytest tests && echo ok", None),
        ("pytest tests", None),
    ],
)
def test_a_pytest_command_is_recognised_only_in_its_plain_form(
    command: str, targets: list[str] | None
) -> None:
    assert pytest_targets(command) == targets
