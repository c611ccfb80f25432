"""A `write_file` of Python says at once what makes its tests prove nothing (issue 29): a test module that
defines its own copy of what a module beside it delivers, or a file that does not parse. Seen on
Qwen2.5-Coder-1.5B, whose test file started with a copy of quicksort."""

from __future__ import annotations

from pathlib import Path

from pse.engine._step_buffer import check_problems
from pse.events import ToolCallRecord
from pse.tools._pyhints import python_hints, python_problem

QUICKSORT = "def quicksort(items):\n    return sorted(items)\n\n\nclass Pivot:\n    pass\n"


def _write(folder: Path, name: str, text: str) -> list[str]:
    path = folder / name
    path.write_text(text)
    return python_hints(path, name, text)


def test_a_test_file_with_its_own_copy_of_a_delivered_function_is_told_to_import_it(tmp_path: Path) -> None:
    _write(tmp_path, "quicksort.py", QUICKSORT)
    copied = QUICKSORT + "\n\ndef test_empty():\n    assert quicksort([]) == []\n"
    assert _write(tmp_path, "test_quicksort.py", copied) == [
        "test_quicksort.py defines Pivot, quicksort, as quicksort.py does: its tests run this copy, not "
        "quicksort.py. Delete the copy and import it: from quicksort import Pivot, quicksort"
    ]
    imported = "from quicksort import quicksort\n\n\ndef test_empty():\n    assert quicksort([]) == []\n"
    assert _write(tmp_path, "test_quicksort.py", imported) == []
    assert _write(tmp_path, "quicksort_test.py", copied)[0].startswith("quicksort_test.py defines Pivot")


def test_only_test_files_are_compared_and_nothing_outside_is_read(tmp_path: Path) -> None:
    _write(tmp_path, "quicksort.py", QUICKSORT)
    assert _write(tmp_path, "helpers.py", QUICKSORT) == []  # two modules may share a name
    outside = tmp_path / "outside.py"
    outside.write_text(QUICKSORT)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "linked.py").symlink_to(outside)  # a symlink is never followed
    assert _write(tmp_path / "ws", "test_q.py", QUICKSORT) == []
    assert _write(tmp_path, "notes.md", "def quicksort(") == []


def test_a_python_file_that_does_not_parse_is_said_so_with_its_line(tmp_path: Path) -> None:
    assert _write(tmp_path, "quicksort.py", "def quicksort(items):\n    return sorted(items\n") == [
        "quicksort.py does not parse as Python: '(' was never closed (line 2: return sorted(items); write it again"
    ]


def test_a_revise_lists_what_the_last_ruff_found(tmp_path: Path) -> None:
    ruff = ToolCallRecord(
        requester="Evaluator",
        tool="run_ruff",
        arguments={"target": "."},
        decision="allowed",
        rule="r",
        status="error",
        facts={
            "exit_code": 1,
            "findings": 1,
            "finding_list": ["quicksort.py:1:1: F403 `from typing import *` used"],
        },
    )
    assert check_problems([ruff]) == ["quicksort.py:1:1: F403 `from typing import *` used"]
    assert check_problems([ruff.model_copy(update={"requester": "Specialist"})]) == []


PROBLEM = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    """
'''


def test_a_function_that_is_only_its_docstring_is_said_to_have_no_code(tmp_path: Path) -> None:
    """The 1.5B model wrote HumanEval's PROBLEM back as solution.py, without the body it was to write."""
    assert _write(tmp_path, "solution.py", PROBLEM) == [
        "solution.py: has_close_elements has only a docstring, no code; write its code"
    ]
    two = (
        PROBLEM
        + '\n\ndef other():\n    """Other."""\n    ...\n\n\nasync def third():\n    "Third."\n    pass\n'
    )
    assert _write(tmp_path, "solution.py", two) == [
        "solution.py: has_close_elements, other, third have only a docstring, no code; write its code"
    ]
    done = (
        PROBLEM + "    return any(abs(a - b) < threshold for a in numbers for b in numbers if a is not b)\n"
    )
    assert _write(tmp_path, "solution.py", done) == []
    no_docstring = 'def noop():\n    pass\n\n\ndef const():\n    return 1\n\n\nclass Base:\n    def hook(self):\n        """Override."""\n'
    assert _write(tmp_path, "helpers.py", no_docstring) == []  # a no-op, a method: not a copied specification
    assert (
        python_problem("solution.py", PROBLEM)
        == "solution.py: has_close_elements has only a docstring, no code"
    )
    assert python_problem("solution.py", done) is None
    assert (
        python_problem("bad.py", "def f(:\n")
        == "bad.py does not parse as Python: invalid syntax (line 1: def f(:)"
    )


