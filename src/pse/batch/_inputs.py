"""The rows of a batch: a JSON-lines file (one object of inputs a line) or a CSV file (a header of input
names). Every problem is reported at once, with its line, before anything runs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from pse.exceptions import UserError
from pse.tasks import Task

__all__ = ["MAX_ROWS", "read_rows"]

MAX_ROWS = 100_000


def read_rows(path: Path, task: Task) -> list[dict[str, str]]:
    """The inputs of each row, checked against the task's declared inputs.

    Raises:
        UserError: the file is missing, of an unknown kind, or has bad rows (all of them listed).
    """
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".ndjson", ".csv"):
        raise UserError(f"--inputs {path}: give a .jsonl file (one JSON object a line) or a .csv file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"--inputs {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--inputs {path}: cannot read it ({exc})") from None
    rows, problems = _csv(text) if suffix == ".csv" else _jsonl(text)
    for line, row in rows:
        try:
            task.resolve_inputs(row)
        except UserError as exc:
            problems.append(f"line {line}: {exc}")
    if not rows and not problems:
        problems.append("no rows")
    if len(rows) > MAX_ROWS:
        problems.append(f"{len(rows)} rows; one batch holds at most {MAX_ROWS}: split the file")
    if problems:
        shown = "\n  ".join(problems[:50]) + (
            f"\n  … and {len(problems) - 50} more" if len(problems) > 50 else ""
        )
        raise UserError(f"--inputs {path} has {len(problems)} problem(s), nothing was run:\n  {shown}")
    return [row for _, row in rows]


def _jsonl(text: str) -> tuple[list[tuple[int, dict[str, str]]], list[str]]:
    rows: list[tuple[int, dict[str, str]]] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            problems.append(f"line {number}: not JSON ({exc.args[0] if exc.args else exc})")
            continue
        if not isinstance(data, dict):
            problems.append(f"line {number}: a JSON object of inputs is expected, not {type(data).__name__}")
            continue
        bad = [k for k, v in data.items() if not isinstance(v, str | int | float | bool)]
        if bad:
            problems.append(f"line {number}: input(s) {sorted(bad)} must be text or a number")
            continue
        rows.append((number, {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}))
    return rows, problems


def _csv(text: str) -> tuple[list[tuple[int, dict[str, str]]], list[str]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        return [], []
    except csv.Error as exc:
        return [], [f"line 1: {exc}"]
    names = [h.strip() for h in header]
    problems: list[str] = []
    if any(not n for n in names) or len(set(names)) != len(names):
        problems.append("line 1: the header must name each column once")
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        for values in reader:
            number = reader.line_num
            if not values or not any(v.strip() for v in values):
                continue
            if len(values) != len(names):
                problems.append(f"line {number}: {len(values)} value(s) for {len(names)} column(s)")
                continue
            rows.append((number, {n: v for n, v in zip(names, values, strict=True) if v != ""}))
    except csv.Error as exc:
        problems.append(f"line {reader.line_num}: {exc}")
    return rows, problems
