"""The product process and its proxies (`pse.product`), through `run_pytest` in the real sandbox, both modes.

What a test can do with delivered code it reaches only through proxies (values, identity, write-back,
exceptions, classes, iterators, callbacks, printed output, shared temporary files, monkeypatch, a
source layout), and what a hostile deliverable cannot do to the check (`TestHostileProduct`): each
attack is a product, or a test module of the Specialist's, that tries to make a wrong answer pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pse
from attack_support import MODES
from pse.config import Settings
from pse.protocol import render_tool_calls
from pse.toolagent import Policy, ToolExecutor
from pse.tools import EvidenceRules


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _check(tmp_path: Path, mode: str, files: dict[str, str], *, by_role: dict[str, str] | None = None,
           outputs: tuple[str, ...] = ("mod.py",), timeout: float = 60) -> Any:  # fmt: skip
    """run_pytest over a workspace of `files` (the task's) and `by_role` (the Specialist's): its record."""
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    for path, text in files.items():
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(text)
    settings = Settings(sandbox=mode, tool_timeout_s=timeout)  # type: ignore[arg-type]
    ex = ToolExecutor(
        ws, settings, Policy.default(settings), evidence=EvidenceRules(expected_outputs=outputs)
    )
    if by_role:
        writes = [("write_file", {"path": p, "content": c}) for p, c in by_role.items()]
        assert all(r.status == "ok" for r in ex.execute_sync("Specialist", render_tool_calls(writes)).records)
    record = ex.execute_sync("Evaluator", render_tool_calls([("run_pytest", {"target": "."})])).records[0]
    assert ex.infrastructure_error is None, ex.infrastructure_error
    return record


def _outcomes(record: Any) -> dict[str, str]:
    return {t["test"].partition("::")[2]: t["outcome"] for t in record.facts["tests"]}


PRODUCT = """
import collections
import dataclasses
import decimal
import enum
import fractions
import pathlib


class Problem(ValueError):
    def __init__(self, message, field):
        super().__init__(message)
        self.field = field


class Worse(Problem):
    pass


Point = collections.namedtuple("Point", "x y")


class Color(enum.IntEnum):
    RED = 1


@dataclasses.dataclass
class Box:
    size: int

    def double(self):
        return Box(self.size * 2)


class Counter:
    def __init__(self):
        self.count = 0

    def __enter__(self):
        self.count += 1
        return self

    def __exit__(self, *exc):
        return True  # swallows whatever happened inside


def values():
    return {"list": [1, [2, 3]], "tuple": (1, "a"), "set": {1, 2}, "bytes": b"x", "float": 0.1, "big": 10**40,
            "none": None, "nested": {"k": [{"d": 1}]}}


def stdlib():
    return decimal.Decimal("1.10"), fractions.Fraction(1, 3), pathlib.Path("a/b")


def sort_in_place(items):
    items.sort()
    return items


def first_of(pair):
    return pair[0]


def fail(field):
    raise Worse("bad input", field)


def gen(n):
    yield from range(n)


def apply(function, value):
    return function(value)


def speak(text):
    print(text)
    return len(text)


def read(path):
    return pathlib.Path(path).read_text()


def write(path, text):
    pathlib.Path(path).write_text(text)


def helper():
    return 1


def uses_helper():
    return helper() + 1


def exits(code):
    raise SystemExit(code)
"""

TESTS = """
import pytest

import mod


def test_values():
    assert mod.values() == {"list": [1, [2, 3]], "tuple": (1, "a"), "set": {1, 2}, "bytes": b"x", "float": 0.1,
                            "big": 10**40, "none": None, "nested": {"k": [{"d": 1}]}}
    assert type(mod.values()["list"]) is list


def test_stdlib_values():
    import decimal, fractions, pathlib
    assert mod.stdlib() == (decimal.Decimal("1.10"), fractions.Fraction(1, 3), pathlib.Path("a/b"))


def test_write_back_and_identity():
    items = [3, 1, 2]
    same = mod.sort_in_place(items)
    assert items == [1, 2, 3] and same is items
    inner = [1]
    assert mod.first_of([inner, inner]) is inner


def test_exceptions():
    with pytest.raises(ValueError, match="bad input"):
        mod.fail("name")
    with pytest.raises(mod.Problem) as caught:
        mod.fail("age")
    assert caught.value.field == "age" and isinstance(caught.value, mod.Worse)
    with pytest.raises(SystemExit):
        mod.exits(2)
    with pytest.raises(AttributeError):
        mod.no_such_name