ACCOUNT = "class Account:\n    def __init__(self):\n        self.balance = 0\n"


def test_a_name_nothing_in_the_file_binds_is_said_with_the_import_that_binds_it(tmp_path: Path) -> None:
    """The 1.5B model's test_account.py never imported Account (every test a NameError), used
    `pytest.raises` with no `import pytest`, and wrote `delimiter` for its parameter `delimeter`."""
    _write(tmp_path, "account.py", ACCOUNT)
    tests = "def test_deposit():\n    acc = Account()\n    with pytest.raises(ValueError):\n        acc.f()\n"
    assert _write(tmp_path, "test_account.py", tests) == [
        "test_account.py uses Account, pytest, which it never imports or defines: from account import Account"
    ]
    fixed = "import pytest\nfrom account import Account\n\n\n" + tests
    assert _write(tmp_path, "test_account.py", fixed) == []
    typo = "def intersperse(numbers, delimeter):\n    return [delimiter for _ in numbers]\n"
    assert _write(tmp_path, "solution.py", typo) == [
        "solution.py uses delimiter, which it never imports or defines"
    ]
    assert (
        python_problem("solution.py", typo) == "solution.py uses delimiter, which it never imports or defines"
    )
    assert (
        python_problem("roman.py", "obj['content']\n")
        == "roman.py uses obj, which it never imports or defines"
    )


def test_names_bound_anywhere_or_by_python_are_not_unbound(tmp_path: Path) -> None:
    """Coarse on purpose: a name bound anywhere in the file (any scope, any way) counts as bound, builtins
    and a module's own globals too, and a `*` import binds what no parser sees."""
    bound = (
        "import os.path\nfrom x import y as z\n\n\n"
        "def f(a, *args, b=1, **kw):\n    global G\n    G = a\n    try:\n        pass\n"
        "    except ValueError as err:\n        print(err, __name__, __file__)\n"
        "    [q for q in args]\n    if (w := b):\n        return os, z, kw, w, len(args)\n"
        "    match a:\n        case {'k': v, **rest}:\n            return v, rest\n"
        "        case [first, *others]:\n            return first, others\n\n\n"
        "class C:\n    def m(self):\n        return C, G, f\n"
    )
    assert _write(tmp_path, "bound.py", bound) == []
    assert _write(tmp_path, "star.py", "from os.path import *\n\nprint(join('a', 'b'))\n") == []
    assert python_problem("star.py", "from os.path import *\nprint(join('a'))\n") is None


def test_the_imports_a_file_lacks_are_added_where_one_reading_is_certain(tmp_path: Path) -> None:
    """Told of the missing import, the 1.5B model wrote the same file again (held-out csv-mean's `csv`,
    test files without the module they test): an import with one reading needs no model."""
    from pse.tools._bind import missing_imports

    _write(tmp_path, "account.py", ACCOUNT)
    tests = '"""Tests."""\nfrom __future__ import annotations\n\n\ndef test_a():\n    with pytest.raises(ValueError):\n        Account().f(csv)\n'
    fixed, added = missing_imports(tmp_path / "test_account.py", "test_account.py", tests)
    assert added == ["import pytest", "import csv", "from account import Account"]
    assert fixed == (
        '"""Tests."""\nfrom __future__ import annotations\nimport pytest\nimport csv\nfrom account import Account\n'
        "\n\ndef test_a():\n    with pytest.raises(ValueError):\n        Account().f(csv)\n"
    )
    coding = "# -*- coding: utf-8 -*-\ndef mean(path):\n    return list(csv.reader(open(path)))\n"
    assert (
        missing_imports(tmp_path / "m.py", "m.py", coding)[0]
        == "# -*- coding: utf-8 -*-\nimport csv\n" + coding[24:]
    )
    # No certain reading: a name two modules define, a name no module has, a module that acts when
    # imported, a file that does not parse; and a test module beside it is never imported from.
    (tmp_path / "other.py").write_text(ACCOUNT)
    (tmp_path / "test_helpers.py").write_text("def helper():\n    pass\n")
    for text in ("Account()\n", "delimiter\n", "this\n", "def f(:\n", "helper()\n", "ab = 1\nac = 2\nad\n"):
        assert missing_imports(tmp_path / "x.py", "x.py", text) == (text, [])


