"""Positive evidence of a pytest run: what the checking sessions recorded, judged by rules they cannot change.

A run proves something only when each session's checking process started, said what it collected, and
gave every collected test a result that passed (a skip or an xfail proves nothing: delivered code can
turn a failure into one), and ended; when no code of the product ran inside a checking process (a test
that `exec`s the delivered file makes that session's record the product's to write: "in-process,
forgeable"); and, on a full run, when each declared Python output is what `import` gives in the
workspace (no other file of the snapshot stands in for it) and the tests called into it. The calls are
counted in the checking process, from the product's answers; the records come from
`pse.product._checker`; the rules are here, in PSE's process.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pse.sandbox import CommandResult
from pse.tools._evidence import Manifest
from pse.tools._pyhints import parse_python
from pse.tools._record import Record

__all__ = ["Session", "output_facts", "unproven"]


@dataclass(slots=True)
class Session:
    """One author's checking session: its command, its record, whose tests it ran, what its product said."""

    result: CommandResult
    record: Record
    author: str
    product_output: str = ""
    """The end of what the product process wrote outside the calls (its stderr file), for the reader."""
    served: dict[str, str] = field(default_factory=dict)
    """The sha256 of each workspace file the product process was given (what was checked is what ran)."""


def unproven(
    sessions: Sequence[Session], manifest: Manifest, full: bool, sources: dict[str, bytes]
) -> list[str]:
    """Why these runs are not positive evidence, however they exited (empty: they are).

    `sources` holds the declared Python outputs' bytes as checked (a module with nothing to call is
    proven by its import)."""
    problems: list[str] = []
    collected = passed = 0
    for s in sessions:
        record = s.record
        for file, how in record.in_process[:3]:
            problems.append(
                f"in-process, forgeable: {file} of the product was {how}, in the process that records the "
                f"results of {s.author}'s tests; that session's results are the product's to write"
            )
        if record.collected is None:
            problems.append(f"{s.author}'s session left no record of what it collected (it broke early)")
            continue
        results = {c.id: c.outcome for c in record.results.values()}
        collected += len(record.collected)
        passed += sum(1 for i in record.collected if results.get(i) == "passed")
        unfinished = [i for i in record.collected if i not in results]
        if unfinished:
            problems.append(
                f"{len(unfinished)} collected test(s) have no result (the session ended early): "
                + unfinished[0]
            )
        elif record.finished is None:
            problems.append(f"{s.author}'s session did not end (it was cut short)")
        skipped = [i for i in record.collected if results.get(i) == "skipped"]
        if skipped:
            problems.append(
                f"{len(skipped)} test(s) skipped or xfailed ({skipped[0]}): a skipped test proves nothing "
                "and may hide a failure"
            )
    if collected == 0:
        problems.append("no test was collected: a run of no test proves nothing")
    elif passed == 0:
        problems.append("no test passed")
    problems += [
        f"{output}: `import {module}` in the workspace gives {shadow}, not the declared output"
        for output, module, shadow in manifest.shadows()
    ]
    if full:
        facts = output_facts(sessions, manifest, sources)
        for rule in manifest.coverage:
            if not any(facts[m]["proven"] for m in rule.modules):
                shown = rule.output if rule.modules == (rule.output,) else f"{rule.output} (no module in it)"
                problems.append(
                    f"{shown}: the tests never called its code (counted from the product process's answers); "
                    "tests that do not exercise the delivered file prove nothing about it"
                )
    return problems


def output_facts(
    sessions: Sequence[Session], manifest: Manifest, sources: dict[str, bytes]
) -> dict[str, Any]:
    """Per declared Python module: imported by the tests (from that file), calls into it, proven."""
    facts: dict[str, Any] = {}
    for module in sorted({m for rule in manifest.coverage for m in rule.modules}):
        imported = any(module in s.record.imported.values() for s in sessions)
        calls = sum(s.record.ran.get(module, 0) for s in sessions)
        callable_code = _defines_code(sources.get(module))
        facts[module] = {
            "imported": imported,
            "calls": calls,
            "proven": calls > 0 or (imported and not callable_code),
        }
    return facts


def _defines_code(source: bytes | None) -> bool:
    """The module defines a function or class (something a test can call); True when it cannot be read."""
    if source is None:
        return True
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return True
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    return any(isinstance(node, kinds) for node in ast.walk(tree))