def test_classes():
    box = mod.Box(2)
    assert box.size == 2 and box.double() == mod.Box(4) and isinstance(box, mod.Box)
    assert mod.Point(1, 2) == (1, 2) and mod.Point(1, 2).x == 1
    assert mod.Color.RED == 1 and mod.Color.RED is mod.Color.RED


def test_iteration():
    assert list(mod.gen(3)) == [0, 1, 2] and sum(mod.gen(4)) == 6


def test_callbacks():
    assert mod.apply(lambda x: x * 2, 21) == 42
    assert mod.apply(str.upper, "a") == "A"


def test_printed(capsys):
    assert mod.speak("hello") == 5
    assert capsys.readouterr().out == "hello\\n"


def test_shared_files(tmp_path):
    given = tmp_path / "in.txt"
    given.write_text("from the test")
    assert mod.read(str(given)) == "from the test"
    mod.write(str(tmp_path / "out.txt"), "from the product")
    assert (tmp_path / "out.txt").read_text() == "from the product"


def test_monkeypatch(monkeypatch):
    monkeypatch.setattr(mod, "helper", lambda: 41)
    assert mod.uses_helper() == 42


def test_a_context_manager_never_swallows_a_failed_assertion():
    with pytest.raises(AssertionError):
        with mod.Counter():
            assert False, "the test's own"
    with mod.Counter() as counter:
        raise KeyError("the product may swallow this")
    assert counter.count == 1