def test_a_write_adds_the_imports_and_says_so(tmp_path: Path) -> None:
    import os

    from pse.sandbox import Sandbox, SandboxLimits
    from pse.tools import ToolContext
    from pse.tools._files import write_file

    box = Sandbox(tmp_path, SandboxLimits(timeout_s=30), "fallback")
    ctx = ToolContext(Path(os.path.realpath(tmp_path)), box, writable=True)
    write_file(ctx, "account.py", ACCOUNT)
    outcome = write_file(ctx, "test_account.py", "def test_a():\n    assert Account().balance == 0\n")
    assert (tmp_path / "test_account.py").read_text().startswith("from account import Account\n")
    assert outcome.facts["names_bound"] == ["from account import Account"]
    assert (
        "note: PSE changed the file where one reading is certain (from account import Account); read it to "
        "see it" in outcome.output
    )


def test_a_name_used_only_on_noqa_lines_is_meant() -> None:
    """As for pyflakes: `# noqa` (bare or naming F821) says the name is bound at run time."""
    text = "import m\nm.__dict__['_ORIG'] = 1\n\n\ndef f():\n    return _ORIG  # noqa: F821 (bound above)\n"
    assert python_problem("x.py", text) is None
    assert (
        python_problem("x.py", text.replace("F821", "E501"))
        == "x.py uses _ORIG, which it never imports or defines"
    )
    assert (
        python_problem("x.py", text + "\n\nY = _ORIG\n")
        == "x.py uses _ORIG, which it never imports or defines"
    )
    assert python_problem("x.py", "Z = _ORIG  # noqa\n") is None


def test_the_evaluators_tests_import_from_the_workspace(tmp_path: Path) -> None:
    """The Evaluator's tests live in its own area, the modules they test in the workspace."""
    from pse.tools._files import write_file
    from sandbox_support import evaluation_context

    ctx, _, area = evaluation_context(tmp_path, {"account.py": ACCOUNT})
    outcome = write_file(
        ctx, "@evaluation/test_mine.py", "def test_a():\n    assert Account().balance == 0\n"
    )
    assert outcome.facts["names_bound"] == ["from account import Account"]
    assert (area / "test_mine.py").read_text().startswith("from account import Account\n")
    # A copy of the workspace's class in its own test file (held-out slugify's Evaluator did so): told, never
    # removed: a helper of the judge's that shares a name with the work would be replaced by the work's.
    copy = "class Account:\n    balance = 0\n\n\ndef test_a():\n    assert Account().balance == 0\n"
    copied = write_file(ctx, "@evaluation/test_copy.py", copy)
    assert copied.facts["hints"] == [
        "test_copy.py defines Account, as account.py does: its tests run this copy, not account.py. Delete "
        "the copy and import it: from account import Account"
    ]
    assert (area / "test_copy.py").read_text() == copy


