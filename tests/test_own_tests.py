"""The Evaluator's own tests (`pse.tools._own_tests`): a workspace test copied under any name, or a
workspace test module imported, is not its own; a test with a case of its own is."""

from __future__ import annotations

from pathlib import Path

from pse.engine._workspace import outputs_note
from pse.tools._own_tests import borrowed_tests

THEIRS = """import pytest
from slug import slugify


def test_words():
    assert slugify("Hello World") == "hello-world"


class TestEdges:
    @pytest.mark.parametrize("title", ["", "!!"])
    def test_empty(self, title):
        assert slugify(title) == ""
"""


def test_a_copy_under_any_name_or_an_import_is_borrowed_and_a_case_of_its_own_is_not(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_slug.py").write_text(THEIRS)
    (tmp_path / "slug.py").write_text("def test_helper():\n    pass\n")  # no test file: never compared
    renamed = THEIRS.replace("def test_words():", 'def test_mine():\n    """Mine, honest."""')
    assert borrowed_tests(renamed, tmp_path) == [
        "test_mine is test_words of tests/test_slug.py",
        "test_empty is test_empty of tests/test_slug.py",
    ]
    method_as_function = (
        "import pytest\nfrom slug import slugify\n\n\n"
        '@pytest.mark.parametrize("title", ["", "!!"])\ndef test_blank(self, title):\n'
        '    assert slugify(title) == ""\n'
    )
    assert borrowed_tests(method_as_function, tmp_path) == ["test_blank is test_empty of tests/test_slug.py"]
    assert borrowed_tests("from tests.test_slug import *\n", tmp_path) == ["it imports tests.test_slug"]
    assert borrowed_tests("import conftest, test_slug\n", tmp_path) == ["it imports test_slug"]
    own = THEIRS.replace('"Hello World") == "hello-world"', '"A  b") == "a-b"').replace('"!!"', '"?"')
    assert borrowed_tests(own, tmp_path) == []
    assert borrowed_tests("def test_x(:\n", tmp_path) == []  # the write's own note says it does not parse


def test_a_workspace_test_reached_through_a_link_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_secret.py").write_text(THEIRS)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "test_link.py").symlink_to(outside / "test_secret.py")
    (workspace / "linked").symlink_to(outside)
    assert borrowed_tests(THEIRS, workspace) == []


def test_an_evaluator_that_owes_its_own_tests_is_shown_the_specialists_by_name_only(tmp_path: Path) -> None:
    """Shown the Specialist's test file, the 1.5B model's Evaluator wrote it back as its own on 9 of 12
    held-out test files. Where its own tests are owed, a test file opens its phase by its tests' names."""
    (tmp_path / "slug.py").write_text("def slugify(title):\n    return title\n")
    (tmp_path / "test_slug.py").write_text(THEIRS)
    (tmp_path / "test_broken.py").write_text("def test_x(:\n")
    paths = ["slug.py", "test_slug.py", "test_broken.py"]
    blind = outputs_note(tmp_path, paths, blind=True) or ""
    assert "def slugify(title):" in blind
    assert "assert slugify" not in blind
    assert (
        "test_slug.py: the Specialist's tests, named but not shown, so that yours are your own: test_words, "
        "test_empty (read_file shows them)"
    ) in blind
    assert "test_broken.py: a test file that does not parse as Python (read_file shows it)" in blind
    assert 'assert slugify("Hello World")' in (outputs_note(tmp_path, paths) or "")
