"""Verdicts measured outside the code they measure (issue 45), attacked by class. Each test is a Specialist
holding only write_file (and reads) that wants a PASS for wrong work; every attack runs end to end, for
real (real pytest, real sandbox, both modes), and each class also has an honest deliverable that still
passes.

Classes:
1. what was checked is not what is delivered (an undeclared file in the delivered workspace);
2. results produced inside the process that runs the delivered code;
3. exit status alone as evidence for a command check;
4. one author's test module changing what another author's tests call;
5. a deliverable that tells a check from use;
6. PSE's own analysis of a role's file ending the run as ERROR.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from attack_support import FIXED, MODES, TESTS, calls, cassette, run_attack


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


DEEP = "x = 1" + " + 1" * 200_000 + "\n"
"""Python cannot compile this (RecursionError in its parser), and ruff's stack overflows on it."""


class TestAnalysisIsNeverAnError:
    """Class 6: a file nested too deeply for Python's parser, written by the Specialist."""

    def test_a_deep_file_is_a_note_to_its_writer_and_the_run_goes_on(self, tmp_path: Path, mode: str) -> None:
        files = {"quicksort.py": FIXED, "test_quicksort.py": TESTS, "deep.py": DEEP}
        summary, trace = run_attack(tmp_path, mode, cassette(tmp_path, files))
        assert summary.outcome == "PASSED", summary.outcome_reason  # deep.py is no output: left out
        wrote = next(c for c in calls(trace, "write_file") if c["arguments"]["path"] == "deep.py")
        assert wrote["status"] == "ok"
        assert wrote["facts"]["hints"] == [
            "deep.py does not parse as Python: it is nested too deeply for Python's parser (RecursionError) "
            "(line 1); write it again"
        ]

    def test_a_deep_output_fails_its_checks_instead(self, tmp_path: Path, mode: str) -> None:
        files = {"quicksort.py": DEEP, "test_quicksort.py": TESTS}
        summary, trace = run_attack(tmp_path, mode, cassette(tmp_path, files, reports=3))
        assert (summary.outcome, trace["cycles"][0]["result"]) == ("ESCALATED", "PARTIAL")
        ruff = calls(trace, "run_ruff")[-1]
        assert ruff["status"] == "error" and ruff["facts"]["findings"] is None
        (why,) = ruff["facts"]["unproven"]  # ruff aborts: 134 through bwrap's shell, -6 (SIGABRT) alone
        assert why.startswith("ruff stopped on these files without a report (exit code ")
        assert calls(trace, "run_pytest")[-1]["facts"]["passed"] == 0
