"""The native protocol's functions: a role's granted tools and its output functions, as JSON schemas.

In the native protocol (`PSE_PROTOCOL=native`) a role is offered, as the provider's function tools,

* one function per tool it is granted: the tool's parameters, every one a string, the required ones
  required (`tool_function`);
* the output functions that end its turn (`output_functions`), with strict schemas: `submit_plan`
  (Planner), `submit_report` (Specialist), `submit_verdict` (Evaluator), and `block` (Planner and
  Specialist; the Evaluator blocks with a BLOCKED verdict). No free-form status: the verdict's status and
  a block's reason are enums, and so are the verdict's criterion ids when the plan is known.

Their arguments become the same `<plan>`, `<report>`, `<verdict>` and `<blocked>` elements a DSML role
writes (`pse.protocol._native`), so the engine reads one format whichever protocol a role speaks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pse.events import SEVERITIES
from pse.protocol._tags import BLOCKED_REASONS, VERDICT_STATUSES
from pse.protocol._types import ToolSignature
from pse.roles import SINGLE_AGENT, Role

__all__ = ["OUTPUTS", "FunctionSpec", "OutputFunction", "output_functions", "tool_function"]


class OutputFunction(StrEnum):
    """A function that ends a role's turn: its plan, report, verdict, or a block."""

    SUBMIT_PLAN = "submit_plan"
    SUBMIT_REPORT = "submit_report"
    SUBMIT_VERDICT = "submit_verdict"
    BLOCK = "block"


