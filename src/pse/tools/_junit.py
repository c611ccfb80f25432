"""Read pytest's JUnit XML report: the per-test outcomes a check's verdict is computed from.

The report is written by pytest into the command's outbox, outside the workspace, and read back by PSE;
the text a run prints is for the role to read, never what the gates trust. The XML comes from a process
that ran untrusted code, so it is parsed defensively: size-capped, no DOCTYPE (so no entity can be
declared, let alone expanded), and any shape problem makes the report invalid rather than guessed at.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

__all__ = ["COLLECTION_FAILURE", "JUNIT_LIMIT", "JunitReport", "TestOutcome", "parse_junit"]

JUNIT_LIMIT = 16 * 1024 * 1024
"""Largest report PSE reads."""


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """One test case: where it lives (relative to pytest's rootdir), its name and how it ended."""

    file: str
    name: str
    outcome: str  # passed | failed | errors | skipped
    message: str = ""
    """A failure's or error's first line as pytest reported it (`NameError: …`), at most `_MESSAGE` long."""


@dataclass(frozen=True, slots=True)
class JunitReport:
    """Every test case of one run, and their counts."""

    cases: tuple[TestOutcome, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)


_MESSAGE = 200


COLLECTION_FAILURE = "collection failure"
"""pytest's whole message for a test module it could not import; PSE adds the error's own line to it."""
_FILE_LINE = re.compile(r'^File "[^"]*", line (\d+)')


def _message(case: ElementTree.Element) -> str:
    for child in case:
        if child.tag in ("failure", "error"):
            text = (child.get("message") or child.text or "").strip()
            if text == COLLECTION_FAILURE:
                return _collection_failure(child.text or "")[:_MESSAGE]
            return text.splitlines()[0][:_MESSAGE] if text else ""
    return ""


def _collection_failure(text: str) -> str:
    """`collection failure: SyntaxError: unmatched ']' (line 25: assert f(x) == [1]])`: the last `E` line
    of pytest's traceback, and the line of the module it names with that line's code, never a path (a
    sandbox's paths differ from run to run). Told only "collection failure", the 1.5B model could not find
    its stray bracket."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    if not lines:
        return COLLECTION_FAILURE
    where = ""
    for index, line in enumerate(lines):
        found = _FILE_LINE.match(line)
        if found:
            code = " ".join(lines[index + 1].split()) if index + 2 < len(lines) else ""  # not the error
            shown = code and not set(code) <= {"^", "~", " "}
            where = f" (line {found.group(1)}" + (f": {code}" if shown else "") + ")"
    return f"{COLLECTION_FAILURE}: {lines[-1]}{where}"


def _outcome(case: ElementTree.Element) -> str:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "errors"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"


def parse_junit(data: bytes) -> JunitReport | None:
    """The report in `data`, or None when it is missing, oversized or not pytest's JUnit XML."""
    if not data or len(data) > JUNIT_LIMIT or b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        return None
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return None
    suites = [root] if root.tag == "testsuite" else list(root) if root.tag == "testsuites" else []
    if not suites or any(suite.tag != "testsuite" for suite in suites):
        return None
    cases: list[TestOutcome] = []
    for suite in suites:
        for case in suite.iter("testcase"):
            name = case.get("name", "")
            where = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
            cases.append(TestOutcome(where, name, _outcome(case), _message(case)))
    counts = dict.fromkeys(("passed", "failed", "errors", "skipped"), 0)
    for case_outcome in cases:
        counts[case_outcome.outcome] += 1
    return JunitReport(tuple(cases), counts)
