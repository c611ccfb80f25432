"""`pse.exceptions`: the hierarchy its docstring draws is the real one, and everything PSE raises lives there."""

from __future__ import annotations

import re

import pytest

import pse.engine
import pse.exceptions
import pse.web._runs
from pse.engine import State, check_transition
from pse.exceptions import IllegalTransition, InternalError, PSEError, TooManyRuns


def _drawn(title: str) -> dict[str, str | None]:
    """Each class of one tree of the module docstring, mapped to the parent it is drawn under."""
    doc = pse.exceptions.__doc__ or ""
    block = doc.split(title, 1)[1].split("\n\n", 2)[1]
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in block.splitlines():
        found = re.search(r"[A-Z]\w+", line)
        if found is None or line[: found.start()].strip(" │├└─") or " " not in line[found.end() :]:
            continue  # a continuation line of the text column
        depth = found.start() // 4 - 1
        stack[depth:] = [found.group()]
        parents[found.group()] = stack[depth - 1] if depth > 0 else None
    return parents


@pytest.mark.parametrize(("title", "root", "root_base"), [("Hierarchy::", "PSEError", Exception), ("Warnings", "PSEWarning", UserWarning)])  # fmt: skip
def test_the_drawn_hierarchy_is_the_class_hierarchy(title: str, root: str, root_base: type) -> None:
    drawn = _drawn(title)
    assert drawn[root] is None
    for name, parent in drawn.items():
        cls = getattr(pse.exceptions, name)
        assert cls.__bases__[0] is (getattr(pse.exceptions, parent) if parent else root_base), name
    exported = {n for n in pse.exceptions.__all__ if issubclass(getattr(pse.exceptions, n), getattr(pse.exceptions, root))}  # fmt: skip
    assert exported == set(drawn)


def test_every_exported_class_is_drawn() -> None:
    drawn = _drawn("Hierarchy::") | _drawn("Warnings")
    assert sorted(drawn) == sorted(pse.exceptions.__all__)


def test_an_illegal_transition_is_an_internal_error_and_an_assertion() -> None:
    with pytest.raises(IllegalTransition) as info:
        check_transition(State.PASSED, State.RUNNING)
    assert isinstance(info.value, InternalError) and isinstance(info.value, AssertionError)
    assert isinstance(info.value, PSEError)


def test_moved_exceptions_are_the_same_classes_where_they_were_used() -> None:
    assert pse.engine.IllegalTransition is IllegalTransition
    assert pse.web._runs.TooManyRuns is TooManyRuns
    assert issubclass(TooManyRuns, PSEError) and not issubclass(TooManyRuns, pse.exceptions.UserError)
