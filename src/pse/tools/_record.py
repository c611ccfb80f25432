"""The record of a checking session: what `pse.product._checker` wrote to its report pipe, read by PSE.

The checking process writes one JSON object a line to a pipe only it holds (the product process it
measures never does). The record comes from a process that ran tests, so it is read defensively: capped,
line by line, each line's shape checked; a line that is not one of the known kinds is ignored, and what
a session never wrote (no list of collected tests, no end) is absent, never guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COLLECTION_FAILURE", "FAULT_HEADING", "RECORD_LIMIT", "Record", "TestOutcome", "read_record"]

RECORD_LIMIT = 16 * 1024 * 1024
"""Most bytes of one session's record PSE reads."""
COLLECTION_FAILURE = "collection failure"
"""What a test module that could not be imported fails with; PSE adds the error's own line to it."""
FAULT_HEADING = "Where the code failed"
"""The heading of what a revise brief shows of the lines the delivered code raised at (`engine`); a doer
told of them writes first (`models`): it has the file, a look would only find it again."""
_MESSAGE = 200
_FILE_LINE = re.compile(r'^File "[^"]*", line (\d+)')
_WHERE = re.compile(r"[A-Za-z0-9_@./+-]{1,200}:\d{1,6}")
_OUTCOMES = frozenset({"passed", "failed", "errors", "skipped"})


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """One test: its id (`file::name`, the file named inside its area), how it ended, and why."""

    id: str
    outcome: str  # passed | failed | errors | skipped
    message: str = ""
    """A failure's or error's first line (`NameError: …`), at most `_MESSAGE` long."""
    where: str = ""
    """`file:line`: the workspace file's line the failure's exception was raised at, in the product."""
    at: str = ""
    """`file:line`: the workspace file's line the failure surfaced at in the check (a failing `assert`)."""

    @property
    def file(self) -> str:
        return self.id.partition("::")[0]


@dataclass(slots=True)
class Record:
    """What one checking session recorded; None where it never got that far."""

    started: bool = False
    configured: bool = False
    """pytest took its configuration (its plugins loaded, its ini-file read)."""
    no_product: str | None = None
    """Why the product process never said it was ready (the machinery's failure), if it did not."""
    collected: list[str] | None = None
    results: dict[str, TestOutcome] = field(default_factory=dict)
    collect_errors: list[TestOutcome] = field(default_factory=list)
    imported: dict[str, str | None] = field(default_factory=dict)
    """Each delivered module the tests imported, and the workspace file the product imported it from."""
    ran: dict[str, int] = field(default_factory=dict)
    """Calls the tests made into each workspace file, summed over the session's tests."""
    in_process: list[tuple[str, str]] = field(default_factory=list)
    """Files of the product compiled or loaded inside the checking process, and how."""
    finished: int | None = None

    @property
    def cases(self) -> list[TestOutcome]:
        """Every test with a result, then every test module that could not be collected (an error)."""
        return [*self.results.values(), *self.collect_errors]


def _text(value: object, limit: int = 4000) -> str:
    return value[:limit] if isinstance(value, str) else ""


def read_record(data: bytes) -> Record:
    """The record in `data` (at most `RECORD_LIMIT` bytes are read)."""
    record = Record()
    for line in data[:RECORD_LIMIT].splitlines():
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            _take(record, entry)
    return record


def _take(record: Record, entry: dict[str, Any]) -> None:
    kind = entry.get("kind")
    if kind == "started":
        record.started = True
    elif kind == "configured":
        record.configured = True
    elif kind == "no_product":
        record.no_product = _text(entry.get("why")) or "it never said it was ready"
    elif kind == "collected" and isinstance(entry.get("ids"), list):
        record.collected = [i for i in entry["ids"] if isinstance(i, str)]
    elif kind == "collect_error" and isinstance(entry.get("id"), str):
        record.collect_errors.append(
            TestOutcome(entry["id"], "errors", _collection_failure(_text(entry.get("text"))))
        )
    elif kind == "test" and isinstance(entry.get("id"), str) and entry.get("outcome") in _OUTCOMES:
        first = _text(entry.get("message")).strip().splitlines()
        record.results[entry["id"]] = TestOutcome(
            entry["id"],
            entry["outcome"],
            first[0][:_MESSAGE] if first else "",
            _place(entry.get("where")),
            _place(entry.get("at")),
        )
        ran = entry.get("ran")
        for file, count in ran.items() if isinstance(ran, dict) else ():
            if isinstance(file, str) and type(count) is int and count > 0:
                record.ran[file] = record.ran.get(file, 0) + count
    elif kind == "imported" and isinstance(entry.get("module"), str):
        file = entry.get("file")
        record.imported[entry["module"]] = file if isinstance(file, str) else None
    elif kind == "in_process" and isinstance(entry.get("file"), str):
        record.in_process.append((entry["file"], _text(entry.get("how"), 100)))
    elif kind == "finished" and type(entry.get("exit")) is int:
        record.finished = entry["exit"]


def _place(value: object) -> str:
    """A `file:line` inside the workspace, or "" for anything else."""
    place = _text(value, 300)
    return place if _WHERE.fullmatch(place) and ".." not in place.split("/") else ""


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
    return f"{COLLECTION_FAILURE}: {lines[-1]}{where}"[:_MESSAGE]
