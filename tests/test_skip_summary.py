"""`make test` ends by saying how many tests it skipped and why (issue 47, item 7): pytest's own last line
only counts them ("251 skipped"), and which environment lacked what was nowhere to be read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_the_run_ends_with_each_skip_reason_and_its_count(tmp_path: Path) -> None:
    (tmp_path / "test_some.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.skip(reason='chromium is not installed')\ndef test_a(): pass\n\n"
        "@pytest.mark.skip(reason='chromium is not installed')\ndef test_b(): pass\n\n"
        "def test_c(): pytest.skip('no PostgreSQL server binaries')\n\n"
        "def test_d(): pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    at = next(i for i, line in enumerate(lines) if "3 skipped, and why" in line)
    assert lines[at + 1 : at + 3] == ["2  chromium is not installed", "1  no PostgreSQL server binaries"]
    assert lines[-1].startswith("1 passed, 3 skipped")