def test_a_misspelt_name_is_renamed_to_the_one_close_name_the_file_binds(tmp_path: Path) -> None:
    """HumanEval-5: the 1.5B model wrote `delimiter` for its parameter `delimeter`, and wrote the same
    file again after every note; Python's NameError says "Did you mean: 'delimeter'?"."""
    from pse.tools._bind import missing_imports

    typo = (
        "def intersperse(numbers, delimeter):\n    result = []  # delimiter goes between\n"
        "    for n in numbers:\n        result += [n, delimiter]\n    return result[:-1] or 'delimiter'\n"
    )
    fixed, done = missing_imports(tmp_path / "solution.py", "solution.py", typo)
    assert done == ["delimiter → delimeter"]
    assert fixed == typo.replace("[n, delimiter]", "[n, delimeter]")  # the comment and the string stay
    assert missing_imports(tmp_path / "s.py", "s.py", "é = 'ü'; x = [é, délimiter]\nlimiter = 1\n")[0] == (
        "é = 'ü'; x = [é, limiter]\nlimiter = 1\n"
    )


def test_an_import_from_a_module_nothing_provides_is_read_from_the_one_that_defines_it(
    tmp_path: Path,
) -> None:
    """heldout-15 top-words: the Evaluator's `from top_words import top_words`, where `words.py` defines
    `top_words`, failed collection in each of three cycles. Nothing provides `top_words`, one module
    defines every name it imports: the import reads from that module. Where a module of that name
    exists, two modules define the names, or one defines only some, the file is left as it is."""
    from pse.tools._files import write_file
    from sandbox_support import evaluation_context

    words = "def top_words(text, n):\n    return []\n\n\ndef count(text):\n    return 0\n"
    test = "from top_words import top_words\n\n\ndef test_a():\n    assert top_words('', 1) == []\n"
    ctx, _, area = evaluation_context(tmp_path, {"words.py": words})
    outcome = write_file(ctx, "@evaluation/test_top.py", test)
    assert (area / "test_top.py").read_text() == test.replace("from top_words", "from words")
    assert outcome.facts["names_bound"] == ["no module top_words: from words import top_words"]
    for name, content in (
        ("test_b.py", test.replace("import top_words", "import top_words, shout")),  # words.py lacks shout
        ("test_c.py", test.replace("top_words import", "json import").replace("top_words(", "loads(")),
        ("test_d.py", test.replace("top_words import top_words", "top_words import *")),
    ):
        assert "names_bound" not in write_file(ctx, f"@evaluation/{name}", content).facts
        assert (area / name).read_text() == content
    for where, files in (
        ("two", {"words.py": words, "text.py": words}),
        ("own", {"words.py": words, "top_words.py": "X = 1\n"}),
    ):
        (tmp_path / where).mkdir()
        ctx, _, _ = evaluation_context(tmp_path / where, files)  # two define it; a module of that name exists
        assert "names_bound" not in write_file(ctx, "@evaluation/test_top.py", test).facts


def test_a_test_file_that_holds_no_test_is_not_code_yet() -> None:
    """heldout-17 roman: told its test file was to write again, the 1.5B model wrote it as one empty line
    and reported. A test file pytest finds no test in is not delivered yet; a test function, a method of
    any class (a `unittest.TestCase` is collected whatever its name), or a file that is no test file is."""
    assert python_problem("test_roman.py", "\n") == (
        "test_roman.py holds no test (a test_* function, or one in a Test* class)"
    )
    assert python_problem("tests/roman_test.py", "import pytest\n") is not None
    for fine in (
        "def test_a():\n    assert 1\n",
        "import unittest\n\n\nclass RomanCases(unittest.TestCase):\n    def test_a(self):\n        pass\n",
    ):
        assert python_problem("test_roman.py", fine) is None
    assert python_problem("roman.py", "\n") is None