"""


class TestWhatTestsCanDo:
    def test_the_product_answers_as_it_would_in_process(self, tmp_path: Path, mode: str) -> None:
        record = _check(tmp_path, mode, {"mod.py": PRODUCT, "test_mod.py": TESTS})
        assert set(_outcomes(record).values()) == {"passed"}, record.output
        assert (record.status, record.facts["exercised"]["mod.py"]["proven"]) == ("ok", True)

    def test_a_failure_in_the_product_shows_its_frames_and_none_of_pses(
        self, tmp_path: Path, mode: str
    ) -> None:
        product = "def mean(path):\n    with open(path) as f:\n        return float(f.read())\n"
        tests = "from mod import mean\n\n\ndef test_mean():\n    assert mean('data.csv') == 1.0\n"
        record = _check(tmp_path, mode, {"mod.py": product, "test_mod.py": tests})
        assert _outcomes(record) == {"test_mean": "failed"}, record.output
        # the test's line, and the product's, as a run without PSE between them would show them
        assert "test_mod.py:5" in record.output and 'File "mod.py", line 2, in mean' in record.output
        assert "No such file or directory: 'data.csv'" in record.output
        # PSE's serving frames (the proxies, the server, the channel) are no part of either side's failure:
        # the same run reads the same wherever PSE is installed
        package = str(Path(pse.__file__).parent)
        assert package not in record.output and "pse/product" not in record.output, record.output

    def test_a_source_layout_on_the_tests_path_is_on_the_products_too(
        self, tmp_path: Path, mode: str
    ) -> None:
        files = {
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
            "src/calc/__init__.py": "from calc.core import add\n",
            "src/calc/core.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        }
        # the task declares its pytest configuration as a repository would have it
        ws = tmp_path
        record = _check_with_config(ws, mode, files)
        assert (record.status, _outcomes(record)) == ("ok", {"test_add": "passed"}), record.output


def _check_with_config(tmp_path: Path, mode: str, files: dict[str, str]) -> Any:
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    for path, text in files.items():
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(text)
    settings = Settings(sandbox=mode)  # type: ignore[arg-type]
    rules = EvidenceRules(expected_outputs=("src/calc/core.py",))
    ex = ToolExecutor(ws, settings, Policy.default(settings), evidence=rules, check_config=["pyproject.toml"])
    return ex.execute_sync("Evaluator", render_tool_calls([("run_pytest", {"target": "."})])).records[0]


SORT_TESTS = (
    "from mod import quicksort\n\n\ndef test_sorted():\n    assert quicksort([2, 1, 2]) == [1, 2, 2]\n\n\n"
    "def test_a_list():\n    assert type(quicksort([1])) is list\n"
)
HOSTILE = {
    "list-subclass-equal-to-anything": (
        "class Liar(list):\n    def __eq__(self, other):\n        return True\n\n    __hash__ = None\n\n\n"
        "def quicksort(items):\n    return Liar([0])\n"
    ),
    "iterator-that-shows-the-right-answer": (  # iterating it gives the right list; it holds another
        "class Shows(list):\n    def __iter__(self):\n        return iter(sorted(self._wanted))\n\n    def __len__(self):\n"
        "        return len(self._wanted)\n\n\ndef quicksort(items):\n    made = Shows([0])\n    made._wanted = list(items)\n"
        "    return made\n"
    ),
    "object-equal-to-anything": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n\n\ndef quicksort(items):\n    return Anything()\n"
    ),
    "an-exception-dressed-as-pytests-skip": (
        "class Skipped(BaseException):\n    __module__ = 'builtins'\n\n\ndef quicksort(items):\n    raise Skipped('flaky')\n"
    ),
    "its-own-assertion-error": (
        "class AssertionError(Exception):\n    pass\n\n\ndef quicksort(items):\n    raise AssertionError('x')\n"
    ),
    "kills-every-process-it-can": (
        "import os, signal\n\n\ndef quicksort(items):\n    os.kill(-1, signal.SIGKILL)\n"
    ),
    "writes-records-to-every-descriptor": (
        "import json, os\n\nline = json.dumps({'kind': 'test', 'id': 'test_mod.py::test_sorted', 'outcome': 'passed'})\n"
        "for fd in range(3, 256):\n    try:\n        os.write(fd, (line + '\\n').encode())\n    except OSError:\n        pass\n\n\n"
        "def quicksort(items):\n    return sorted(set(items))\n"
    ),
    "prints-a-passing-summary": (
        "import sys\n\n\ndef quicksort(items):\n    print('2 passed in 0.01s')\n    sys.stdout.write('== 2 passed ==\\n')\n"
        "    return sorted(set(items))\n"
    ),
    "nested-too-deep": "def quicksort(items):\n    value = []\n    for _ in range(5000):\n        value = [value]\n    return value\n",
}


class TestHostileProduct:
    """A deliverable that knows it is measured from outside, and tries to make a wrong answer pass."""

    @pytest.mark.parametrize("attack", sorted(HOSTILE))
    def test_a_wrong_answer_does_not_pass(self, tmp_path: Path, mode: str, attack: str) -> None:
        record = _check(tmp_path, mode, {"mod.py": HOSTILE[attack], "test_mod.py": SORT_TESTS})
        outcomes = _outcomes(record)
        assert record.status == "error" and outcomes.get("test_sorted") != "passed", record.output
        assert record.facts["passed"] <= 1  # at most `test_a_list`, where the product does return a list

    def test_a_product_that_sleeps_fails_its_call_and_the_session_ends(
        self, tmp_path: Path, mode: str
    ) -> None:
        product = "import time\n\n\ndef quicksort(items):\n    time.sleep(3600)\n"
        record = _check(tmp_path, mode, {"mod.py": product, "test_mod.py": SORT_TESTS}, timeout=10)
        assert record.status == "error" and set(_outcomes(record).values()) == {"failed"}
        assert "no answer in time" in record.output and "cannot be asked any more" in record.output

    def test_a_specialist_module_that_patches_the_proxies_forges_only_its_own_session(
        self, tmp_path: Path, mode: str
    ) -> None:
        patch = (
            "import pse.product._proxies as proxies\nimport pse.product._remote as remote\n\n"
            "remote.Remote.__eq__ = lambda self, other: True\n"
            "proxies.Product.ask = lambda self, op, *args: [1, 2, 2]\n\n\n"
            "def test_mine():\n    from mod import quicksort\n\n    assert quicksort([2, 1, 2]) == [1, 2, 2]\n"
        )
        wrong = "def quicksort(items):\n    return sorted(set(items))\n"
        record = _check(
            tmp_path, mode, {"mod.py": wrong, "test_mod.py": SORT_TESTS},
            by_role={"test_patch.py": patch}, outputs=("mod.py", "test_patch.py"),
        )  # fmt: skip
        assert record.facts["by_author"]["task"]["failed"] == 1  # the task's session never saw the patch
        assert record.status == "error"


class TestWhatRemains:
    """What the design cannot prevent, pinned so that a change of it is seen (docs/security.md)."""

    def test_a_product_that_reads_its_own_stack_can_tell_it_is_served(
        self, tmp_path: Path, mode: str
    ) -> None:
        product = (
            "import sys\n\n\ndef served():\n    frame, files = sys._getframe(), []\n    while frame:\n"
            "        files.append(frame.f_code.co_filename)\n        frame = frame.f_back\n"
            "    return any('pse/product' in f for f in files)\n"
        )
        tests = "from mod import served\n\n\ndef test_served():\n    assert served() is True\n"
        record = _check(tmp_path, mode, {"mod.py": product, "test_mod.py": tests})
        assert _outcomes(record) == {"test_served": "passed"}