OUTPUTS: Mapping[str, tuple[OutputFunction, ...]] = {
    Role.PLANNER: (OutputFunction.SUBMIT_PLAN, OutputFunction.BLOCK),
    Role.SPECIALIST: (OutputFunction.SUBMIT_REPORT, OutputFunction.BLOCK),
    Role.EVALUATOR: (OutputFunction.SUBMIT_VERDICT,),
    SINGLE_AGENT: (OutputFunction.SUBMIT_VERDICT,),  # the baseline ends with its verdict on itself
}
"""Each role's output functions: the final messages the engine reads from it (`engine._values.read_final`)."""


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """One function offered to a model: its name, what it does, its parameters' JSON schema, strictness."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _texts(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _object(properties: Mapping[str, dict[str, Any]], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def _strict(properties: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """A strict schema: every property required (strict function calling demands it), nothing else."""
    return _object(properties, list(properties))


def _items(description: str, ids: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "type": "array",
        "description": description,
        "items": _strict({"id": ids, "text": _text(text)}),
    }


def tool_function(signature: ToolSignature, description: str) -> FunctionSpec:
    """A tool as a function: every parameter a string, the required ones required.

    Not strict: a strict schema cannot leave a parameter out, and a tool's optional parameters have
    defaults the ToolAgent fills in.
    """
    properties = {}
    for param in signature.params:
        text = param.description or param.name
        if not param.required:
            text += f" (optional, default {param.default!r})"
        properties[param.name] = _text(text)
    required = [p.name for p in signature.params if p.required]
    return FunctionSpec(signature.name, description, _object(properties, required))


def _plan() -> FunctionSpec:
    return FunctionSpec(
        OutputFunction.SUBMIT_PLAN,
        "Submit your plan and end your turn. Its criteria are fixed once submitted.",
        _strict(
            {
                "goal": _text("the task's goal, neither widened nor narrowed"),
                "steps": _items("the steps, in order", _text("S1, S2, ..."), "what the step does"),
                "criteria": _items(
                    "the numbered acceptance criteria, at least one",
                    _text("AC1, AC2, ..."),
                    "checkable by someone who sees only the outputs and can run the checks",
                ),
                "outputs": _texts("every expected output: a path relative to the workspace"),
            }
        ),
        strict=True,
    )


def _report() -> FunctionSpec:
    return FunctionSpec(
        OutputFunction.SUBMIT_REPORT,
        "Submit your report once the plan's outputs exist, and end your turn.",
        _strict(
            {
                "artifacts": _texts("the files you produced or changed"),
                "evidence": _text("what you observed that supports the work (files read back, tool results)"),
                "assumptions": _text('what you assumed and why, or "none"'),
                "unresolved": _text('what is still open, or "none"'),
            }
        ),
        strict=True,
    )


def _nullable(kind: str, description: str) -> dict[str, Any]:
    return {"type": [kind, "null"], "description": description}


def _findings(criterion_ids: Sequence[str]) -> dict[str, Any]:
    """The verdict's findings, as `<finding id= severity= criterion= path= line=>` holds them (strict:
    every field present, null where the text protocol leaves an attribute out)."""
    criterion = _nullable("string", "the criterion it concerns, or null")
    if criterion_ids:
        criterion["enum"] = [*criterion_ids, None]
    return {
        "type": "array",
        "description": "problems you found, ranked (may be empty); a PASS with a high one does not stand",
        "items": _strict(
            {
                "id": _text("F1, F2 … in order"),
                "severity": {
                    "type": "string",
                    "enum": list(SEVERITIES),
                    "description": "high: the change is wrong, unsafe or breaks something; medium: a real "
                    "shortcoming that does not break the goal; low: style, naming, a nicety",
                },
                "text": _text("the problem, in a sentence"),
                "criterion": criterion,
                "path": _nullable("string", "the workspace file it is in, or null"),
                "line": _nullable("integer", "its line in that file, or null"),
            }
        ),
    }


def _verdict(criterion_ids: Sequence[str], findings: bool = False) -> FunctionSpec:
    ids: dict[str, Any] = _text("the id of a criterion of the plan")
    if criterion_ids:
        ids["enum"] = list(criterion_ids)
    found = {"findings": _findings(criterion_ids)} if findings else {}
    return FunctionSpec(
        OutputFunction.SUBMIT_VERDICT,
        "Submit your verdict on the plan's criteria, from evidence you gathered yourself, and end your turn.",
        _strict(
            {
                "status": {
                    "type": "string",
                    "enum": list(VERDICT_STATUSES),
                    "description": "PASS: every criterion met and every required check passed in this "
                    "cycle; PARTIAL: the Specialist can fix what is wrong (a failing or missing test, "
                    "a check's finding, an output missing or wrong); FAIL: only when the plan itself is "
                    "wrong; BLOCKED: you cannot judge",
                },
                "reason_code": _text("one UPPER_SNAKE word, e.g. ALL_MET, TESTS_FAILING, OUTPUT_MISSING"),
                "criteria": {
                    "type": "array",
                    "description": "one entry per criterion of the plan",
                    "items": _strict(
                        {
                            "id": ids,
                            "met": {"type": "boolean", "description": "whether the criterion is met"},
                            "finding": _text("the evidence that decides it: a test, a file line, a number"),
                        }
                    ),
                },
                **found,
                "summary": _text("one or two sentences"),
            }
        ),
        strict=True,
    )


def _block() -> FunctionSpec:
    return FunctionSpec(
        OutputFunction.BLOCK,
        "Stop: you cannot proceed (data or permission missing, criteria that contradict each other). "
        "Use it instead of guessing or working around the problem; it ends your turn.",
        _strict(
            {
                "reason_code": {"type": "string", "enum": list(BLOCKED_REASONS), "description": "why"},
                "detail": _text("what is missing or in conflict, and what it is needed for"),
            }
        ),
        strict=True,
    )


def output_functions(
    role: str, criterion_ids: Sequence[str] = (), *, findings: bool = False
) -> list[FunctionSpec]:
    """The output functions of `role`; `criterion_ids` (the plan's) become the enum of a verdict's ids;
    `findings`: the verdict carries findings too (an Evaluator told of them, `asks_findings`)."""
    made = {
        OutputFunction.SUBMIT_PLAN: _plan,
        OutputFunction.SUBMIT_REPORT: _report,
        OutputFunction.BLOCK: _block,
    }
    return [
        _verdict(criterion_ids, findings) if name == OutputFunction.SUBMIT_VERDICT else made[name]()
        for name in OUTPUTS.get(role, ())
    ]