def test_a_relative_import_in_a_file_of_no_package_is_the_absolute_one_it_can_only_mean(
    tmp_path: Path,
) -> None:
    """heldout-20 account: the Specialist's `from .account import Account` failed collection ("attempted
    relative import with no known parent package") in two cycles over a right `account.py`, and the
    revises broke it; heldout-19 csv-mean: the Evaluator's `from .csvmean import column_mean` the same.
    At the top of its area, beside no `__init__.py`, such a file is in no package: the import can only
    mean the module of the workspace it names, or the one that defines what it imports. In a package,
    deeper in the tree (a namespace package), or with no one meaning, the file stays as it was."""
    import os

    from pse.sandbox import Sandbox, SandboxLimits
    from pse.tools import ToolContext
    from pse.tools._files import write_file
    from sandbox_support import evaluation_context

    (tmp_path / "eval").mkdir()
    test = (
        "import pytest\nfrom .account import Account\n\n\ndef test_a():\n    assert Account().balance == 0\n"
    )
    ctx, _, area = evaluation_context(tmp_path / "eval", {"account.py": ACCOUNT})
    outcome = write_file(ctx, "@evaluation/test_mine.py", test)
    assert (area / "test_mine.py").read_text() == test.replace("from .account", "from account")
    assert outcome.facts["names_bound"] == ["no package here: from account import Account"]
    renamed = test.replace(".account import", ".bank import")  # no bank.py: account.py defines it
    assert write_file(ctx, "@evaluation/test_bank.py", renamed).facts["names_bound"] == [
        "no package here, no module bank: from account import Account"
    ]
    module_form = "from . import account\n\n\ndef test_a():\n    assert account.Account().balance == 0\n"
    write_file(ctx, "@evaluation/test_module.py", module_form)
    assert (area / "test_module.py").read_text().startswith("import account\n")

    space = tmp_path / "ws"
    space.mkdir()
    (space / "account.py").write_text(ACCOUNT)
    ws = ToolContext(
        Path(os.path.realpath(space)), Sandbox(space, SandboxLimits(timeout_s=30), "fallback"), writable=True
    )
    assert write_file(ws, "test_account.py", test).facts["names_bound"] == [
        "no package here: from account import Account"
    ]
    assert (space / "test_account.py").read_text() == test.replace("from .account", "from account")
    (space / "pkg").mkdir()
    (space / "pkg" / "account.py").write_text(ACCOUNT)
    for path in ("pkg/test_account.py", "test_nowhere.py"):  # a namespace package; no module, no owner
        content = (
            test
            if path.startswith("pkg/")
            else test.replace(".account", ".nowhere").replace("Account", "Nothing")
        )
        assert "names_bound" not in write_file(ws, path, content).facts
        assert (space / path).read_text() == content
    (space / "__init__.py").write_text("")
    assert "names_bound" not in write_file(ws, "test_again.py", test).facts  # the workspace is a package


def test_a_test_files_copy_of_the_function_it_tests_is_removed_and_the_delivered_one_imported(
    tmp_path: Path,
) -> None:
    """About half the held-out runs (heldout-15 to heldout-20) had a test file that started with its own
    copy of the function it tests, kept after the note at each write: its tests proved nothing of the
    delivered module. A module that is no test file keeps what it defines."""
    import os

    from pse.sandbox import Sandbox, SandboxLimits
    from pse.tools import ToolContext
    from pse.tools._files import write_file

    slug = "import re\n\n\ndef slugify(title):\n    return re.sub(r'\\W+', '-', title.lower()).strip('-')\n"
    (tmp_path / "slug.py").write_text(slug)
    ctx = ToolContext(
        Path(os.path.realpath(tmp_path)),
        Sandbox(tmp_path, SandboxLimits(timeout_s=30), "fallback"),
        writable=True,
    )
    test = (
        "import pytest\n\n\ndef slugify(title):\n    return '-'.join(title.lower().split())\n\n\n"
        "@pytest.mark.parametrize('title', ['Hello World'])\ndef test_slug(title):\n"
        "    assert slugify(title) == 'hello-world'\n"
    )
    outcome = write_file(ctx, "test_slug.py", test)
    assert outcome.facts["names_bound"] == [
        "removed slugify, a copy of slug.py's: the tests run the delivered one",
        "from slug import slugify",
    ]
    text = (tmp_path / "test_slug.py").read_text()
    assert text.startswith("from slug import slugify\nimport pytest\n") and "def slugify" not in text
    assert "def test_slug(title)" in text and "@pytest.mark.parametrize" in text
    helper = "def slugify(title):\n    return title\n"
    assert "names_bound" not in write_file(ctx, "helpers.py", helper).facts
    assert (tmp_path / "helpers.py").read_text() == helper
